"""Inputs for the differential run: the example and perturbed variants, and moving or
casting inputs and modules to a device and dtype (torch, lazily; the bench's arms cast with
``convert`` too)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterator, Optional

from graphmend.core.calls import batch_and_sequence, map_tensors, tensors  # noqa: F401  (verify's, too)

# name -> what happens to floating-point tensors (ints and bools kept, except "random")
VARIANTS: list[str] = ["example", "negated", "random", "scaled_x10", "scaled_x0.1", "zeros", "random_2", "random_3",
                        # only run while a rewritten branch has not gone both ways: overflow
                        # checks (x1000), thresholds on positions / lengths (integers halved),
                        # ids past a vocabulary or a maximum length (integers doubled, plus one),
                        # masks all true and all false
                        "scaled_x1000", "ints_halved", "ints_doubled", "bools_true", "bools_false"]


# the shapes and layouts where an operation of a torch.where arm stops being total
# (rewrites/fixes/total.py): an empty batch (``x.max()`` raises), a batch of one (unbiased
# ``var`` is NaN), an empty sequence, both at once (an empty batch padded to the longest of
# its sequences: a condition vacuously true over no rows can take an arm that reduces over
# the empty sequence), every position of a sequence kept, a row of a mask all
# masked (``softmax`` of a row all -inf is NaN), ``channels_last`` 4-D maps and strided views
# (``view`` raises); the same values otherwise. Run on every target whose patch rewrote a
# condition, each one that changes the example.
SHAPES: list[str] = ["empty_batch", "batch_of_one", "empty_sequence", "empty_batch_and_sequence", "full_sequence",
                     "masked_row", "channels_last", "strided"]


def _varied(name: str, t, gen):
    """One tensor as variant ``name`` makes it."""
    import torch

    if name == "example":
        return t.clone()
    if t.dtype.is_floating_point:
        if name == "negated":
            return -t
        if name == "scaled_x10":
            return t * 10
        if name == "scaled_x0.1":
            return t * 0.1
        if name == "scaled_x1000":
            return t * 1000
        if name == "zeros":
            return torch.zeros_like(t)
        if name.startswith("random"):
            scale = t.abs().max().item() if t.numel() else 1.0
            return (torch.randn(t.shape, generator=gen, dtype=torch.float32) * (scale or 1.0)).to(t.dtype)
    if name == "ints_halved" and t.dtype in (torch.int64, torch.int32):
        return torch.div(t, 2, rounding_mode="floor")
    if name == "ints_doubled" and t.dtype in (torch.int64, torch.int32):
        return t * 2 + 1
    if name in ("bools_true", "bools_false") and t.dtype == torch.bool:
        return torch.full_like(t, name == "bools_true")
    if name.startswith("random") and t.dtype in (torch.int64, torch.int32) and t.numel():
        lo, hi = int(t.min()), int(t.max())
        return torch.randint(lo, hi + 1, t.shape, generator=gen, dtype=t.dtype)
    return t.clone()


def _generator(name: str, seed: int):
    import torch

    return torch.Generator().manual_seed(seed + VARIANTS.index(name) if name in VARIANTS else seed)


def variant(name: str, args: tuple, kwargs: dict, seed: int = 0) -> tuple[tuple, dict]:
    gen = _generator(name, seed)
    return map_tensors(args, lambda t: _varied(name, t, gen)), map_tensors(kwargs, lambda t: _varied(name, t, gen))


# the value variants an edge shape is run with, in this order, while its calls have met one
# arm of a rewritten condition only: both arms then meet the edge's layout
EDGE_VARIANTS: list[str] = ["negated", "scaled_x10", "scaled_x0.1", "scaled_x1000", "zeros"]


def edge_inputs(args: tuple, kwargs: dict, seed: int, window) -> Iterator[tuple[str, tuple, dict]]:
    """(name, args, kwargs): each of ``SHAPES`` that changes the example, each followed, in
    its layout, by ``EDGE_VARIANTS`` while its calls have met one arm only. ``window``
    watches the rewritten conditions: ``start()`` as an edge begins, ``one_way()`` whether
    some condition evaluated since went one way only, ``never_flipped()`` whether one has
    gone one way only on every input so far (each read once the calls of what was yielded
    have run: a generator resumes after them). Once an edge has run every variant and met one
    arm only, later edges run none while a condition has never gone the other way anywhere:
    one no sign or scale flips (always true on this model) would cost every edge five more
    inputs for nothing."""
    exhausted = False
    for name in SHAPES:
        edge = shaped(name, args, kwargs)
        if edge is None:
            continue
        skip = exhausted and window.never_flipped()
        window.start()
        yield (name, *edge)
        tried_all = not skip
        for how in () if skip else EDGE_VARIANTS:
            other = relaid(how, *edge, seed) if window.one_way() else None
            if other is None:
                tried_all = False
                break
            yield (f"{name}_{how}", *other)
        exhausted = exhausted or tried_all and window.one_way()


def relaid(name: str, args: tuple, kwargs: dict, seed: int = 0) -> Optional[tuple[tuple, dict]]:
    """Variant ``name`` of an edge input with every tensor's strides kept (a ``channels_last``
    map or a strided view stays one), or None where no tensor it varies has an element.
    ``negated`` also inverts a boolean tensor: a condition on a mask (``mask.any()``) then
    takes its other arm in the edge's layout, as a condition on values does."""
    import torch

    gen = _generator(name, seed)
    changed = False

    def f(t):
        nonlocal changed
        inverted = name == "negated" and t.dtype == torch.bool
        if not (t.dtype.is_floating_point or inverted) or not t.numel():
            return t
        changed = True
        with torch.no_grad():
            out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
            out.copy_(~t if inverted else _varied(name, t, gen))
        return out.requires_grad_(t.requires_grad) if not inverted else out

    a, k = map_tensors(args, f), map_tensors(kwargs, f)
    return (a, k) if changed else None


