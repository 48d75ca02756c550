"""The behaviours a user can observe, one call at a time (imports torch lazily).

A *record* is what one call of the target showed in one mode: its outputs or its exception
(type and message), the caller's inputs afterwards (a side that mutates them differs), the
module's buffers and the RNG state after the call, and in train mode the input and
parameter gradients of a backward through every floating output. The original side makes
records; the patched side makes them again, in the same order from the same weights and
seeds, and ``compare_records`` says where they differ.

Modes (``eval`` and ``train`` are the run modes of ``graphmend.core.modes``):
* ``eval``: the module in ``.eval()``, under ``torch.no_grad()``;
* ``train``: the module in ``.train()``, grad on, floating inputs leaves that require
  grad (passed as copies, so in-place use of an input is legal as it is for a caller's
  tensor), then ``backward`` of the target's ``loss`` (else the sum of every floating
  output that requires grad);
* ``autocast``: ``eval`` under ``torch.autocast`` (bfloat16 on CPU, float16 on CUDA);
* ``autocast_train``: ``train`` with the forward under that autocast and the backward after
  it, as mixed-precision training runs (the example input only); the gradients are compared
  in the autocast dtype, as the outputs are;
* ``float64``: ``train`` with the module and the floating inputs cast to float64 (after
  the others, before ``bf16``: the cast is in place). It decides one question: a float32
  train-mode difference within the rounding of the tensor's scale (a backward that sums
  in another order) is rounding only if the same call agrees in float64;
* ``bf16``: ``eval`` with the module and the floating inputs cast to bfloat16 (run last:
  the cast is in place).
"""

from __future__ import annotations

import random
from typing import Any, Optional

from graphmend.core.modes import EVAL, TRAIN, training_loss
from graphmend.verify import NOTHING_TO_TRAIN
from graphmend.verify.compare import compare, to_plain
from graphmend.verify.inputs import map_tensors, tensors

AUTOCAST, AUTOCAST_TRAIN, BF16, F64 = "autocast", "autocast_train", "bf16", "float64"
# the names reports give the checks (what was proven); "inputs", "exceptions" and "arms"
# are compared in every mode that ran
CHECK_NAMES = {EVAL: "eval", TRAIN: "train+grad", AUTOCAST: "autocast", AUTOCAST_TRAIN: "train+grad autocast",
               BF16: "bf16", F64: "train+grad float64"}
GRAD_MODES = (TRAIN, F64, AUTOCAST_TRAIN)  # the module in train(), grad on, a backward after the call
AMP_MODES = (AUTOCAST, AUTOCAST_TRAIN)  # the forward under torch.autocast
_MSG = 500  # characters of an exception message compared


def device_of(module, args, kwargs) -> str:
    found = [t.device.type for t in tensors((args, kwargs))]
    if module is not None:
        found += [p.device.type for p in module.parameters()][:1]
    return next((d for d in found if d != "cpu"), "cpu")


def autocast_dtype(device: str):
    import torch

    return torch.float16 if device == "cuda" else torch.bfloat16


def exception_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()[:_MSG]}"


