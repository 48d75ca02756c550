"""Run one unit of work (a target capture, a bench arm, a verification) in a worker
subprocess, so that a target that hangs, segfaults or exhausts memory costs only its own
result. Workers read a JSON payload from a file and write a JSON result to another; the
user code's own stdout/stderr never mixes with the protocol.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

_TAIL = 2000
# Added to each worker's limit before --timeout starts counting: importing torch takes
# seconds (more on a loaded machine), and --timeout is meant for the target's own run.
STARTUP_ALLOWANCE_S = 30.0
_POLL_S = 0.25  # how often the parent looks at a running worker (start-up marker, its processes)
_RECORD_S = 1.0  # how often it notes the processes in the worker's tree
_DRAIN_S = 5.0  # waiting for a killed worker's exit status
# what is kept on disk of a worker's stdout and stderr: their last bytes (the report shows only
# their tail); a target that prints gigabytes must not fill the disk
KEEP_OUTPUT = 4 << 20
# set by the parent for the worker (and read and removed by worker_main)
ENV_STARTED = "MEND_WORKER_STARTED"  # a file the worker creates once its start-up is done
ENV_MEMORY = "MEND_WORKER_MEMORY_LIMIT"  # bytes
ENV_UNITS = "MEND_WORKER_UNITS"  # a file the worker appends each finished unit's result to (JSON lines)
# read by the parent: "spawn" starts every worker as a fresh interpreter, warm jobs included
ENV_START = "MEND_WORKER_START"
# a pid the worker watches: when that process is gone, nobody enforces the worker's timeout any
# more, and the worker ends its tree and itself (run_job_local sets it to its own process's pid:
# mend's, or on Ray the Ray worker's)
ENV_WATCH = "MEND_WORKER_WATCH"


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
    # the worker's reports went with it (its Ray task failed): which units finished is unknown
    lost: bool = False


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
    # Start as a fork of a process that has already imported torch (see "warm start" below)
    # rather than as a fresh interpreter. For workers whose start-up is importing torch; not
    # for bench arms, whose environment and caches are set per arm before torch loads.
    warm: bool = False


# The words of run_job's errors for a worker that did not finish on its own (a timeout,
# memory, a crash): such a failure says nothing of the work, and a cache must not keep it.
TRANSIENT = ("timed out after", "out of memory", "worker killed by", "worker exited with status",
             "ray task failed")


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


def _worker_env(extra: dict[str, str], environ: Optional[dict[str, str]] = None) -> dict[str, str]:
    env = dict(os.environ if environ is None else environ)
    # The worker must import graphmend/tracer/... from wherever this process did.
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


# -- where jobs run ---------------------------------------------------------------------
#
# Every stage calls run_job; where the job runs is a property of the run, chosen once by the
# command (graphmend.core.executors): in a worker subprocess of this process (the default),
# or as a Ray task that runs the same run_job_local on a node. A module-level value, not a
# context variable, because the stages call run_job from their own thread pools; set only
# for the extent of a ``use_executor`` block.
_executor: Optional[Any] = None  # an object with run(job) -> JobOutcome; None: local
_executor_lock = threading.Lock()


@contextmanager
def use_executor(executor: Optional[Any]) -> Iterator[None]:
    """Within the block, run_job hands every job to ``executor`` (None: runs them here)."""
    global _executor
    with _executor_lock:
        before, _executor = _executor, executor
    try:
        yield
    finally:
        with _executor_lock:
            _executor = before


def run_job(job: Job) -> JobOutcome:
    """Run ``job`` where the run's executor says: by default, ``run_job_local``."""
    executor = _executor
    if executor is None:
        return run_job_local(job)
    return executor.run(job)


