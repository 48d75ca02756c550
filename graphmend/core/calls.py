"""The calls a capture makes after a target's first: inputs of other batch and sequence sizes,
derived from the first call's, so that the guards Dynamo specialised on show as recompiles
(``mend analyze --calls N``). Also the walk over the tensors of nested inputs that verify
shares. Torch is imported lazily, inside the functions that need it."""

from __future__ import annotations

from typing import Any, Callable, Optional

# (batch growth, sequence growth) of the second, third, ... call: never to 0 or 1 (sizes
# Dynamo always specialises), and different per call, so a size that became dynamic on the
# second call meets a value it has not seen on the third
GROWTH: tuple[tuple[int, int], ...] = ((1, 1), (2, 3), (3, 5), (4, 7))


def map_tensors(obj: Any, fn: Callable) -> Any:
    """``obj`` with ``fn`` applied to every tensor in it (tuples, namedtuples, lists, dicts)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(map_tensors(v, fn) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tensors(v, fn) for v in obj)
    if isinstance(obj, dict):
        return {k: map_tensors(v, fn) for k, v in obj.items()}
    return obj


def tensors(obj: Any) -> list:
    """Every tensor in ``obj`` (the containers ``map_tensors`` walks), in order."""
    found: list = []
    map_tensors(obj, found.append)
    return found


def batch_and_sequence(args: tuple, kwargs: dict) -> tuple[Optional[int], Optional[int]]:
    """The batch (dim 0 of the first tensor with a dim) and sequence (dim 1 of the first
    tensor with two) sizes of a call; None where no tensor has that dim."""
    found = tensors((args, kwargs))
    first = next((t for t in found if t.dim() >= 1), None)
    second = next((t for t in found if t.dim() >= 2), None)
    return (first.shape[0] if first is not None else None, second.shape[1] if second is not None else None)


def grown(args: tuple, kwargs: dict, more_batch: int, more_seq: int) -> Optional[tuple[tuple, dict]]:
    """The call with the batch ``more_batch`` larger and the sequence ``more_seq`` longer in
    every tensor of those sizes (dim 0 for the batch, dim 1 for the sequence), so inputs stay
    consistent; new rows repeat the existing ones, so ids, masks and positions stay valid.
    None where neither size exists (nothing to grow) or is 0 (no row to repeat)."""
    import torch

    batch, seq = batch_and_sequence(args, kwargs)
    batch = batch if batch else None
    seq = seq if seq and more_seq else None
    if batch is None and seq is None:
        return None

    def grow(t, dim: int, size: int, more: int):
        index = torch.arange(size + more, device=t.device) % size
        return t.index_select(dim, index)

    def f(t):
        with torch.no_grad():
            out = t
            if batch is not None and t.dim() >= 1 and t.shape[0] == batch:
                out = grow(out, 0, batch, more_batch)
            if seq is not None and t.dim() >= 2 and t.shape[1] == seq:
                out = grow(out, 1, seq, more_seq)
            out = out.clone() if out is t else out.contiguous()
        return out.requires_grad_(t.requires_grad) if t.is_leaf and t.requires_grad else out

    return map_tensors(args, f), map_tensors(kwargs, f)


def derived_calls(args: tuple, kwargs: dict, n: int, sequence: bool = True) -> list[tuple[tuple, dict]]:
    """The ``n - 1`` calls after the first (``args``, ``kwargs``): batch and sequence grown
    as ``GROWTH`` says, one step per call (past its end, by the call's index); none where the
    inputs have no batch or sequence to grow. ``sequence=False``: the batch alone (where dim 1
    was no sequence: features, channels)."""
    out = []
    for i in range(1, n):
        more = GROWTH[i - 1] if i - 1 < len(GROWTH) else (i, 2 * i - 1)
        got = grown(args, kwargs, more[0], more[1] if sequence else 0)
        if got is None:
            break
        out.append(got)
    return out
