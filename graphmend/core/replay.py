"""What recorded targets call (``mend_targets.py`` of ``mend run --record``): load the
recorded tensors, regenerate one too large to store, unwrap a ``@torch.compile``. Kept small
and stable: recorded folders outlive mend's versions, and they import this module through
``graphmend.replay``, never mend's internals. Torch is imported on first call."""

from __future__ import annotations

import os
from typing import Any, Optional


def load_tensors(path: str | os.PathLike[str]) -> dict:
    """A recorded ``.pt`` file, loaded with ``weights_only=True``; tensors recorded on a
    device this machine lacks land on the CPU."""
    import torch

    location = None if torch.cuda.is_available() else "cpu"
    return torch.load(path, map_location=location, weights_only=True)


def regenerate(shape, dtype, seed: int, low: Optional[float] = None, high: Optional[float] = None,
               mean: float = 0.0, std: float = 1.0, p: float = 0.5, device: str = "cpu") -> Any:
    """A tensor like one too large to store: same shape and dtype, values drawn from a fixed
    seed within what was recorded (integers in ``[low, high]``, booleans true with
    probability ``p``, floating values with the recorded ``mean`` and ``std``)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    shape = tuple(shape)
    if dtype is torch.bool:
        out = torch.rand(shape, generator=g) < p
    elif dtype.is_floating_point or dtype.is_complex:
        out = (torch.randn(shape, generator=g, dtype=torch.float64) * std + mean).to(dtype)
    else:
        lo = int(low if low is not None else 0)
        hi = int(high if high is not None else lo)
        out = torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(dtype)
    return out.to(device)


def uncompiled(fn: Any) -> Any:
    """The function a ``@torch.compile`` decorator wrapped (mend compiles it itself)."""
    return getattr(fn, "_torchdynamo_orig_callable", fn)