def run_job_local(job: Job, environ: Optional[dict[str, str]] = None) -> JobOutcome:
    """Run ``job`` in a worker subprocess of this process; ``environ`` (default os.environ)
    is the environment the worker's is made from."""
    if _ending:
        return JobOutcome(None, f"{job.label}: not run: mend is stopping")
    with tempfile.TemporaryDirectory(prefix="mend-job-") as tmp:
        payload_path = Path(tmp) / "payload.json"
        result_path = Path(tmp) / "result.json"
        started_path = Path(tmp) / "started"
        units_path = Path(tmp) / "units.jsonl"
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        payload_path.write_text(json.dumps(job.payload), encoding="utf-8")
        env = _worker_env(job.env, environ)
        # what the environment is apart from this job's own files: a warm process is kept per value
        base_env = dict(env)
        env[ENV_STARTED] = str(started_path)
        env[ENV_WATCH] = str(os.getpid())  # the worker ends itself should this process die
        if job.units:
            env[ENV_UNITS] = str(units_path)
        units = _UnitLog(units_path)
        if job.memory_limit:
            env.setdefault("OPENBLAS_NUM_THREADS", str(min(os.cpu_count() or 1, LIMITED_BLAS_THREADS)))
            base_env["OPENBLAS_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"]  # read when torch loads
            env[ENV_MEMORY] = str(int(job.memory_limit))
        start, wall_start = time.monotonic(), time.time()
        argv = [str(payload_path), str(result_path)]
        proc = _start(job, argv, env, base_env, job.cwd or os.getcwd(), out_path, err_path)
        tree = ProcessTree(proc.pid)
        with _live_lock:
            _live.add(tree)
        outcome = None
        try:
            if _ending:  # end_all ran while this worker started: it missed this one
                tree.kill()
            outcome = _watch(job, proc, tree, start, wall_start, started_path, result_path, units,
                             out_path, err_path)
            return outcome
        finally:
            with _live_lock:
                _live.discard(tree)
            if outcome is None:  # left early (KeyboardInterrupt, an error here): nothing it started runs on
                tree.kill()


def _watch(job: Job, proc: Any, tree: "ProcessTree", start: float, wall_start: float, started_path: Path,
           result_path: Path, units: "_UnitLog", out_path: Path, err_path: Path) -> JobOutcome:
    """Wait for the worker of ``job`` under its clock; its outcome."""
    startup_s: Optional[float] = None
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
        if proc.wait(min(left, _POLL_S)) is not None:
            break
        if startup_s is not None and time.monotonic() >= next_record:
            tree.record()  # the user's code runs now: note what it starts
            _keep_tail(out_path)
            _keep_tail(err_path)
            next_record = time.monotonic() + _RECORD_S
    if timed_out:
        tree.kill()
        proc.wait(_DRAIN_S)  # reaped, so that its pid is not reused while the group is killed
    else:
        tree.kill_leftovers()
    _keep_tail(out_path)
    _keep_tail(err_path)
    duration = time.monotonic() - start
    out_s, err_s = _tail(out_path), _tail(err_path)
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
    rc = proc.returncode
    if result is not None:
        return JobOutcome(result, None, rc, duration, out_s, err_s, startup_s, units=done)
    if _ending:
        return JobOutcome(None, f"{label}: stopped: mend is stopping", rc, duration, out_s, err_s, startup_s,
                          units=done)
    return JobOutcome(None, died(label, rc, err_s, job.memory_limit), rc, duration, out_s, err_s, startup_s,
                      units=done)


def died(label: str, rc: int, err: str, memory_limit: Optional[int]) -> str:
    """Why a process ended with status ``rc`` (negative: the signal) without its result, in one
    line: the kernel's OOM killer, an allocation failure, a signal, an exit; ``err`` is the
    end of its stderr, whose last line is added."""
    last = _last_line(err)
    if memory_limit and (rc == -signal.SIGKILL or looks_out_of_memory(err)):
        # the kernel's OOM killer, or an allocation failure that took the process down
        how = f"killed by {_signal_name(-rc)}" if rc < 0 else f"exited with status {rc}"
        msg = f"{label}: out of memory (limit {format_size(memory_limit)}): worker {how}"
    elif rc < 0:
        name = _signal_name(-rc)
        why = " (out of memory?)" if name == "SIGKILL" else ""
        msg = f"{label}: worker killed by {name}{why}"
    else:
        msg = f"{label}: worker exited with status {rc} without a result"
    if last:
        msg += f": {last}"
    return msg


def _keep_tail(path: Path) -> None:
    """Free all but the last KEEP_OUTPUT bytes of the worker's output file ``path``, in place:
    the worker keeps writing at its offset, and what lies before the tail becomes a hole (Linux
    fallocate PUNCH_HOLE; elsewhere the file is left as it is)."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if st.st_blocks * 512 <= 2 * KEEP_OUTPUT:
            return
        end = (st.st_size - KEEP_OUTPUT) // 4096 * 4096  # whole blocks only
        if end > 0 and _punch is not None:
            _punch(fd, 3, 0, end)  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
    finally:
        os.close(fd)


def _fallocate() -> Optional[Callable[..., int]]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        f = ctypes.CDLL(None, use_errno=True).fallocate
        f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
        return f
    except (OSError, AttributeError):
        return None


_punch = _fallocate()


def _tail(path: Path) -> str:
    """The last of what the worker (or anything it started) wrote to ``path``."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4 * _TAIL))
            return _text(fh.read())
    except OSError:
        return ""


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


