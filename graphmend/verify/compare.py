"""Output comparison with per-dtype tolerances (imports torch lazily)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

# dtype name -> (rtol, atol); ints and bools compare exactly
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-5, 1e-6),
    "float16": (1e-3, 1e-4),
    "bfloat16": (1.6e-2, 1e-3),
    "complex64": (1e-5, 1e-6),
    "complex128": (1e-7, 1e-9),
}


def to_plain(obj: Any) -> Any:
    """Tensors stay; dataclasses / ModelOutput / mappings become dicts; sequences lists."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict) or (hasattr(obj, "keys") and hasattr(obj, "__getitem__") and not isinstance(obj, type)):
        try:
            return {str(k): to_plain(obj[k]) for k in obj.keys()}
        except Exception:
            pass
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, (int, float, bool, str, type(None))):
        return obj
    return repr(type(obj))  # opaque objects compare by type only


def compare(a: Any, b: Any, path: str = "out", tolerance: Optional[dict] = None) -> Optional[str]:
    """None when equal within tolerance, else where and how they differ (one line)."""
    import torch

    tol = dict(TOLERANCES)
    if tolerance:
        tol.update(tolerance)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        if a.shape != b.shape:
            return f"{path}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
        if a.dtype != b.dtype:
            return f"{path}: dtype {a.dtype} vs {b.dtype}"
        name = str(a.dtype).replace("torch.", "")
        if a.dtype.is_floating_point or a.is_complex():
            rtol, atol = tol.get(name, (1e-5, 1e-6))
            if a.dtype in (torch.float16, torch.bfloat16) and a.numel():
                # a half-precision sum in another order rounds differently, and an element
                # that cancels to near zero carries the rounding of the whole tensor's scale
                finite = a[torch.isfinite(a)]
                if finite.numel():
                    atol = max(atol, rtol * float(finite.abs().max()))
            if not torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                # NaN or inf where the other side has a number: the gradient failures that
                # matter most (torch.where's unselected arm), named as such
                for what, test in (("NaN", torch.isnan), ("inf", torch.isinf)):
                    if not torch.equal(test(a), test(b)):
                        side = "patched" if test(b).sum() > test(a).sum() else "original"
                        return f"{path}: {what} where the other side has a number (on the {side} side)"
                diff = (a.double() - b.double()).abs()
                diff = diff[~torch.isnan(diff)]
                worst = float(diff.max()) if diff.numel() else float("nan")
                return f"{path}: values differ (max abs diff {worst:.3g}, rtol {rtol:g}, atol {atol:g})"
            return None
        if not torch.equal(a, b):
            return f"{path}: {name} values differ"
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            why = compare(a[k], b[k], f"{path}.{k}", tolerance)
            if why:
                return why
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            why = compare(x, y, f"{path}[{i}]", tolerance)
            if why:
                return why
        return None
    if isinstance(a, float) and isinstance(b, float):
        if a != b and not (a != a and b != b) and abs(a - b) > 1e-6 + 1e-5 * abs(b):
            return f"{path}: {a!r} vs {b!r}"
        return None
    if a != b:
        return f"{path}: {a!r} vs {b!r}"
    return None
