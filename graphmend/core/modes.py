"""How a target runs: its *run mode*, one vocabulary for capture, fix, check and bench.

* ``eval`` (the default): every module of the target in ``.eval()`` under
  ``torch.no_grad()``, as inference runs;
* ``train``: every module in ``.train()``, grad on, and the call followed by a backward of a
  scalar loss: ``Target.loss(outputs)`` where the target gives one, else the sum of its
  floating outputs that require grad.

Importing this module is cheap (no torch); the helpers that run a target import torch.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator, Optional

EVAL, TRAIN = "eval", "train"
RUN_MODES = (EVAL, TRAIN)
SCRIPT_MODE = "script"  # mend run: the program decided how it ran


class ModeError(ValueError):
    """A bad ``--modes`` / ``[tool.mend] modes`` value; the message names it."""


def parse_modes(values: Iterable[str] | str, source: str = "--modes") -> tuple[str, ...]:
    """``"eval,train"`` or ``["train"]`` -> the modes in canonical order (eval first)."""
    if isinstance(values, str):
        values = [values]
    given = [v.strip().lower() for value in values for v in str(value).split(",") if v.strip()]
    bad = [v for v in given if v not in RUN_MODES]
    if bad or not given:
        raise ModeError(f"{source}: expected eval, train or eval,train, got {','.join(bad) or 'nothing'!r}")
    return tuple(m for m in RUN_MODES if m in given)


def modules_of(fn: Any) -> list:
    """The ``nn.Module``s a target's callable runs: the callable itself, the owner of a bound
    method, a ``functools.partial``'s function, or modules a closure or lambda captured."""
    import torch

    found: list = []

    def visit(obj: Any, depth: int) -> None:
        if depth > 3 or obj is None:
            return
        if isinstance(obj, torch.nn.Module):
            if not any(obj is m for m in found):
                found.append(obj)
            return
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, torch.nn.Module):
            visit(owner, depth + 1)
            return
        inner = getattr(obj, "func", None)  # functools.partial
        if inner is not None and callable(inner):
            visit(inner, depth + 1)
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, torch.nn.Module) or callable(value):
                visit(value, depth + 1)

    visit(fn, 0)
    return found


def module_of(fn: Any):
    """The target's main module (the first ``modules_of`` finds), or None."""
    found = modules_of(fn)
    return found[0] if found else None


@contextlib.contextmanager
def run_mode(fn: Any, mode: str) -> Iterator[None]:
    """Put the target's modules in ``mode`` (``.train()`` / ``.eval()``) with grad on or off
    for the block; every module's ``training`` flag is restored afterwards."""
    import torch

    modules = modules_of(fn)
    flags = [(m, m.training) for root in modules for m in root.modules()]
    for m in modules:
        m.train(mode == TRAIN)
    try:
        with (torch.enable_grad() if mode == TRAIN else torch.no_grad()):
            yield
    finally:
        for m, was in flags:
            m.training = was


def floating_outputs(out: Any) -> list:
    """Every floating-point tensor in ``out`` (nested containers, dicts, dataclasses and
    ``ModelOutput``s) that requires grad."""
    import torch

    found: list = []

    def visit(o: Any) -> None:
        if isinstance(o, torch.Tensor):
            if o.is_floating_point() and o.requires_grad:
                found.append(o)
        elif isinstance(o, (list, tuple)):
            for v in o:
                visit(v)
        elif isinstance(o, dict) or (hasattr(o, "keys") and hasattr(o, "__getitem__")):
            try:
                for k in o.keys():
                    visit(o[k])
            except Exception:  # a user mapping whose keys() or [] raises: its values go unvisited
                pass
        elif hasattr(o, "__dataclass_fields__"):
            for k in o.__dataclass_fields__:
                visit(getattr(o, k, None))

    visit(out)
    return found


def training_loss(out: Any, loss: Optional[Callable[[Any], Any]] = None) -> Any:
    """The scalar a train step backwards through, or None when there is none: ``loss(out)``
    when the target gives ``loss``, else the sum of the floating outputs that require grad."""
    if loss is not None:
        value = loss(out)
        return value if getattr(value, "requires_grad", False) else None
    outs = floating_outputs(out)
    return sum(o.float().sum() for o in outs) if outs else None


def cannot_backward(fn: Any, loss: Optional[Callable[[Any], Any]] = None) -> str:
    """Why a train step has nothing to backward through: one line for the report."""
    params = [p for m in modules_of(fn) for p in m.parameters() if p.requires_grad]
    if loss is not None:
        return "cannot train: the target's loss does not require grad"
    if not params:
        return "cannot train: no floating-point output requires grad (the target has no parameters requiring grad)"
    return "cannot train: no floating-point output requires grad"
