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

WORKER = "tracer.worker"


def _job(specs: Sequence[TargetSpec], timeout: float, memory_limit: Optional[int]) -> Job:
    # the worker's start-up (importing torch) gets its own allowance: see graphmend.jobs
    label = specs[0].name if len(specs) == 1 else f"{specs[0].display_file} ({len(specs)} targets)"
    return Job(module=WORKER, payload={"targets": [dataclasses.asdict(s) for s in specs]}, label=label,
               timeout=timeout * len(specs), memory_limit=memory_limit)


def _failed(spec: TargetSpec, outcome: JobOutcome, why: str) -> TargetResult:
    return TargetResult(name=spec.name, file=spec.display_file, function=spec.function,
                        duration_s=round(outcome.duration_s, 3), error=why)


def capture_targets(specs: Sequence[TargetSpec], jobs: int = 1, timeout: float = 300.0,
                    on_done: Optional[Callable[[str], None]] = None,
                    memory_limit: Optional[int] = None) -> list[TargetResult]:
    """Capture each target; results in input order. ``on_done(name)`` after each target;
    ``memory_limit``: bytes each worker may use."""
    batches: dict[str, list[TargetSpec]] = {}
    for s in specs:
        batches.setdefault(s.display_file, []).append(s)
    groups = list(batches.values())
    results: dict[TargetSpec, TargetResult] = {}
    retry: list[TargetSpec] = []

    def collect(group: Sequence[TargetSpec], outcome: JobOutcome, final: bool) -> None:
        got = (outcome.result or {}).get("results") if not outcome.error else None
        if got is None or len(got) != len(group):
            if final or len(group) == 1:
                for s in group:
                    why = outcome.error or f"{s.name}: worker failed: {(outcome.result or {}).get('error') or 'no result'}"
                    if outcome.error and len(group) == 1:
                        why = outcome.error.replace(group[0].name, s.name, 1)
                    results[s] = _failed(s, outcome, why)
                    if on_done:
                        on_done(s.name)
            else:
                retry.extend(group)
            return
        for s, data in zip(group, got):
            results[s] = from_dict(TargetResult, data)
            if on_done:
                on_done(s.name)

    job_list = [_job(g, timeout, memory_limit) for g in groups]
    by_job = {id(j): g for j, g in zip(job_list, groups)}
    run_jobs(job_list, parallel=max(1, jobs), on_done=lambda j, o: collect(by_job[id(j)], o, final=False))
    if retry:
        singles = [_job([s], timeout, memory_limit) for s in retry]
        by_single = {id(j): s for j, s in zip(singles, retry)}
        run_jobs(singles, parallel=max(1, jobs), on_done=lambda j, o: collect([by_single[id(j)]], o, final=True))
    return [results[s] for s in specs]
