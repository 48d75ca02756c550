"""The capture worker: ``python -m tracer.worker PAYLOAD RESULT``.

PAYLOAD is ``{"targets": [TargetSpec as dict, ...]}``; RESULT is ``{"results": [TargetResult
as dict, ...]}``. One target per worker is the default (isolation); several in one process
are separated by ``torch._dynamo.reset()``.
"""

from __future__ import annotations

import time
from typing import Any

from graphmend.jobs import out_of_memory, worker_main
from graphmend.model import TargetResult, to_dict


def capture_loaded(name: str, file: str, function: str, fn: Any, args: tuple, kwargs: dict) -> TargetResult:
    """Run ``fn(*args, **kwargs)`` once under Dynamo with a recording backend."""
    import torch
    import torch._dynamo

    from tracer.recorder import Recorder, frame_counters

    result = TargetResult(name=name, file=file, function=function)
    torch._dynamo.reset()
    try:
        from torch._dynamo.utils import counters

        counters.clear()
    except Exception:
        pass
    start = time.perf_counter()
    rec = Recorder()
    # verbose=False: the log keeps the one format the parser reads; scoped to this call.
    with torch._dynamo.config.patch(verbose=False), rec:
        optimize = getattr(torch._dynamo, "optimize", None)
        try:
            # What explain() does: optimize(backend, nopython=False)(fn)(*args, **kwargs)
            compiled = optimize(rec.backend, nopython=False)(fn) if optimize else torch.compile(fn, backend=rec.backend)
            compiled(*args, **kwargs)
        except BaseException as exc:  # the model itself failed: keep what was recorded
            if isinstance(exc, KeyboardInterrupt):
                raise
            oom = out_of_memory(exc)
            result.error = (f"{name}: {oom} while calling the target" if oom else
                            f"{name}: calling the target raised {type(exc).__name__}: {_first_line(exc)}")
    result.duration_s = time.perf_counter() - start
    rec_data = rec.recording
    result.graph_count = rec_data.graphs
    # explain() reports graph_count - 1; a target that compiled nothing has no breaks, not -1.
    result.graph_break_count = max(rec_data.graphs - 1, 0)
    result.ops_per_graph = list(rec_data.ops_per_graph)
    result.recompiles = list(rec_data.recompiles)
    result.breaks = rec.breaks()
    frames = frame_counters()
    skipped_logged = len({b.compiled_function or (b.file, b.line) for b in result.breaks if b.kind == "frame_skipped"})
    result.frames_skipped = max(int(frames.get("total", 0)) - int(frames.get("ok", 0)), skipped_logged, 0)
    torch._dynamo.reset()
    return result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def capture_spec(spec: dict[str, Any]) -> TargetResult:
    from graphmend.targets import TargetError, load_target

    name = spec["name"]
    file = spec.get("file") or spec.get("module") or ""
    try:
        loaded = load_target(spec)
    except TargetError as exc:
        return TargetResult(name=name, file=file, function=spec["function"], error=str(exc))
    return capture_loaded(name, file, spec["function"], loaded.fn, loaded.args, loaded.kwargs)


def explain_counts(spec: dict[str, Any]) -> Any:
    """``[graph_count, graph_break_count, stacks]`` from torch._dynamo.explain, or the error
    text: the tests' reference, run in the same worker to share its start-up. ``stacks`` holds
    each break reason's user stack as ``[file, line]`` pairs, innermost last."""
    import warnings

    import torch

    from graphmend.targets import load_target

    try:
        t = load_target(spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = torch._dynamo.explain(t.fn)(*t.args, **t.kwargs)
        stacks = [[[str(getattr(f, "filename", "")), getattr(f, "lineno", None)]
                   for f in (getattr(r, "user_stack", None) or [])] for r in (getattr(e, "break_reasons", None) or [])]
        return [e.graph_count, e.graph_break_count, stacks]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        torch._dynamo.reset()


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    out = {"results": [to_dict(capture_spec(spec)) for spec in payload["targets"]]}
    if payload.get("explain"):
        out["explain"] = [explain_counts(spec) for spec in payload["targets"]]
    return out


def _startup() -> None:
    """What every capture needs before the first target: not counted against --timeout."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401

    import tracer.recorder  # noqa: F401


if __name__ == "__main__":
    worker_main(handle, startup=_startup)
