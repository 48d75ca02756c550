"""``capture_targets``: targets run in worker subprocesses, so that one that hangs, crashes
or runs out of memory costs only its own result.

Targets of one file share a worker (torch's import is the dominant cost of a worker);
when such a worker dies or times out, its targets are re-run one per worker, so the
culprit alone gets the error."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

from graphmend.discovery import TargetSpec
from graphmend.jobs import Job, JobOutcome, run_jobs
from graphmend.model import TargetResult, from_dict
from graphmend.modes import EVAL

WORKER = "tracer.worker"


def _job(specs: Sequence[TargetSpec], timeout: float, modes: Sequence[str], compiled_autograd: bool,
         memory_limit: Optional[int], nested_graph_breaks: Optional[bool]) -> Job:
    # the worker's start-up (importing torch) gets its own allowance: see graphmend.jobs
    label = specs[0].name if len(specs) == 1 else f"{specs[0].display_file} ({len(specs)} targets)"
    return Job(module=WORKER, payload={"targets": [dataclasses.asdict(s) for s in specs], "modes": list(modes),
                                       "compiled_autograd": compiled_autograd,
                                       "nested_graph_breaks": nested_graph_breaks}, label=label,
               timeout=timeout * len(specs) * len(modes), memory_limit=memory_limit)


def nested_graph_breaks_supported() -> bool:
    """Whether the installed torch has Dynamo's ``nested_graph_breaks`` option (imports torch)."""
    import torch._dynamo.config

    from tracer.worker import NESTED

    return hasattr(torch._dynamo.config, NESTED)


def _failed(spec: TargetSpec, outcome: JobOutcome, why: str, mode: str) -> TargetResult:
    return TargetResult(name=spec.name, file=spec.display_file, function=spec.function, run_mode=mode,
                        duration_s=round(outcome.duration_s, 3), error=why)


def capture_targets(specs: Sequence[TargetSpec], jobs: int = 1, timeout: float = 300.0,
                    on_done: Optional[Callable[[str], None]] = None, modes: Sequence[str] = (EVAL,),
                    compiled_autograd: bool = False, memory_limit: Optional[int] = None,
                    nested_graph_breaks: Optional[bool] = None) -> list[TargetResult]:
    """Capture each target in each run mode; results in input order (target-major: a
    target's modes together). ``on_done(name)`` after each target; ``memory_limit``: bytes
    each worker may use; ``nested_graph_breaks``: Dynamo's option of that name (None: torch's
    default)."""
    modes = tuple(modes) or (EVAL,)
    batches: dict[str, list[TargetSpec]] = {}
    for s in specs:
        batches.setdefault(s.display_file, []).append(s)
    groups = list(batches.values())
    results: dict[TargetSpec, list[TargetResult]] = {}
    retry: list[TargetSpec] = []

    def collect(group: Sequence[TargetSpec], outcome: JobOutcome, final: bool) -> None:
        got = (outcome.result or {}).get("results") if not outcome.error else None
        if got is None or len(got) != len(group) * len(modes):
            if final or len(group) == 1:
                for s in group:
                    why = outcome.error or f"{s.name}: worker failed: {(outcome.result or {}).get('error') or 'no result'}"
                    if outcome.error and len(group) == 1:
                        why = outcome.error.replace(group[0].name, s.name, 1)
                    results[s] = [_failed(s, outcome, why, m) for m in modes]
                    if on_done:
                        on_done(s.name)
            else:
                retry.extend(group)
            return
        for i, s in enumerate(group):
            results[s] = [from_dict(TargetResult, d) for d in got[i * len(modes):(i + 1) * len(modes)]]
            if on_done:
                on_done(s.name)

    job_list = [_job(g, timeout, modes, compiled_autograd, memory_limit, nested_graph_breaks) for g in groups]
    by_job = {id(j): g for j, g in zip(job_list, groups)}
    run_jobs(job_list, parallel=max(1, jobs), on_done=lambda j, o: collect(by_job[id(j)], o, final=False))
    if retry:
        singles = [_job([s], timeout, modes, compiled_autograd, memory_limit, nested_graph_breaks) for s in retry]
        by_single = {id(j): s for j, s in zip(singles, retry)}
        run_jobs(singles, parallel=max(1, jobs), on_done=lambda j, o: collect([by_single[id(j)]], o, final=True))
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
