"""Output comparison, the one comparator of the project: nested outputs compared with
per-dtype tolerances, NaN/inf-aware (imports torch lazily).

Verification compares the original program with the patched one, both in eager (tight
tolerances: ``TOLERANCES``); the bench compares each compiled arm with the eager one
(``COMPILED_TOLERANCES``: Inductor reorders and fuses reductions), at the run's precision.
A target's ``Target.tolerance`` overrides either table the same way (``tolerance_for``).
"""

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
# compiled vs eager: float32 is not bit-exact once Inductor reorders a reduction; half
# precisions accumulate differently and need more room
COMPILED_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-3, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
}


def tolerance_for(dtype: str, override: Optional[dict] = None,
                  defaults: dict[str, tuple[float, float]] = TOLERANCES) -> tuple[float, float]:
    """(rtol, atol) for tensors of ``dtype`` (a name: ``float16``): the default (float32's for
    a dtype the table lacks), or the target's ``Target.tolerance``: ``{"rtol": r, "atol": a}``
    for every dtype, or keyed by dtype name, each ``{"rtol": r, "atol": a}`` or ``(r, a)``."""
    rtol, atol = defaults.get(dtype, defaults["float32"])
    if isinstance(override, dict):
        chosen = override[dtype] if dtype in override else override
        if isinstance(chosen, dict):
            rtol = float(chosen.get("rtol", rtol))
            atol = float(chosen.get("atol", atol))
        elif isinstance(chosen, (tuple, list)) and len(chosen) == 2:
            rtol, atol = float(chosen[0]), float(chosen[1])
    return rtol, atol


def to_plain(obj: Any) -> Any:
    """Outputs as plain containers of CPU tensors, so that another process can load them
    without importing the user's classes: tensors stay (detached, on the CPU); dataclasses,
    ModelOutput and other mappings become dicts; sequences lists; dtypes and devices their
    names; any other object its type, compared by type only."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict) or (hasattr(obj, "keys") and hasattr(obj, "__getitem__") and not isinstance(obj, type)):
        try:
            return {str(k): to_plain(obj[k]) for k in obj.keys()}
        except Exception:  # a user mapping whose keys() or [] raises: compared as an object below
            pass
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, (int, float, bool, str, complex, type(None))):
        return obj
    if isinstance(obj, (torch.dtype, torch.device)):
        return str(obj)
    return repr(type(obj))  # opaque objects compare by type only


def compare(a: Any, b: Any, path: str = "out", tolerance: Optional[dict] = None,
            defaults: dict[str, tuple[float, float]] = TOLERANCES, precision: Optional[str] = None,
            sides: tuple[str, str] = ("original", "patched"), scaled: bool = False) -> Optional[str]:
    """None when ``b`` equals ``a`` within tolerance, else where and how they differ (one line).

    ``tolerance``: the target's override (``tolerance_for``). ``precision``: the dtype the
    computation ran in (the bench's ``--dtype``): every floating tensor takes its tolerance,
    and two floating tensors of different dtypes are compared in float64. ``sides`` name
    ``a`` and ``b`` where a NaN or inf shows on one side only. ``scaled``: every floating
    tensor gets half precision's allowance for an element that cancels to near zero (its
    atol at least rtol times the tensor's largest value); verification asks for it only to
    tell float32 rounding from a change, and then only with a float64 run to back it."""
    import torch

    def again(x, y, where):
        return compare(x, y, where, tolerance, defaults, precision, sides, scaled)

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        if a.shape != b.shape:
            return f"{path}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
        if a.dtype != b.dtype:
            if not (precision and a.is_floating_point() and b.is_floating_point()):
                return f"{path}: dtype {a.dtype} vs {b.dtype}"
            a, b = a.double(), b.double()
        name = str(a.dtype).replace("torch.", "")
        if a.dtype.is_floating_point or a.is_complex():
            rtol, atol = tolerance_for(precision or name, tolerance, defaults)
            if (scaled or a.dtype in (torch.float16, torch.bfloat16)) and a.numel():
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
                        side = sides[1] if test(b).sum() > test(a).sum() else sides[0]
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
            why = again(a[k], b[k], f"{path}.{k}")
            if why:
                return why
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            why = again(x, y, f"{path}[{i}]")
            if why:
                return why
        return None
    if isinstance(a, float) and isinstance(b, float):
        rtol, atol = tolerance_for(precision or "float32", tolerance, defaults)
        if a != b and not (a != a and b != b) and abs(a - b) > atol + rtol * abs(b):
            return f"{path}: {a!r} vs {b!r}"
        return None
    if a != b:
        return f"{path}: {a!r} vs {b!r}"
    return None