def _seed(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import sys

        np = sys.modules.get("numpy")
        if np is not None:
            np.random.seed(seed % (2 ** 32))
    except Exception:
        pass


def _state(module) -> tuple[dict, dict]:
    """Buffers (values) and parameters' gradients of ``module`` (None where there is none)."""
    if module is None:
        return {}, {}
    buffers = {k: v.detach().clone().cpu() for k, v in module.named_buffers()}
    grads = {k: (None if p.grad is None else p.grad.detach().clone().cpu()) for k, p in module.named_parameters()}
    return buffers, grads


def run_call(fn: Any, module, args: tuple, kwargs: dict, mode: str, seed: int, loss=None) -> dict:
    """Call ``fn`` once in ``mode`` and return its record (plain containers of CPU tensors);
    ``loss`` is the target's own (``Target.loss``), else train mode backwards the sum of
    the floating outputs."""
    import contextlib

    import torch

    rec: dict[str, Any] = {"mode": mode, "seed": seed}
    flags = [(m, m.training) for m in module.modules()] if module is not None else []
    leaves: list = []
    if module is not None:
        module.train(mode in GRAD_MODES)
    if mode in GRAD_MODES:
        if module is not None:
            module.zero_grad(set_to_none=True)

        def leaf(t):
            if t.is_floating_point():
                lt = t.detach().clone().requires_grad_(True)
                leaves.append(lt)
                return lt.clone()  # the caller's tensor: not a leaf, so in-place use stays legal
            return t.clone()

        args, kwargs = map_tensors(args, leaf), map_tensors(kwargs, leaf)
    else:
        args, kwargs = map_tensors(args, lambda t: t.clone()), map_tensors(kwargs, lambda t: t.clone())
    ctx = torch.enable_grad() if mode in GRAD_MODES else torch.no_grad()
    amp = contextlib.nullcontext()
    if mode in AMP_MODES:
        device = device_of(module, args, kwargs)
        rec["precision"] = str(autocast_dtype(device)).replace("torch.", "")
        amp = torch.autocast(device_type=device, dtype=autocast_dtype(device))
    _seed(seed)
    try:
        with ctx:
            with amp:
                out = fn(*args, **kwargs)
            if mode in GRAD_MODES:  # after autocast, as mixed-precision training does
                scalar = training_loss(out, loss)
                rec["differentiable"] = scalar is not None
                if scalar is not None:
                    scalar.backward()
        rec["status"] = "ok"
        rec["out"] = to_plain(out)
    except Exception as exc:
        rec["status"] = "raised"
        rec["exc"] = exception_text(exc)
    finally:
        for m, was in flags:
            m.training = was
    rec["inputs_after"] = to_plain((args, kwargs))
    rec["rng"] = torch.get_rng_state()
    buffers, grads = _state(module)
    rec["buffers"] = buffers
    if mode in GRAD_MODES:
        rec["grads_in"] = [None if t.grad is None else t.grad.detach().clone().cpu() for t in leaves]
        rec["grads_param"] = grads
        if module is not None:
            module.zero_grad(set_to_none=True)
    return rec


def train_unusable(rec: dict, module, has_leaves: bool) -> Optional[str]:
    """Why the original's first train-mode call cannot serve as a train check, or None."""
    if rec.get("status") == "raised":
        return f"the original raises in train mode: {rec['exc'][:200]}"
    if module is None and not has_leaves:
        return NOTHING_TO_TRAIN
    if not rec.get("differentiable"):
        return "no floating-point output requires grad"
    return None


def compare_outcome(want: dict, got: dict, tolerance: Optional[dict], scaled: bool = False) -> Optional[str]:
    """What the call returned or raised, and the gradients it produced: None when ``got``
    shows what ``want`` showed, else the first difference (``scaled``: as ``compare``)."""
    if want["status"] != got["status"]:
        w = f"raised {want['exc']}" if want["status"] == "raised" else "returned"
        g = f"raised {got['exc']}" if got["status"] == "raised" else "returned"
        return f"original {w}, patched {g}"
    if want["status"] == "raised":
        # (a message the original itself varies from run to run: its type alone)
        same = (want["exc"].split(":", 1)[0] == got["exc"].split(":", 1)[0] if want.get("exc_type_only")
                else want["exc"] == got["exc"])
        if not same:
            return f"original raised {want['exc']}, patched raised {got['exc']}"
    else:
        why = (compare(map_tensors(want["out"], _kind), map_tensors(got["out"], _kind), "output", tolerance)
               or compare(_at_precision(want), _at_precision(got), "output", tolerance, scaled=scaled))
        if why:
            return why
    # under autocast the gradients went through its dtype as well: compared in it
    return _compare_named(want, got, (("grads_in", "the gradient of input"),
                                      ("grads_param", "the gradient of parameter")), tolerance, scaled,
                          want.get("precision"))


def _kind(t) -> str:
    return f"{str(t.dtype).replace('torch.', '')} tensor of shape {tuple(t.shape)}"


def _at_precision(rec: dict) -> Any:
    """The outputs as precise as the call computed them: under autocast a float32 output
    went through the autocast dtype, and carries its rounding (an op run in another order
    rounds elsewhere), so it is compared in that dtype, with that dtype's tolerance."""
    precision = rec.get("precision")
    if not precision:
        return rec["out"]
    return map_tensors(rec["out"], lambda t: _to_precision(t, precision))


def _to_precision(t: Any, precision: str) -> Any:
    import torch

    return t.to(getattr(torch, precision)) if isinstance(t, torch.Tensor) and t.is_floating_point() else t


def _compare_named(want: dict, got: dict, keys, tolerance, scaled: bool = False,
                   precision: Optional[str] = None) -> Optional[str]:
    for key, label in keys:
        if key not in want:
            continue
        w, g = want[key], got.get(key)
        names = list(w) if isinstance(w, dict) else list(range(len(w)))
        if isinstance(w, dict) and (not isinstance(g, dict) or set(w) != set(g)):
            return f"{label}s differ in name ({sorted(w)} vs {sorted(g or {})})"
        for n in names:
            a, b = w[n], g[n] if isinstance(g, dict) or n < len(g) else None
            if precision:  # as _at_precision does for the outputs
                a, b = _to_precision(a, precision), _to_precision(b, precision)
            why = compare(a, b, f"{label} {n}", tolerance, scaled=scaled)
            if why:
                return why
    return None


def compare_records(want: dict, got: dict, where: str, tolerance: Optional[dict],
                    scaled: bool = False) -> Optional[str]:
    """None when ``got`` (patched) shows what ``want`` (original) showed, else the first
    difference, in one line that names the mode, the input and the value (``scaled``: as
    ``compare``)."""
    import torch

    why = (compare_outcome(want, got, tolerance, scaled)
           or _prefixed(compare(want["inputs_after"], got["inputs_after"], "the caller's inputs", tolerance,
                                scaled=scaled), " (after the call)")
           or _compare_named(want, got, (("buffers", "buffer"),), tolerance, scaled))
    if why:
        return f"{where}: {why}"
    if not torch.equal(want["rng"], got["rng"]):
        return f"{where}: the RNG state after the call differs (random numbers drawn differently)"
    return None


def _prefixed(why: Optional[str], suffix: str) -> Optional[str]:
    return f"{why}{suffix}" if why else None
