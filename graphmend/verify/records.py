"""Two records of one call compared (``graphmend.verify.modes`` makes them): what it returned
or raised, its gradients, the hooks it fired, what it warned, the caller's inputs after it,
buffers, the RNG and the module's generators, output aliasing and the module's attributes.
Each comparison gives None or the first difference, in one line."""

from __future__ import annotations

from typing import Any, Optional

from graphmend.verify.compare import compare
from graphmend.verify.inputs import map_tensors
from graphmend.verify.modes import COMPILED_RUNS, same_value


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
    why = _compare_calls(want.get("calls"), got.get("calls"))
    if why:
        return why
    # what the call warned and logged (compiled runs aside: a rewrite whose documented caveat is
    # a message lost under torch.compile is judged by that caveat, not here)
    if want.get("mode") not in COMPILED_RUNS and want.get("said") is not None and got.get("said") is not None \
            and want["said"] != got["said"]:
        return f"what the original warned and logged: {_said(want['said'])}; the patched program: {_said(got['said'])}"
    if want.get("second_order") and not got.get("second_order"):
        return "the gradient no longer depends on the inputs or parameters (no second derivative)"
    # under autocast the gradients went through its dtype as well: compared in it
    return _compare_named(want, got, (("grads_first", "the first-order gradient"),
                                      ("grads_in", "the gradient of input"),
                                      ("grads_param", "the gradient of parameter")), tolerance, scaled,
                          want.get("precision"))


def _said(said: list) -> str:
    return "nothing" if not said else "; ".join(said[:3]) + (f" (and {len(said) - 3} more)" if len(said) > 3 else "")


def _compare_calls(want: Optional[list], got: Optional[list]) -> Optional[str]:
    """The forward hooks must fire in the same order; the backward ones as often per module
    (their order is the autograd engine's scheduling, which any reordering of ops changes)."""
    if want is None:
        return None
    from collections import Counter

    got = got or []
    for phase in ("forward", "backward"):
        w = [n for p, n in want if p == phase]
        g = [n for p, n in got if p == phase]
        cw, cg = Counter(w), Counter(g)
        for name in dict.fromkeys(w + g):
            if cw[name] != cg[name]:
                return (f"module hooks: {phase} of {name} ran {cg[name]} time{'s' * (cg[name] != 1)}, "
                        f"originally {cw[name]}")
        if phase == "forward" and w != g:
            at = next(i for i, (x, y) in enumerate(zip(w, g)) if x != y)
            return f"module hooks: forward call {at + 1} is {g[at]}, originally {w[at]} (modules run in another order)"
    return None


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
    why = compare_aliases(want.get("aliases") or {}, got.get("aliases") or {})
    if why:
        return f"{where}: {why}"
    why = compare_attributes(want.get("attributes") or {}, got.get("attributes") or {})
    if why:
        return f"{where}: {why}"
    for name, state in (want.get("generators") or {}).items():
        other = (got.get("generators") or {}).get(name)
        if other is None or not torch.equal(state, other):
            return f"{where}: the state of the module's generator {name} after the call differs (drawn differently)"
    return None


def compare_aliases(want: dict, got: dict) -> Optional[str]:
    """An output that was (or viewed) an input or a module tensor must still be (view) it;
    one that was a fresh tensor must not now alias one (writes would reach the other)."""
    for path in dict.fromkeys([*want, *got]):
        if want.get(path) != got.get(path):
            w, g = want.get(path) or "is a new tensor", got.get(path) or "is a new tensor"
            return f"output aliasing: {path} {g}, originally {w}"
    return None


def compare_attributes(want: dict, got: dict) -> Optional[str]:
    """Each number or string a user reads off the module that the call changed: the same
    change on both sides (NaN equal to NaN)."""
    for name in dict.fromkeys([*want, *got]):
        w, g = want.get(name), got.get(name)
        if w is None or g is None or not (same_value(w[0], g[0]) and same_value(w[1], g[1])):
            said = lambda c: "unchanged" if c is None else f"{c[0]!r} -> {c[1]!r}"  # noqa: E731
            return f"the module's attribute {name} went {said(g)} in the call, originally {said(w)}"
    return None


def _prefixed(why: Optional[str], suffix: str) -> Optional[str]:
    return f"{why}{suffix}" if why else None
