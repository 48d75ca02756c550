"""The capture worker: ``python -m tracer.worker PAYLOAD RESULT``.

PAYLOAD is ``{"targets": [TargetSpec as dict, ...], "modes": ["eval", "train"],
"compiled_autograd": bool, "nested_graph_breaks": bool | None, "ran_files": bool, "lower": bool, "calls": int,
"fullgraph": bool}``;
RESULT is
``{"results": [TargetResult as dict, ...]}``, one per target and run mode (target-major),
each with ``ran_files`` (see ``ran_files``) when asked.
Each (target, mode) runs in a fork of the worker (``graphmend.core.worker.run_isolated``), as if
alone: what one target changes (Dynamo's config, torch's default dtype, a closed fd, a module
global) never reaches the next, and one that crashes or calls ``os._exit`` costs only its own
result. Each is one unit of the job (``graphmend.core.worker.unit_done``): the parent bounds each
by --timeout and keeps the finished ones when a later one hangs.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any, Optional, Sequence

from graphmend.core.worker import out_of_memory, run_isolated, unit_done, worker_main
from graphmend.core.model import TargetResult
from graphmend.core.serial import to_dict
from graphmend.core.modes import EVAL, TRAIN

NESTED = "nested_graph_breaks"  # torch._dynamo.config's name; not every torch has it


def capture_loaded(name: str, file: str, function: str, fn: Any, args: tuple, kwargs: dict,
                   mode: str = EVAL, loss: Any = None, compiled_autograd: bool = False,
                   nested_graph_breaks: Optional[bool] = None, lower: bool = False, calls: Sequence[tuple] = (),
                   derived: bool = True, fallback: Sequence[tuple] = (), fullgraph: bool = False) -> TargetResult:
    """Run ``fn(*args, **kwargs)`` under Dynamo with a recording backend, in run mode
    ``mode``; in train mode the call is followed by a backward of the training loss (traced
    too, under compiled autograd, when ``compiled_autograd``). ``lower``: each graph is also
    compiled by Inductor for the CPU (tracer.lowering), its failures in ``result.lowering``.
    Then each of ``calls`` (more ``(args, kwargs)``) through the same compiled function: what
    Dynamo specialised on recompiles there. The graph figures stay the first call's
    (explain's); the recompiles and the breaks only a later call hit are added. ``derived``:
    ``calls`` were derived by mend, not given by the target: one that raises is dropped with
    what it recorded (the guess of consistent sizes was wrong) and the calls go on as
    ``fallback`` has them (the batch alone grown), else end, without an error. ``fullgraph``:
    compiled as ``torch.compile(fullgraph=True)`` compiles it: the first break raises, and is
    the one break recorded (``refusal``); the calls end there."""
    import torch
    import torch._dynamo

    from graphmend.core.modes import run_mode
    from tracer.classify import classify_recompiles
    from tracer.recorder import Recorder, frame_counters

    result = TargetResult(name=name, file=file, function=function, run_mode=mode, fullgraph=fullgraph)
    refused = False
    torch._dynamo.reset()
    try:
        from torch._dynamo.utils import counters

        counters.clear()
    except Exception:  # counters moved in this torch: the log alone counts
        pass
    start = time.perf_counter()
    rec = Recorder(lower=lower)
    # verbose=False: the log keeps the one format the parser reads; scoped to this call.
    with torch._dynamo.config.patch(verbose=False, **dynamo_options(nested_graph_breaks)), rec, run_mode(fn, mode):
        result.nested_graph_breaks = getattr(torch._dynamo.config, NESTED, None)
        optimize = getattr(torch._dynamo, "optimize", None)
        try:
            # What explain() does: optimize(backend, nopython=False)(fn)(*args, **kwargs)
            if fullgraph:
                compiled = torch.compile(fn, backend=rec.backend, fullgraph=True)
            else:
                compiled = optimize(rec.backend, nopython=False)(fn) if optimize else torch.compile(fn, backend=rec.backend)
            _call(compiled, fn, args, kwargs, mode, loss, rec, compiled_autograd)
        except BaseException as exc:  # the model itself failed: keep what was recorded
            if isinstance(exc, KeyboardInterrupt):
                raise
            if fullgraph and refusal(exc):
                rec.refused(exc)
                refused = True
            else:
                result.error = _call_error(name, exc, rec)
        refused_first = refused
        # the first call's figures, as explain() gives them
        rec_data = rec.recording
        first = rec.mark()
        frames = frame_counters()
        todo = list(calls) if result.error is None and not refused else []
        made = [(args, kwargs)]  # the calls that ran, for the replay
        i = 0
        while i < len(todo):
            a, k = todo[i]
            before = rec.mark()
            rec.call = i + 2
            try:
                _call(compiled, fn, a, k, mode, loss, rec, compiled_autograd)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                if fullgraph and refusal(exc):  # only this call's sizes break: its break, and the end
                    rec.refused(exc)
                    refused = True
                    break
                if not derived:
                    result.error = f"{_call_error(name, exc, rec)} (its call {i + 2})"
                    break
                # mend's guess of consistent sizes, not the target's fault
                rec.phase = "forward"
                rec.rewind(before)
                if len(fallback) > i and _replay_first(compiled, fn, args, kwargs, mode, loss, rec, compiled_autograd):
                    # the calls again, the batch alone grown, after the first call alone
                    rec.rewind(first)
                    todo, fallback, i, result.calls, made = list(fallback), (), 0, 1, [(args, kwargs)]
                    continue
                break
            made.append((a, k))
            result.calls += 1
            i += 1
        if calls and result.error is None and not refused:
            result.replay_recompile = _replay(compiled, fn, made, mode, loss, rec, compiled_autograd)
    result.duration_s = time.perf_counter() - start
    result.graph_count = first.graphs
    # explain() reports graph_count - 1; a target that compiled nothing has no breaks, not -1.
    result.graph_break_count = max(first.graphs - 1, 0) + refused_first
    result.ops_per_graph = list(rec_data.ops_per_graph[:first.graphs])
    result.recompiles = list(rec_data.recompiles)
    classify_recompiles(result.recompiles)
    if compiled_autograd and mode == TRAIN:
        result.backward_graph_count = first.backward_graphs
    result.breaks = rec.breaks(first)
    if lower:
        result.lowering = list(rec_data.lowering)
    skipped_logged = len({b.compiled_function or (b.file, b.line) for b in result.breaks
                          if b.kind == "frame_skipped" and b.call == 1})
    result.frames_skipped = max(int(frames.get("total", 0)) - int(frames.get("ok", 0)), skipped_logged, 0)
    torch._dynamo.reset()
    return result


def _replay_first(compiled: Any, fn: Any, args: tuple, kwargs: dict, mode: str, loss: Any, rec: Any,
                  compiled_autograd: bool) -> bool:
    """Dynamo as the first call left it, for calls of other sizes to go on from: a call that
    raised leaves its state behind (a frame it gave up on runs in eager from then on, and the
    functions it calls are compiled as frames of their own, each with recompiles a user's run
    never makes), so Dynamo starts again and the first call runs once more. False: it raised."""
    import torch

    torch._dynamo.reset()
    rec.call = 1
    try:
        _call(compiled, fn, args, kwargs, mode, loss, rec, compiled_autograd)
    except Exception:  # it ran before: whatever it is now, no call goes on from it
        return False
    return True


_STANCE_RECOMPILE = "Detected recompile when torch.compile stance is 'fail_on_recompile'"
_STANCE_WHERE = re.compile(r"function name: '(?P<function>[^']*)', line number: (?P<line>\d+)")
_STANCE_GUARD = re.compile(r"^\s*- [\d/]+: (?P<guard>.*?)(?:\s+#.*)?$", re.MULTILINE)


def _replay(compiled: Any, fn: Any, made: Sequence[tuple], mode: str, loss: Any, rec: Any,
            compiled_autograd: bool) -> Optional[str]:
    """The calls that ran, once more in their order, under
    ``torch.compiler.set_stance("fail_on_recompile")``: "" when none recompiles (the compiled
    program has settled: a user's later calls of these sizes reuse its graphs), else the
    recompile Dynamo refused ("forward at line 4: self.step == 0"). None: not told (this torch
    has no stance, or a call raised something else). What the replay logs is not recorded."""
    import torch

    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is None:
        return None
    mark, call = rec.mark(), rec.call
    try:
        with set_stance("fail_on_recompile"):
            for a, k in made:
                _call(compiled, fn, a, k, mode, loss, rec, compiled_autograd)
    except Exception as exc:  # the recompile the stance refused, or the model's own error (not told)
        text = str(exc)
        if _STANCE_RECOMPILE not in text:
            return None
        where, guard = _STANCE_WHERE.search(text), _STANCE_GUARD.search(text)
        told = f"{where['function']} at line {where['line']}" if where else "a function"
        return f"{told}: {guard['guard'].strip()}" if guard else told
    finally:
        rec.phase = "forward"
        rec.rewind(mark)
        rec.call = call
    return ""


def _call(compiled: Any, fn: Any, args: tuple, kwargs: dict, mode: str, loss: Any, rec: Any,
          compiled_autograd: bool) -> None:
    """One call of the compiled target, and in train mode the backward of its loss."""
    from graphmend.core.modes import cannot_backward, training_loss

    out = compiled(*args, **kwargs)
    if mode == TRAIN:
        scalar = training_loss(out, loss)
        if scalar is None:
            raise _NoBackward(cannot_backward(fn, loss))
        rec.phase = "backward"
        with _compiled_autograd(rec.backend, compiled_autograd):
            scalar.backward()
        rec.phase = "forward"


class _NoBackward(Exception):
    """Train mode found no loss to backward through (the message says why)."""


def _call_error(name: str, exc: BaseException, rec: Any) -> str:
    if isinstance(exc, _NoBackward):
        return f"{name}: {exc}"
    step = "its backward" if rec.phase == "backward" else "the target"
    rec.phase = "forward"
    oom = out_of_memory(exc)
    return (f"{name}: {oom} while calling {step}" if oom else
            f"{name}: calling {step} raised {type(exc).__name__}: {_first_line(exc)}")


def dynamo_options(nested_graph_breaks: Optional[bool]) -> dict[str, bool]:
    """The Dynamo config a capture patches in besides its own: ``nested_graph_breaks`` when
    asked for (None: torch's default). The CLI refused the flag where torch lacks it."""
    return {} if nested_graph_breaks is None else {NESTED: nested_graph_breaks}


def _compiled_autograd(backend: Any, on: bool):
    """Compiled autograd for the block (the backward traced by Dynamo, through ``backend``),
    or nothing when off."""
    import contextlib

    if not on:
        return contextlib.nullcontext()
    import torch
    from torch._dynamo import compiled_autograd

    return compiled_autograd._enable(lambda gm: torch.compile(gm, backend=backend, fullgraph=False))


def refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is ``torch.compile(fullgraph=True)`` refusing a graph break: what the
    default compile would have broken the graph on (Dynamo's Unsupported, which its
    data-dependent and user errors at a break come as), not the model's own failure."""
    import torch._dynamo.exc as dynamo_exc

    kinds = tuple(k for k in (getattr(dynamo_exc, n, None) for n in ("Unsupported", "UserError",
                                                                       "UncapturedHigherOrderOpError"))
                  if isinstance(k, type))
    return isinstance(exc, kinds)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def capture_spec(spec: dict[str, Any], modes: tuple = (EVAL,), compiled_autograd: bool = False,
                 nested_graph_breaks: Optional[bool] = None, lower: bool = False, calls: int = 1,
                 fullgraph: bool = False) -> list[TargetResult]:
    """One result per run mode; each mode loads the target afresh (a train step changes the
    weights' gradients and a stateful module's buffers). ``calls``: how many calls each makes
    (``later_calls``)."""
    from graphmend.core.targets import TargetError, load_target

    name = spec["name"]
    file = spec.get("file") or spec.get("module") or ""
    out = []
    for mode in modes:
        try:
            loaded = load_target(spec)
            more, derived, fallback = later_calls(loaded, calls, name)
        except TargetError as exc:
            out.append(TargetResult(name=name, file=file, function=spec["function"], run_mode=mode, error=str(exc)))
            continue
        out.append(capture_loaded(name, file, spec["function"], loaded.fn, loaded.args, loaded.kwargs, mode=mode,
                                  loss=getattr(loaded.target, "loss", None), compiled_autograd=compiled_autograd,
                                  nested_graph_breaks=nested_graph_breaks, lower=lower, calls=more, derived=derived,
                                  fallback=fallback, fullgraph=fullgraph))
    return out


def later_calls(loaded: Any, calls: int, name: str) -> tuple[list, bool, list]:
    """The calls after the first, whether mend derived them, and the derived calls to go on
    with where one of them raises: none for ``calls`` 1; the target's own ``Target.calls``
    (every one) where it gives them; else ``calls - 1`` of other batch and sequence sizes
    derived from the first call's inputs, and the same with the batch alone grown (dim 1 may
    be features or channels), made before the first call runs (it may change its inputs in
    place)."""
    from graphmend.core.calls import derived_calls
    from graphmend.core.targets import TargetError

    if calls <= 1:
        return [], True, []
    given = getattr(loaded.target, "calls", None)
    if given is None:
        return (derived_calls(loaded.args, loaded.kwargs, calls), True,
                derived_calls(loaded.args, loaded.kwargs, calls, sequence=False))
    out = []
    for i, c in enumerate(given if isinstance(given, (list, tuple)) else [given]):
        if not (isinstance(c, (tuple, list)) and len(c) == 2 and isinstance(c[0], (tuple, list))
                and isinstance(c[1], dict)):
            raise TargetError(f"{name}: Target.calls[{i}] must be an (args, kwargs) pair, "
                              f"got {type(c).__name__}")
        out.append((tuple(c[0]), dict(c[1])))
    return out, False, []


def explain_counts(spec: dict[str, Any], mode: str = EVAL, nested_graph_breaks: Optional[bool] = None) -> Any:
    """``[graph_count, graph_break_count, stacks]`` from torch._dynamo.explain in run mode
    ``mode``, or the error text: the tests' reference, run in the same worker to share its
    start-up. ``stacks`` holds each break reason's user stack as ``[file, line]`` pairs,
    innermost last."""
    import warnings

    import torch

    from graphmend.core.modes import run_mode
    from graphmend.core.targets import load_target

    try:
        t = load_target(spec)
        with warnings.catch_warnings(), run_mode(t.fn, mode), \
                torch._dynamo.config.patch(**dynamo_options(nested_graph_breaks)):
            warnings.simplefilter("ignore")
            e = torch._dynamo.explain(t.fn)(*t.args, **t.kwargs)
        stacks = [[[str(getattr(f, "filename", "")), getattr(f, "lineno", None)]
                   for f in (getattr(r, "user_stack", None) or [])] for r in (getattr(e, "break_reasons", None) or [])]
        return [e.graph_count, e.graph_break_count, stacks]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        torch._dynamo.reset()


def ran_files(loaded_before: set[str], spec: dict[str, Any]) -> list[str]:
    """The source files a target ran: its own, every module imported since the worker
    started and every file read (opened, executed or compiled: ``runpy.run_path``,
    ``exec(open(f).read())``, ``torch.load`` of recorded tensors) since ``watch_reads``,
    except the standard library's and mend's own (what the key of a cached result holds as
    versions). Each target runs in a fork of its own, so only what it read counts."""
    from graphmend.core.cache import reads, skipped_dirs

    skip = skipped_dirs()
    files = {os.path.realpath(spec["file"])} if spec.get("file") else set()
    for name, m in list(sys.modules.items()):
        f = getattr(m, "__file__", None)
        if name in loaded_before or not f or not f.endswith(".py"):
            continue
        f = os.path.realpath(f)
        if not f.startswith(skip) and os.path.isfile(f):
            files.add(f)
    return sorted(files | set(reads()))


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    modes = tuple(payload.get("modes") or (EVAL,))
    ca = bool(payload.get("compiled_autograd"))
    nested = payload.get("nested_graph_breaks")
    lower = bool(payload.get("lower"))
    calls = int(payload.get("calls") or 1)
    fullgraph = bool(payload.get("fullgraph"))
    loaded_before = set(sys.modules)
    if payload.get("ran_files"):
        from graphmend.core.cache import watch_reads

        watch_reads()
    results, explained = [], []

    def unit(spec: dict[str, Any], mode: str) -> dict[str, Any]:
        (r,) = capture_spec(spec, (mode,), ca, nested, lower, calls, fullgraph)
        out: dict[str, Any] = {"result": to_dict(r)}
        if payload.get("ran_files"):  # for the cache: what a later run must find unchanged
            out["result"]["ran_files"] = ran_files(loaded_before, spec)
        if payload.get("explain"):
            out["explain"] = explain_counts(spec, mode, nested)
        return out

    for spec in payload["targets"]:
        for mode in modes:  # one unit each: the parent's --timeout clock restarts per unit
            got = run_isolated(lambda: unit(spec, mode), spec["name"])
            if "result" not in got:  # its process ended without one
                why = got.get("error") or f"{spec['name']}: no result"
                got = {"result": to_dict(TargetResult(name=spec["name"], file=spec.get("file") or spec.get("module") or "",
                                                      function=spec["function"], run_mode=mode, error=why)),
                       "explain": why}
            results.append(got["result"])
            explained.append(got.get("explain"))
            unit_done(results[-1])
    out = {"results": results}
    if payload.get("explain"):
        out["explain"] = explained
    return out


def _startup() -> None:
    """What every capture needs before the first target: not counted against --timeout."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401

    import tracer.recorder  # noqa: F401


if __name__ == "__main__":
    worker_main(handle, startup=_startup)