def filled(value: float, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Every floating tensor filled with ``value`` (a constant a rewritten condition
    compares against: the tie, where a rounding of the threshold shows), integer tensors
    with it too when it is a whole number; other tensors kept."""
    import torch

    def f(t):
        if t.dtype.is_floating_point:
            return torch.full_like(t, value)
        if math.isfinite(value) and value == int(value) and t.dtype in (torch.int64, torch.int32):
            return torch.full_like(t, int(value))
        return t.clone()

    return map_tensors(args, f), map_tensors(kwargs, f)


def shaped(name: str, args: tuple, kwargs: dict) -> Optional[tuple[tuple, dict]]:
    """The example reshaped as ``name`` of ``SHAPES`` says, or None where that changes nothing.
    The batch is dim 0 of the first tensor with a dim, the sequence dim 1 of the first with
    two: every tensor of that size there is cut with it, so inputs stay consistent."""
    import torch

    batch, seq = batch_and_sequence(args, kwargs)
    changed = False

    def f(t):
        nonlocal changed
        out = t.clone()
        if name == "empty_batch" and t.dim() >= 1 and t.shape[0] == batch and batch > 0:
            out = t[:0].clone()
        elif name == "batch_of_one" and t.dim() >= 1 and t.shape[0] == batch and batch > 1:
            out = t[:1].clone()
        elif name == "empty_sequence" and t.dim() >= 2 and t.shape[1] == seq and seq > 0:
            out = t[:, :0].clone()
        elif name == "empty_batch_and_sequence" and batch and seq and t.dim() >= 1:
            if t.shape[0] == batch:
                out = out[:0]
            if t.dim() >= 2 and t.shape[1] == seq:
                out = out[:, :0]
            out = out.clone()
        elif name == "full_sequence" and t.dtype == torch.bool and t.numel() and not bool(t.all()):
            out = torch.ones_like(t)
        elif name == "masked_row" and t.dim() >= 2 and t.numel():
            if t.dtype == torch.bool:
                out[0] = False
            elif t.is_floating_point() and bool((t == float("-inf")).any() | (t == torch.finfo(t.dtype).min).any()):
                # an additive mask (0 where kept): its first row masks everything
                out[0] = t.min()
        elif name == "channels_last" and t.dim() == 4 and t.numel():
            out = t.contiguous(memory_format=torch.channels_last)
        elif name == "strided" and t.dim() >= 2 and t.shape[-1] > 1 and t.shape[-2] > 1:
            out = t.transpose(-1, -2).contiguous().transpose(-1, -2)  # same values, transposed strides
        elif name == "strided" and t.dim() == 1 and t.shape[0] > 1:
            out = torch.stack([t, t], -1)[:, 0]  # every other element of a buffer
        if out.shape != t.shape or out.stride() != t.stride() or not torch.equal(out, t):
            changed = True
        return out

    a, k = map_tensors(args, f), map_tensors(kwargs, f)
    return (a, k) if changed else None


# -- moving and casting --------------------------------------------------------------

def convert(obj: Any, device: str, dtype: Optional[Any]) -> Any:
    """``obj`` with every tensor on ``device`` and floating ones cast to ``dtype`` (a
    ``torch.dtype``); modules moved and cast in place; containers and dataclasses rebuilt."""
    import torch

    if isinstance(obj, torch.Tensor):
        if dtype is not None and obj.is_floating_point():
            return obj.to(device=device, dtype=dtype)
        return obj.to(device=device)
    if isinstance(obj, torch.nn.Module):
        return obj.to(device=device, dtype=dtype) if dtype is not None else obj.to(device=device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(convert(v, device, dtype) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(convert(v, device, dtype) for v in obj)
    if isinstance(obj, dict):
        try:
            return type(obj)((k, convert(v, device, dtype)) for k, v in obj.items())
        except TypeError:  # dict subclasses whose constructor takes other arguments
            return {k: convert(v, device, dtype) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        try:
            return dataclasses.replace(obj, **{f.name: convert(getattr(obj, f.name), device, dtype)
                                              for f in dataclasses.fields(obj) if f.init})
        except (TypeError, ValueError):
            return obj
    return obj


def prepare_callable(fn: Any, device: str, dtype: Optional[Any]) -> Any:
    """Move the module behind ``fn`` (a module, a bound method of one, or a partial)."""
    import functools

    import torch

    if isinstance(fn, torch.nn.Module):
        convert(fn, device, dtype)
    elif isinstance(getattr(fn, "__self__", None), torch.nn.Module):
        convert(fn.__self__, device, dtype)
    elif isinstance(fn, functools.partial):
        return functools.partial(prepare_callable(fn.func, device, dtype),
                                 *convert(fn.args, device, dtype), **convert(fn.keywords, device, dtype))
    return fn