# -- starting a worker -------------------------------------------------------------------
#
# Importing torch costs a worker 4-10 s of CPU: most of what capturing or verifying a small
# target takes. A warm job starts instead as a fork of a process that has already imported
# torch and torch._dynamo (one such process per distinct environment, kept for the run).
# The job is still its own process, in its own session, with its own memory limit, process
# tree and clock, and it starts from nothing any earlier job did: the warm process runs no
# user code, compiles nothing and starts no CUDA; it only forks. Where it cannot be had (no
# fork, CUDA already up in it, ``MEND_WORKER_START=spawn``) a job starts a fresh interpreter.
WARM_PRELOAD = ("torch", "torch._dynamo")
_WARM_WAIT_S = 60.0  # for the warm process to import torch, or to answer a fork


class _Spawned:
    """A worker started as ``python -m module ...``."""

    def __init__(self, job: Job, argv: list[str], env: dict[str, str], cwd: str, out: Path, err: Path):
        with open(out, "wb") as o, open(err, "wb") as e:
            self.proc = subprocess.Popen([sys.executable, "-m", job.module, *argv], stdin=subprocess.DEVNULL,
                                         stdout=o, stderr=e, env=env, cwd=cwd, start_new_session=True)
        self.pid = self.proc.pid

    @property
    def returncode(self) -> Optional[int]:
        return self.proc.returncode

    def wait(self, timeout: float) -> Optional[int]:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class _Forked:
    """A worker forked by a warm process, which reports its exit status."""

    def __init__(self) -> None:
        self.pid = 0
        self.returncode: Optional[int] = None
        self.forked = threading.Event()
        self.ended = threading.Event()

    def wait(self, timeout: float) -> Optional[int]:
        self.ended.wait(timeout)
        return self.returncode


