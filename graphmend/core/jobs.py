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
# Added to each worker's limit before --timeout starts counting: importing torch takes
# seconds (more on a loaded machine), and --timeout is meant for the target's own run.
STARTUP_ALLOWANCE_S = 30.0
_POLL_S = 0.25  # how often the parent looks at a running worker (start-up marker, its processes)
_RECORD_S = 1.0  # how often it notes the processes in the worker's tree
_DRAIN_S = 5.0  # reading what a finished worker wrote, when something still holds its pipes
# set by the parent for the worker (and read and removed by worker_main)
ENV_STARTED = "MEND_WORKER_STARTED"  # a file the worker creates once its start-up is done
ENV_MEMORY = "MEND_WORKER_MEMORY_LIMIT"  # bytes
ENV_UNITS = "MEND_WORKER_UNITS"  # a file the worker appends each finished unit's result to (JSON lines)


@dataclass
class JobOutcome:
    result: Optional[dict[str, Any]]  # what the worker wrote, when it finished
    error: Optional[str]  # why not, in one line a user can act on
    returncode: Optional[int] = None
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    startup_s: Optional[float] = None  # how long the worker took to start (None: it never said)
    # a job of units (Job.units): the results of the units that finished, in order; when the
    # job failed, unit len(units) is the one it failed in
    units: list[dict[str, Any]] = field(default_factory=list)
    timed_out: bool = False


