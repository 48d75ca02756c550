"""``capture_targets``: targets run in worker subprocesses, so that one that hangs, crashes
or runs out of memory costs only its own result.

Targets of one file share a worker (torch's import is the dominant cost of a worker), each
(target, run mode) one unit of its job, run in a fork of the worker as if alone (a unit that
crashes its fork is that unit's error; tracer/worker.py): ``--timeout`` bounds each unit, and
the worker reports each one it finishes (graphmend.core.jobs). When a unit hangs, its target
gets the timeout and the file's remaining targets go on in a fresh worker; when the worker
itself dies, the target it died in is run again first in a fresh worker and gets the error if
it dies there too. No target costs more than one timeout.

With a cache (``mend fix``), a target whose earlier capture is on record with every file it
ran unchanged is not run again (graphmend.core.cache); a result with an error is never kept."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

from graphmend.core.cache import Cache
from graphmend.core.discovery import TargetSpec
from graphmend.core.jobs import Job, JobOutcome, run_job
from graphmend.core.model import TargetResult
from graphmend.core.serial import from_dict, to_dict
from graphmend.core.modes import EVAL

WORKER = "tracer.worker"


def _job(specs: Sequence[TargetSpec], timeout: float, modes: Sequence[str], compiled_autograd: bool,
         memory_limit: Optional[int], nested_graph_breaks: Optional[bool], ran_files: bool = False,
         lower: bool = False, calls: int = 1, fullgraph: bool = False) -> Job:
    # the worker's start-up (importing torch) gets its own allowance: see graphmend.core.jobs
    label = specs[0].name if len(specs) == 1 else f"{specs[0].display_file} ({len(specs)} targets)"
    return Job(module=WORKER, payload={"targets": [dataclasses.asdict(s) for s in specs], "modes": list(modes),
                                       "compiled_autograd": compiled_autograd,
                                       "nested_graph_breaks": nested_graph_breaks, "ran_files": ran_files,
                                       "lower": lower, "calls": calls, "fullgraph": fullgraph},
               label=label,
               timeout=timeout, memory_limit=memory_limit, units=len(specs) * len(modes),
               unit_labels=[s.name for s in specs for _ in modes], warm=True)


def nested_graph_breaks_supported() -> bool:
    """Whether the installed torch has Dynamo's ``nested_graph_breaks`` option (imports torch)."""
    import torch._dynamo.config

    from tracer.worker import NESTED

    return hasattr(torch._dynamo.config, NESTED)


def unlabelled(error: Optional[str], name: str) -> Optional[str]:
    """A target's error without its name in front (the worker's messages start with it, for the
    logs): every listing shows the name beside the error already."""
    if error and error.startswith(name + ": "):
        return error[len(name) + 2:]
    return error


def _failed(spec: TargetSpec, outcome: JobOutcome, why: str, mode: str) -> TargetResult:
    return TargetResult(name=spec.name, file=spec.display_file, function=spec.function, run_mode=mode,
                        duration_s=round(outcome.duration_s, 3), error=why)


