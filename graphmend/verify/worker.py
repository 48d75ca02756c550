"""One side of a verification: ``python -m graphmend.verify.worker PAYLOAD RESULT``.

PAYLOAD: ``spec`` (TargetSpec dict), ``mode`` ("original" | "patched"), ``patches``
({abs path: source}, served through the overlay), ``conditions`` ({abs path: [[l, c, el, ec],
...]}, original mode: instrumented to record arms), ``state`` (a file: the original side
writes weights, inputs and outputs there with torch.save; the patched side reads it),
``seed``, ``retrace`` (patched side: capture breaks under Dynamo afterwards), ``probe_dtype``
(both sides, last: trace once more with the model and inputs cast to that dtype; a
``torch.cond`` whose branches return float32 on one side and the model's dtype on the other
traces in float32 and fails in half precision).

The original side runs the example and perturbed inputs until every condition has gone
both ways (all variants when there are no conditions to watch); the patched side loads the
same weights, runs exactly those inputs and compares outputs.
"""

from __future__ import annotations

import os
import re
from typing import Any

from graphmend.jobs import worker_main

MIN_VARIANTS = 3  # example, negated, random: always, even when every arm is covered sooner


def _module_of(fn: Any):
    import torch

    if isinstance(fn, torch.nn.Module):
        return fn
    owner = getattr(fn, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


def _call(fn, args, kwargs, seed: int):
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        return fn(*args, **kwargs)


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    import torch

    from graphmend.overlay import install_overlay
    from graphmend.targets import TargetError, load_target
    from graphmend.verify.arms import ArmRecorder, instrument
    from graphmend.verify.compare import compare, to_plain
    from graphmend.verify.inputs import VARIANTS, variant

    spec, mode, seed = payload["spec"], payload["mode"], int(payload.get("seed", 0))
    patches: dict[str, str] = dict(payload.get("patches") or {})
    conditions: dict[str, list] = payload.get("conditions") or {}
    recorder = ArmRecorder()
    keys: list[str] = []
    if mode == "original":
        for path, conds in conditions.items():
            with open(path, encoding="utf-8") as fh:
                patches[path] = instrument(fh.read(), [tuple(c) for c in conds])
            keys += [f"{os.path.realpath(path)}:{c[0]}:{c[1]}" for c in conds]
        recorder.install()
    finder = install_overlay(patches) if patches else None
    torch.manual_seed(seed)
    try:
        loaded = load_target(spec)
    except TargetError as exc:
        return {"error": str(exc)}
    module = _module_of(loaded.fn)
    # the weights and buffers BEFORE any run: a stateful module (a KV cache) changes its
    # buffers as it runs, and the patched side must start where the original started
    initial = {k: v.detach().clone() for k, v in module.state_dict().items()} if module is not None else None
    tolerance = getattr(loaded.target, "tolerance", None)
    result: dict[str, Any] = {"served": list(finder.served) if finder else []}
    if mode == "original":
        inputs, outputs, ran = [], [], []
        extra = list(getattr(loaded.target, "perturb", None) or [])
        names = VARIANTS + [f"user_{i}" for i in range(len(extra))]
        for i, name in enumerate(names):
            if i >= MIN_VARIANTS and keys and not recorder.missing(keys, reached_only=True):
                break
            if name.startswith("user_"):
                a, k = extra[int(name[5:])]
                a, k = tuple(a), dict(k)
            else:
                a, k = variant(name, loaded.args, loaded.kwargs, seed)
            try:
                out = ("ok", to_plain(_call(loaded.fn, a, k, seed + i)))
            except Exception as exc:  # e.g. a guard that rightly fails on a perturbed input
                out = ("raised", type(exc).__name__)
            inputs.append((name, a, k))
            outputs.append(out)
            ran.append(name)
        state = {"inputs": inputs, "outputs": outputs,
                 "weights": initial}
        torch.save(state, payload["state"])
        result.update(ran=ran, unexercised=recorder.missing(keys, reached_only=True),
                      example_ok=bool(outputs) and outputs[0][0] == "ok")
        if payload.get("probe_dtype"):
            result["probe"] = _probe_dtype(loaded, payload["probe_dtype"])
        return result
    # patched side
    state = torch.load(payload["state"], weights_only=False)
    if module is not None and state.get("weights") is not None:
        module.load_state_dict(state["weights"], strict=False)
    mismatches = []
    for i, ((name, a, k), (status, want)) in enumerate(zip(state["inputs"], state["outputs"])):
        try:
            got = ("ok", to_plain(_call(loaded.fn, a, k, seed + i)))
        except Exception as exc:
            got = ("raised", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}")
        if status == "raised" or got[0] == "raised":
            if status != got[0]:
                mismatches.append(f"input {name}: original {'raised ' + want if status == 'raised' else 'returned'}, "
                                  f"patched {'raised ' + got[1] if got[0] == 'raised' else 'returned'}")
            continue
        why = compare(want, got[1], "output", tolerance)
        if why:
            mismatches.append(f"input {name}: {why}")
    result["mismatches"] = mismatches
    result["inputs_run"] = len(state["inputs"])
    if payload.get("retrace", True):
        result["capture"] = _retrace(spec, loaded)
    if payload.get("probe_dtype"):
        result["probe"] = _probe_dtype(loaded, payload["probe_dtype"])
    return result


def _probe_dtype(loaded, dtype_name: str):
    """None when the target traces under Dynamo with its module and float inputs cast to
    ``dtype_name`` (in place: this is the worker's last use of them), else why not."""
    import torch

    from graphmend.bench.measure import convert, prepare_callable

    dtype = getattr(torch, dtype_name)
    fn = prepare_callable(loaded.fn, "cpu", dtype)
    args, kwargs = convert(loaded.args, "cpu", dtype), convert(loaded.kwargs, "cpu", dtype)
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch._dynamo.explain(fn)(*args, **kwargs)
    except Exception as exc:
        text = str(exc).strip()
        # Dynamo's first line is generic ("RuntimeError when making fake tensor call"); the
        # operator's own complaint is quoted further down as got RuntimeError("...")
        inner = re.search(r'got \w+\("(.+?)"\)', text)
        head = text.splitlines()[0][:200] if text else ""
        return f"{type(exc).__name__}: {head}" + (f": {inner.group(1)[:300]}" if inner else "")
    finally:
        torch._dynamo.reset()
    return None


def _retrace(spec: dict, loaded) -> dict:
    """Breaks of the patched program, as the tracer records them."""
    from graphmend.model import to_dict

    try:
        from tracer.worker import capture_loaded
    except ImportError:  # pragma: no cover - tracer is part of this project
        return {"error": "tracer unavailable"}
    res = capture_loaded(spec["name"], spec.get("file") or spec.get("module") or "", spec["function"],
                         loaded.fn, loaded.args, loaded.kwargs)
    return to_dict(res)


if __name__ == "__main__":
    worker_main(handle)