class _Warm:
    """A process that has imported torch and forks a worker for each request (``_warm_main``)."""

    def __init__(self, env: dict[str, str]):
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.usable = False
        self.pending: dict[int, _Forked] = {}
        self.next_id = 0
        self.proc = subprocess.Popen([sys.executable, "-m", __name__, "--warm", *WARM_PRELOAD],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "ready" in msg:
                self.usable = bool(msg["ready"])
                self.ready.set()
                continue
            with self.lock:
                f = self.pending.get(msg.get("id", -1))
            if f is None:
                continue
            if "pid" in msg:
                f.pid = msg["pid"]
                f.forked.set()
            elif "status" in msg:
                f.returncode = msg["status"]
                with self.lock:
                    self.pending.pop(msg["id"], None)
                f.ended.set()
        # gone: nothing more will be said of the workers it started
        self.usable = False
        self.ready.set()
        with self.lock:
            lost, self.pending = list(self.pending.values()), {}
        for f in lost:
            if f.returncode is None:
                f.returncode = -signal.SIGKILL if not _alive(f.pid) else 255
            f.forked.set()
            f.ended.set()

    def start(self, job: Job, argv: list[str], env: dict[str, str], cwd: str, out: Path,
              err: Path) -> Optional[_Forked]:
        if not self.ready.wait(_WARM_WAIT_S) or not self.usable:
            return None
        f = _Forked()
        req = {"module": job.module, "argv": argv, "env": env, "cwd": cwd, "stdout": str(out), "stderr": str(err)}
        with self.lock:
            req["id"] = self.next_id
            self.next_id += 1
            self.pending[req["id"]] = f
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write((json.dumps(req) + "\n").encode())
                self.proc.stdin.flush()
            except (OSError, ValueError):
                self.pending.pop(req["id"], None)
                self.usable = False
                return None
        if not f.forked.wait(_WARM_WAIT_S) or not f.pid:
            return None
        return f

    def kill(self) -> None:
        """Now, and the workers it forked with it (each is tied to it: see worker_main)."""
        _signal(self.proc.pid, signal.SIGKILL)

    def close(self, wait: float = 0.0) -> None:
        """No more forks; it ends once the workers it runs have (their statuses still come)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            if wait:
                self.proc.wait(wait)
        except (OSError, subprocess.TimeoutExpired):
            pass


# one per environment, the most recently used kept: each holds torch in memory
_WARM_KEPT = 2
_warm: "OrderedDict[tuple, _Warm]" = OrderedDict()
_warm_lock = threading.RLock()  # re-entrant: end_all may run in a signal handler of a thread holding it


def _start(job: Job, argv: list[str], env: dict[str, str], base_env: dict[str, str], cwd: str, out: Path,
           err: Path):
    if job.warm and hasattr(os, "fork") and env.get(ENV_START) != "spawn":
        key = tuple(sorted(base_env.items()))
        with _warm_lock:
            warm = _warm.get(key)
            if warm is None or warm.proc.poll() is not None:
                warm = _warm[key] = _Warm(base_env)
            _warm.move_to_end(key)
            while len(_warm) > _WARM_KEPT:
                _warm.popitem(last=False)[1].close()
        forked = warm.start(job, argv, env, cwd, out, err)
        if forked is not None:
            return forked
    return _Spawned(job, argv, env, cwd, out, err)


def _end_workers(drain: bool) -> None:
    """Kill every running worker with everything it started, then end the warm processes:
    closed after draining for ``drain``, else killed."""
    with _live_lock:
        trees = list(_live)
    for t in trees:
        t.kill()
    with _warm_lock:
        warm = list(_warm.values())
        _warm.clear()
    for w in warm:
        if drain:
            w.close(wait=_DRAIN_S)
        else:
            w.kill()


@atexit.register
def close_warm() -> None:
    """End the warm processes (and any worker still running: nothing waits for it any more)."""
    _end_workers(drain=True)


# -- mend stopping ------------------------------------------------------------------------
#
# Ctrl-C or SIGTERM on mend: every worker running, what it started and the warm processes end
# with mend, at once (the CLI's signal handlers call end_all), rather than running on with no
# timeout over them. Should mend die without a word (SIGKILL), each worker notices: it is tied
# to its parent (PR_SET_PDEATHSIG) and watches mend's pid (ENV_WATCH); see worker_main.
_live: set = set()  # the ProcessTree of every worker running now
_live_lock = threading.RLock()
_ending = False  # end_all ran: no job starts any more


def end_all() -> None:
    """Kill every running worker with everything it started, and the warm processes; from
    here on a job is not started (its outcome says why). For mend's signal handlers."""
    global _ending
    _ending = True
    _end_workers(drain=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _warm_main(preload: Sequence[str]) -> None:
    """The warm process: import ``preload``, then fork a worker per request read from stdin
    (a JSON line), reporting its pid and, once reaped, its exit status on stdout."""
    import importlib
    import select

    def say(msg: dict[str, Any]) -> None:
        os.write(1, (json.dumps(msg) + "\n").encode())

    try:
        for name in preload:
            importlib.import_module(name)
        torch = sys.modules.get("torch")
        # a fork of a process with CUDA up, or with Python threads, cannot be trusted
        usable = threading.active_count() == 1 and not (torch is not None and torch.cuda.is_initialized())
    except BaseException:  # whatever it was, the jobs start fresh interpreters and say it there
        usable = False
    say({"ready": usable})
    if not usable:
        os._exit(0)
    children: dict[int, int] = {}  # pid -> request id
    buf, open_ = b"", True
    while open_ or children:
        readable, _, _ = select.select([0] if open_ else [], [], [], 0.05)
        if readable:
            data = os.read(0, 1 << 16)
            if not data:
                open_ = False  # no more forks: the parent is done, or gone (its workers run on, as spawned ones do)
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _warm_child(req)  # never returns
                children[pid] = req["id"]
                say({"id": req["id"], "pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in children:
                try:
                    say({"id": children.pop(pid), "status": os.waitstatus_to_exitcode(status)})
                except OSError:
                    pass  # nobody listens any more
    os._exit(0)


def _warm_child(req: dict[str, Any]) -> None:
    """In the fork: become ``python -m module argv...`` started in ``cwd`` with ``env``."""
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.path[0] = os.getcwd()  # what ``python -m`` puts first
        # a fresh interpreter seeds these from the OS; every fork would share the warm one's
        import random

        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        import runpy

        sys.argv = [req["module"], *req["argv"]]
        runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:  # the module's own failure: printed as Python would, the exit code says it
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


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


def _start_time(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _watch_parent() -> None:
    """In a worker given ENV_WATCH: end the worker's tree and the worker once the watched
    process is gone. A Ray worker killed mid-task (the node's OOM killer, a lost node) would
    otherwise leave its job running with no timeout over it."""
    value = os.environ.pop(ENV_WATCH, "")
    if not value.isdigit():
        return
    pid = int(value)
    start = _start_time(pid)

    def watch() -> None:
        while True:
            time.sleep(_POLL_S)
            if not _alive(pid) or _start_time(pid) != start:  # gone, or its pid reused
                _reap_children()
                os._exit(1)

    threading.Thread(target=watch, name="mend-watch", daemon=True).start()


def _prctl(option: int, value: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _become_subreaper() -> None:
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def _die_with_parent(sig: int) -> None:
    """The kernel sends ``sig`` to this process when its parent (the thread that started it)
    ends (PR_SET_PDEATHSIG)."""
    _prctl(1, sig)  # PR_SET_PDEATHSIG


def _on_term(signum: int, frame: Any) -> None:
    """In a worker, on SIGTERM (its parent's death among them): end what it started, then
    die of the signal as it would have."""
    _reap_children()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


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

    global _units_path, _job_dir
    _apply_memory_limit()
    _become_subreaper()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_term)
    _die_with_parent(signal.SIGTERM)
    _units_path = os.environ.pop(ENV_UNITS, None)  # the user's code and its children need not see it
    _watch_parent()
    payload_path, result_path = sys.argv[1], sys.argv[2]
    _job_dir = os.path.dirname(os.path.abspath(result_path))
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
        if not str(exc).strip() and not out_of_memory(exc):
            # a bare ``assert`` in a library says nothing; where it stands does
            where = traceback.extract_tb(exc.__traceback__)[-1:]
            if where:
                result["error"] = (f"{type(exc).__name__} at {os.path.basename(where[0].filename)}:"
                                   f"{where[0].lineno} in {where[0].name}")
    tmp = result_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, default=str)
    os.replace(tmp, result_path)
    sys.stdout.flush()
    sys.stderr.flush()
    _reap_children()
    os._exit(0)  # skip interpreter teardown: torch's can be slow or crash


_units_path: Optional[str] = None  # in a worker of a job of units: where unit_done appends
_job_dir: Optional[str] = None  # in a worker: the job's temporary folder (its payload's)


def run_isolated(fn: Callable[[], dict[str, Any]], label: str) -> dict[str, Any]:
    """In a worker: ``fn()`` run in a fork of the worker, so that whatever it changes (module
    globals, torch's and Dynamo's settings, the default dtype, a closed fd 1 or 2, processes
    it leaves running) ends with the fork, and the next unit starts from the worker as it was.
    ``fn``'s result (JSON), or ``{"error": ...}`` naming ``label`` when its process ended
    without one: killed by a signal, out of memory, or the target's own ``os._exit(n)``."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="unit-", suffix=".json", dir=_job_dir)  # removed with the job's folder
    os.close(fd)
    marks = {n: _size(n) for n in (1, 2)}  # where the unit's own output will start
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the unit
        code = 1
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _die_with_parent(signal.SIGKILL)
            if os.getppid() != parent:
                os._exit(1)
            try:
                result = fn()
            except BaseException as exc:
                result = {"error": f"{label}: {describe(exc)}"}
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(result, fh, default=str)
            code = 0
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # the target may have closed it
                    pass
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    _reap_children()  # what the unit started and left running
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        os.unlink(path)
    except OSError:
        text = ""
    if text:
        try:
            return json.loads(text)
        except ValueError:
            pass
    out, err = _since(1, marks[1]), _since(2, marks[2])
    if rc >= 0 and not (_memory_limit and looks_out_of_memory(err)):
        last = _last_line(out) or _last_line(err)
        return {"error": f"{label}: the target called os._exit({rc})" + (f"; its last output: {last}" if last else "")}
    return {"error": died(label, rc, err, _memory_limit)}


def _size(fd: int) -> Optional[int]:
    try:
        return os.fstat(fd).st_size
    except OSError:
        return None


def _since(fd: int, mark: Optional[int]) -> str:
    """The last of what was written to ``fd`` (a worker's stdout or stderr, a file opened for
    writing only: read through /proc) past offset ``mark``."""
    end = _size(fd)
    if mark is None or end is None or end <= mark:
        return ""
    try:
        with open(f"/proc/self/fd/{fd}", "rb") as fh:
            fh.seek(max(mark, end - 4 * _TAIL))
            return _text(fh.read(end - fh.tell()))
    except (OSError, ValueError):
        return ""


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


if __name__ == "__main__" and sys.argv[1:2] == ["--warm"]:
    _warm_main(sys.argv[2:])