def _capture_file(group: Sequence[TargetSpec], timeout: float, modes: tuple, compiled_autograd: bool,
                  memory_limit: Optional[int], nested_graph_breaks: Optional[bool],
                  done: Callable[[TargetSpec, list[TargetResult], list[str]], None], ran_files: bool = False,
                  lower: bool = False, calls: int = 1, fullgraph: bool = False) -> None:
    """The targets of one file, in as few workers as their hangs and crashes allow."""
    pending = list(group)
    retried: Optional[TargetSpec] = None  # the target a crashed worker was running, run again first
    while pending:
        outcome = run_job(_job(pending, timeout, modes, compiled_autograd, memory_limit, nested_graph_breaks,
                               ran_files, lower, calls, fullgraph))
        got: list[Any] = (outcome.result or {}).get("results") if not outcome.error else None
        if got is None or len(got) != len(pending) * len(modes):
            got = outcome.units  # what finished before the failure
        finished = min(len(got) // len(modes), len(pending))
        for i, s in enumerate(pending[:finished]):
            chunk = got[i * len(modes):(i + 1) * len(modes)]
            done(s, [from_dict(TargetResult, d) for d in chunk], sorted({f for d in chunk for f in d.get("ran_files", ())}))
        pending = pending[finished:]
        if not pending:
            return
        if outcome.lost and len(pending) > 1:
            # the worker's unit reports are gone with it (a Ray task whose worker died): which
            # target it died in is unknown, so each runs again in a worker of its own
            for s in pending:
                _capture_file([s], timeout, modes, compiled_autograd, memory_limit, nested_graph_breaks, done,
                              ran_files, lower, calls, fullgraph)
            return
        culprit = pending[0]
        why = outcome.error or f"{culprit.name}: worker failed: {(outcome.result or {}).get('error') or 'no result'}"
        if not outcome.timed_out and finished > 0 and retried is not culprit:
            retried = culprit  # it crashed after other targets: try it in a fresh worker before blaming it
            continue
        ran = got[finished * len(modes):]  # its modes that did finish before it hung
        results = [from_dict(TargetResult, d) for d in ran]
        results += [_failed(culprit, outcome, why, m) for m in modes[len(ran):]]
        done(culprit, results, [])
        pending = pending[1:]


def capture_targets(specs: Sequence[TargetSpec], jobs: int = 1, timeout: float = 300.0,
                    on_done: Optional[Callable[[str, list[TargetResult]], None]] = None,
                    modes: Sequence[str] = (EVAL,), compiled_autograd: bool = False,
                    memory_limit: Optional[int] = None,
                    nested_graph_breaks: Optional[bool] = None, cache: Optional[Cache] = None,
                    lower: bool = False, calls: int = 1, fullgraph: bool = False) -> list[TargetResult]:
    """Capture each target in each run mode; results in input order (target-major: a
    target's modes together). ``on_done(name, results)`` after each target (from worker
    threads when ``jobs`` > 1); ``timeout``: seconds per target and mode; ``memory_limit``:
    bytes each worker may use; ``nested_graph_breaks``: Dynamo's option of that name (None:
    torch's default); ``cache``: where earlier captures are reused and new ones kept;
    ``lower``: each captured graph is also compiled by Inductor (tracer.lowering).
    ``calls``: calls per target and mode (tracer.worker.later_calls), the first one's
    figures explain's, the later ones' recompiles and new breaks added. ``fullgraph``: compiled
    as ``torch.compile(fullgraph=True)`` compiles (tracer.worker.capture_loaded)."""
    import threading

    modes = tuple(modes) or (EVAL,)
    results: dict[TargetSpec, list[TargetResult]] = {}
    lock = threading.Lock()
    caching = cache is not None and cache.enabled
    keys: dict[TargetSpec, str] = {}
    if caching:
        assert cache is not None
        for s in specs:
            # keyed on what runs, not on its name: the name is relative to how the folder was
            # spelled (`mend fix rec`, `--from-run rec`, `--from-run rec .` share one capture)
            where = {k: v for k, v in dataclasses.asdict(s).items() if k != "name"}
            # and on the calls made: `mend analyze` and `mend fix` make the same three by default,
            # so a fix starts from the analysis's captures
            keys[s] = cache.key("capture", where, modes, compiled_autograd, memory_limit, nested_graph_breaks,
                                *(["lower"] if lower else []), *(["fullgraph"] if fullgraph else []), calls)
            entry = cache.get_valid("capture", keys[s],
                                    lambda e: ([from_dict(TargetResult, d) for d in e["results"]], e["deps"]))
            if entry is not None:
                for r in entry[0]:
                    r.name = s.name
                results[s] = entry[0]
                cache.captured[s.name] = (keys[s], entry[1])
                if on_done:
                    on_done(s.name, results[s])

    def done(spec: TargetSpec, got: list[TargetResult], files: list[str]) -> None:
        for r in got:
            r.error = unlabelled(r.error, spec.name)
        if caching and files and not any(r.error for r in got):
            assert cache is not None
            deps = cache.put_valid("capture", keys[spec], {"results": [to_dict(r) for r in got]}, files)
            if deps is not None:
                cache.captured[spec.name] = (keys[spec], deps)
        with lock:
            results[spec] = got
            if on_done:
                on_done(spec.name, got)

    batches: dict[str, list[TargetSpec]] = {}
    for s in specs:
        if s not in results:
            batches.setdefault(s.display_file, []).append(s)

    def run(group: Sequence[TargetSpec]) -> None:
        _capture_file(group, timeout, modes, compiled_autograd, memory_limit, nested_graph_breaks, done, caching,
                      lower, calls, fullgraph)

    groups = list(batches.values())
    if jobs <= 1 or len(groups) <= 1:
        for g in groups:
            run(g)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for f in [pool.submit(run, g) for g in groups]:
                f.result()
    out = [r for s in specs for r in results[s]]
    if len(modes) > 1:
        mark_single_mode(out)
    return out


def mark_single_mode(results: Sequence[TargetResult]) -> None:
    """A target captured in both run modes: each break only one of them hit says so
    (``Break.only_in_mode``), matched by place and Dynamo's reason type."""
    by_target: dict[str, list[TargetResult]] = {}
    for r in results:
        by_target.setdefault(r.name, []).append(r)
    for runs in by_target.values():
        if len(runs) < 2 or any(r.error and not r.breaks for r in runs):
            continue  # a mode that did not run says nothing about what it would hit
        keys = {r.run_mode: {_key(b) for b in r.breaks} for r in runs}
        for r in runs:
            others = set().union(*(k for m, k in keys.items() if m != r.run_mode))
            for b in r.breaks:
                b.only_in_mode = r.run_mode if _key(b) not in others else None


def _key(b) -> tuple:
    return (b.file, b.line, b.gb_type or b.reason, b.kind)