@dataclass
class Job:
    module: str  # the worker, run as ``python -m module PAYLOAD RESULT``
    payload: dict[str, Any]
    label: str  # names the target in error messages
    timeout: float = 300.0  # seconds of the worker's own work, start-up not counted
    env: dict[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None
    # seconds the worker may take to start before ``timeout`` counts (it says when it is done)
    startup: float = STARTUP_ALLOWANCE_S
    memory_limit: Optional[int] = None  # bytes of memory the worker may use; None: no limit
    # Several units of work in one worker (the targets of one file: they share torch's
    # import): ``timeout`` then bounds each unit, not their sum. The worker reports each
    # finished unit (``unit_done``); ``unit_labels[i]`` names unit i in a timeout's message.
    units: Optional[int] = None
    unit_labels: Sequence[str] = ()


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def format_size(n: int) -> str:
    """``4294967296`` -> ``4 GiB``; below 1 GiB in MiB."""
    if n >= 1 << 30:
        return f"{round(n / (1 << 30), 2):g} GiB"
    return f"{round(n / (1 << 20), 1):g} MiB"


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
        started_path = Path(tmp) / "started"
        units_path = Path(tmp) / "units.jsonl"
        payload_path.write_text(json.dumps(job.payload), encoding="utf-8")
        env = _worker_env(job.env)
        env[ENV_STARTED] = str(started_path)
        if job.units:
            env[ENV_UNITS] = str(units_path)
        units = _UnitLog(units_path)
        if job.memory_limit:
            env[ENV_MEMORY] = str(int(job.memory_limit))
            env.setdefault("OPENBLAS_NUM_THREADS", str(min(os.cpu_count() or 1, LIMITED_BLAS_THREADS)))
        start, wall_start = time.monotonic(), time.time()
        proc = subprocess.Popen(
            [sys.executable, "-m", job.module, str(payload_path), str(result_path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=job.cwd, start_new_session=True,
        )
        tree = ProcessTree(proc.pid)
        startup_s: Optional[float] = None
        out = err = b""
        timed_out = False
        next_record = 0.0
        while True:
            if startup_s is None and started_path.exists():
                try:
                    startup_s = max(0.0, started_path.stat().st_mtime - wall_start)
                except OSError:
                    startup_s = time.monotonic() - start
            # the clock starts when start-up is done, or when its allowance is used up; in a
            # job of units, again when a unit finishes
            clock = min(job.startup if startup_s is None else startup_s, job.startup)
            if job.units and startup_s is not None and units.read():
                clock = max(clock, units.last_seen - start)
            left = clock + job.timeout - (time.monotonic() - start)
            if left <= 0:
                timed_out = True
                break
            try:
                out, err = proc.communicate(timeout=min(left, _POLL_S))
                break
            except subprocess.TimeoutExpired:
                if proc.poll() is not None:
                    break  # the worker is gone but something it started still holds its pipes
                if startup_s is not None and time.monotonic() >= next_record:
                    tree.record()  # the user's code runs now: note what it starts
                    next_record = time.monotonic() + _RECORD_S
        if timed_out:
            tree.kill()
        else:
            tree.kill_leftovers()
        out, err = _drain(proc, out, err)
        duration = time.monotonic() - start
        out_s, err_s = _text(out), _text(err)
        done = units.read() if job.units else []
        # what a failure is about: the unit that was running, in a job of units
        label = job.unit_labels[len(done)] if job.units and len(done) < len(job.unit_labels) else job.label
        if timed_out:
            if startup_s is None:
                msg = (f"{label}: timed out after {job.timeout:g} s (raise it with --timeout); the worker "
                       f"had not finished starting up (importing torch) in the {job.startup:g} s allowed for that")
            else:
                msg = (f"{label}: timed out after {job.timeout:g} s (raise it with --timeout); "
                       f"the worker's start-up before that took {startup_s:.1f} s")
            return JobOutcome(None, msg, None, duration, out_s, err_s, startup_s, units=done, timed_out=True)
        result = None
        if result_path.exists():
            try:
                result = json.loads(result_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                result = None
        if result is not None:
            return JobOutcome(result, None, proc.returncode, duration, out_s, err_s, startup_s, units=done)
        rc = proc.returncode
        last = _last_line(err_s)
        if job.memory_limit and (rc == -signal.SIGKILL or looks_out_of_memory(err_s)):
            # the kernel's OOM killer, or an allocation failure that took the process down
            how = f"killed by {_signal_name(-rc)}" if rc < 0 else f"exited with status {rc}"
            msg = f"{label}: out of memory (limit {format_size(job.memory_limit)}): worker {how}"
        elif rc < 0:
            name = _signal_name(-rc)
            why = " (out of memory?)" if name == "SIGKILL" else ""
            msg = f"{label}: worker killed by {name}{why}"
        else:
            msg = f"{label}: worker exited with status {rc} without a result"
        if last:
            msg += f": {last}"
        return JobOutcome(None, msg, rc, duration, out_s, err_s, startup_s, units=done)


class _UnitLog:
    """The parent's view of a worker's finished units: complete lines of its JSON-lines file,
    and when the parent first saw the last of them (the next unit's clock starts there)."""

    def __init__(self, path: Path):
        self.path = path
        self.units: list[dict[str, Any]] = []
        self.last_seen = 0.0
        self._size = 0

    def read(self) -> list[dict[str, Any]]:
        try:
            size = self.path.stat().st_size
        except OSError:
            return self.units
        if size != self._size:
            try:
                data = self.path.read_bytes()
            except OSError:
                return self.units
            lines = data.split(b"\n")[:-1]  # a last line without its newline is still being written
            fresh = lines[len(self.units):]
            for line in fresh:
                try:
                    self.units.append(json.loads(line))
                except ValueError:
                    self.units.append({"error": "unreadable unit result"})
            if fresh:
                self.last_seen = time.monotonic()
            self._size = sum(len(line) + 1 for line in lines)
        return self.units


def _drain(proc: subprocess.Popen, out: Optional[bytes], err: Optional[bytes]) -> tuple[bytes, bytes]:
    """What is left on the worker's pipes, without waiting on a process that still holds them."""
    if proc.stdout is None or proc.stdout.closed:
        return out or b"", err or b""
    try:
        o, e = proc.communicate(timeout=_DRAIN_S)
    except subprocess.TimeoutExpired as exc:
        o, e = exc.stdout or b"", exc.stderr or b""
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
    except ValueError:  # already read to the end
        return out or b"", err or b""
    return o or b"", e or b""


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


# -- the worker's processes ---------------------------------------------------------
#
# A target may fork (a data-loader, a compile pool, a daemon that calls setsid and forks
# again). None of it may outlive the worker. Three parts, because no one of them is enough:
# - the worker makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a process
#   whose parent dies is re-parented to the worker, not to init, so everything the target
#   started stays in the worker's tree, setsid or not, and before exiting the worker kills
#   its children until none is left (worker_main);
# - on a timeout the parent stops the worker's whole tree (found through /proc) and kills it,
#   the worker's process group too;
# - when the worker dies without cleaning up (a crash, os._exit in the target), its orphans
#   go to init: the parent kills its process group and every process it saw in the tree
#   while the worker ran (recorded on each poll; a (pid, start time) pair, so a recycled pid
#   is never hit).
# psutil would do the /proc part, but it is not a dependency.

def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time in clock ticks) of every process /proc shows; empty
    where there is no /proc."""
    table: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
            # "pid (comm) state ppid ..."; comm may hold spaces and parentheses
            fields = data[data.rindex(b")") + 2:].split()
            table[int(name)] = (int(fields[1]), int(fields[19]))
        except (OSError, ValueError, IndexError):
            continue
    return table


def _descendants(roots: Sequence[int], table: dict[int, tuple[int, int]]) -> dict[int, int]:
    """pid -> start time of every process below ``roots`` in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    stack = list(roots)
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in found:
                found[c] = table[c][1]
                stack.append(c)
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class ProcessTree:
    """The processes a worker started, for killing them all when it ends (see above)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.seen: dict[int, int] = {}  # pid -> start time

    def record(self) -> None:
        self.seen.update(_descendants([self.pid], _proc_table()))

    def kill(self) -> None:
        """The worker (still running) and everything below it: stopped first, so that
        nothing forks while the tree is collected, then killed."""
        _signal(self.pid, signal.SIGSTOP)
        victims: dict[int, int] = {}
        for _ in range(100):
            found = _descendants([self.pid], _proc_table())
            new = [p for p in found if p not in victims]
            for p in new:
                _signal(p, signal.SIGSTOP)
            victims.update(found)
            if not new:
                break
        self.seen.update(victims)
        self._kill_group()
        _signal(self.pid, signal.SIGKILL)
        self.kill_leftovers()

    def kill_leftovers(self) -> None:
        """After the worker ended: its process group, and what it started that still runs."""
        self._kill_group()
        if not self.seen:
            return
        table = _proc_table()
        alive = [p for p, t in self.seen.items() if p in table and table[p][1] == t]
        for p, t in {**{p: self.seen[p] for p in alive}, **_descendants(alive, table)}.items():
            if p in table and table[p][1] == t:
                _signal(p, signal.SIGKILL)

    def _kill_group(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _reap_children() -> None:
    """In the worker, before it exits: kill its children and wait for them, again until none
    is left (as a subreaper it inherits each killed child's own children)."""
    me = os.getpid()
    for _ in range(1000):
        kids = [p for p, (ppid, _) in _proc_table().items() if ppid == me]
        if not kids:
            break
        for k in kids:
            _signal(k, signal.SIGKILL)
        for k in kids:
            try:
                os.waitpid(k, 0)
            except ChildProcessError:
                pass


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        PR_SET_CHILD_SUBREAPER = 36
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


# -- memory ----------------------------------------------------------------------------

_memory_limit: Optional[int] = None  # in a worker: the limit it runs under


def _apply_memory_limit() -> None:
    """RLIMIT_DATA rather than RLIMIT_AS: both make malloc and anonymous mmap fail past the
    limit (MemoryError in Python, torch's "can't allocate memory"), but the address-space
    limit also counts what is only reserved, and CUDA's driver reserves tens of GiB of it at
    start-up, so RLIMIT_AS would fail every CUDA worker. Children inherit the limit, each on
    its own."""
    global _memory_limit
    value = os.environ.pop(ENV_MEMORY, "")
    if not value:
        return
    try:
        import resource

        limit = int(value)
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        _memory_limit = limit
    except (ImportError, ValueError, OSError):
        pass


_OOM_SIGNS = ("MemoryError", "can't allocate memory", "Cannot allocate memory", "std::bad_alloc",
              "failed to map segment", "OpenBLAS error: Memory allocation")
# OpenBLAS reserves a buffer per thread when it loads (with torch or numpy), one thread per
# core: on a 16-core machine that alone passed a 1 GiB limit before any user code ran.
# Under a memory limit a worker gets at most this many, unless the user set the variable.
LIMITED_BLAS_THREADS = 4


def looks_out_of_memory(text: str) -> bool:
    return any(sign in text for sign in _OOM_SIGNS)


def out_of_memory(exc: BaseException) -> Optional[str]:
    """``out of memory (limit 4 GiB)`` when ``exc`` is an allocation failure (in a worker
    given a memory limit, the limit named), else None. A GPU's out-of-memory is not this."""
    if isinstance(exc, MemoryError) or (isinstance(exc, (RuntimeError, ImportError, OSError))
                                        and looks_out_of_memory(str(exc)) and "CUDA" not in str(exc)):
        return f"out of memory (limit {format_size(_memory_limit)})" if _memory_limit else "out of memory"
    return None


def describe(exc: BaseException) -> str:
    """``ValueError: bad`` -- or, for an allocation failure, ``out of memory (limit 4 GiB)``
    first, so a user sees why at once."""
    text = f"{type(exc).__name__}: {_first_line(exc)}".rstrip(": ")
    oom = out_of_memory(exc)
    return f"{oom} ({text})" if oom else text


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else ""


def _text(b: Optional[bytes]) -> str:
    if not b:
        return ""
    s = b.decode("utf-8", "replace")
    return s[-_TAIL:]


def _last_line(s: str) -> str:
    lines = [l.strip() for l in s.strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


def worker_main(handler: Callable[[dict[str, Any]], dict[str, Any]],
                startup: Optional[Callable[[], None]] = None) -> None:
    """The worker side: ``python -m X PAYLOAD RESULT``. ``startup`` (importing torch, say)
    runs first and is not counted against the job's timeout; ``handler`` returns the result;
    an exception either raises becomes ``{"error": ...}`` so the parent sees why."""
    import traceback

    global _units_path
    _apply_memory_limit()
    _become_subreaper()
    _units_path = os.environ.pop(ENV_UNITS, None)  # the user's code and its children need not see it
    payload_path, result_path = sys.argv[1], sys.argv[2]
    try:
        payload = json.loads(Path(payload_path).read_text(encoding="utf-8"))
        if startup is not None:
            startup()
        _mark_started()
        result = handler(payload)
    except BaseException as exc:  # the user's code may raise anything, SystemExit too
        tb = traceback.format_exc(limit=-3)
        result = {"error": describe(exc) if out_of_memory(exc) else f"{type(exc).__name__}: {exc}".strip(),
                  "traceback": tb}
    tmp = result_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, default=str)
    os.replace(tmp, result_path)
    sys.stdout.flush()
    sys.stderr.flush()
    _reap_children()
    os._exit(0)  # skip interpreter teardown: torch's can be slow or crash


_units_path: Optional[str] = None  # in a worker of a job of units: where unit_done appends


def unit_done(result: dict[str, Any]) -> None:
    """In a worker of a job of units: one unit finished with ``result`` (the parent restarts
    the unit clock and keeps the result should a later unit hang or crash). A no-op in a
    worker started without units."""
    path = _units_path
    if not path:
        return
    line = json.dumps(result, default=str) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()


def _mark_started() -> None:
    path = os.environ.pop(ENV_STARTED, "")
    if path:
        try:
            Path(path).touch()
        except OSError:
            pass
