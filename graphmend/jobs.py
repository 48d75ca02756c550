"""Run one unit of work (a target capture, a bench arm, a verification) in a worker
subprocess, so that a target that hangs, segfaults or exhausts memory costs only its own
result. Workers read a JSON payload from a file and write a JSON result to another; the
user code's own stdout/stderr never mixes with the protocol.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

_TAIL = 2000


@dataclass
class JobOutcome:
    result: Optional[dict[str, Any]]  # what the worker wrote, when it finished
    error: Optional[str]  # why not, in one line a user can act on
    returncode: Optional[int] = None
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""


@dataclass
class Job:
    module: str  # the worker, run as ``python -m module PAYLOAD RESULT``
    payload: dict[str, Any]
    label: str  # names the target in error messages
    timeout: float = 300.0
    env: dict[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _worker_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    # The worker must import graphmend/tracer/... from wherever this process did.
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


def run_job(job: Job) -> JobOutcome:
    with tempfile.TemporaryDirectory(prefix="mend-job-") as tmp:
        payload_path = Path(tmp) / "payload.json"
        result_path = Path(tmp) / "result.json"
        payload_path.write_text(json.dumps(job.payload), encoding="utf-8")
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", job.module, str(payload_path), str(result_path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=_worker_env(job.env), cwd=job.cwd, start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=job.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return JobOutcome(None, f"{job.label}: timed out after {job.timeout:g} s (raise it with --timeout)",
                              None, time.perf_counter() - start, _text(out), _text(err))
        duration = time.perf_counter() - start
        out_s, err_s = _text(out), _text(err)
        result = None
        if result_path.exists():
            try:
                result = json.loads(result_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                result = None
        if result is not None:
            return JobOutcome(result, None, proc.returncode, duration, out_s, err_s)
        rc = proc.returncode
        if rc < 0:
            name = _signal_name(-rc)
            why = " (out of memory?)" if name == "SIGKILL" else ""
            msg = f"{job.label}: worker killed by {name}{why}"
        else:
            msg = f"{job.label}: worker exited with status {rc} without a result"
        last = _last_line(err_s)
        if last:
            msg += f": {last}"
        return JobOutcome(None, msg, rc, duration, out_s, err_s)


def run_jobs(jobs: Sequence[Job], parallel: int = 1,
             on_done: Optional[Callable[[Job, JobOutcome], None]] = None) -> list[JobOutcome]:
    """Run ``jobs`` with up to ``parallel`` workers at once; results in input order."""
    if parallel <= 1 or len(jobs) <= 1:
        outcomes = []
        for j in jobs:
            o = run_job(j)
            if on_done:
                on_done(j, o)
            outcomes.append(o)
        return outcomes
    from concurrent.futures import ThreadPoolExecutor

    results: list[Optional[JobOutcome]] = [None] * len(jobs)
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = {pool.submit(run_job, j): i for i, j in enumerate(jobs)}
        from concurrent.futures import as_completed

        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            if on_done:
                on_done(jobs[i], results[i])
    return [r for r in results if r is not None]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _text(b: Optional[bytes]) -> str:
    if not b:
        return ""
    s = b.decode("utf-8", "replace")
    return s[-_TAIL:]


def _last_line(s: str) -> str:
    lines = [l.strip() for l in s.strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


def worker_main(handler: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """The worker side: ``python -m X PAYLOAD RESULT``. ``handler`` returns the result;
    an exception it raises becomes ``{"error": ...}`` so the parent sees why."""
    import traceback

    payload_path, result_path = sys.argv[1], sys.argv[2]
    payload = json.loads(Path(payload_path).read_text(encoding="utf-8"))
    try:
        result = handler(payload)
    except BaseException as exc:  # the user's code may raise anything, SystemExit too
        tb = traceback.format_exc(limit=-3)
        result = {"error": f"{type(exc).__name__}: {exc}".strip(), "traceback": tb}
    tmp = result_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, default=str)
    os.replace(tmp, result_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: torch's can be slow or crash
