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

from graphmend.core.processes import ProcessTree, alive, signal_quietly
from graphmend.core.worker import (ENV_MEMORY, ENV_STARTED, ENV_UNITS, ENV_WATCH, LIMITED_BLAS_THREADS, TAIL, died,
                                   tail_text)

# Added to each worker's limit before --timeout starts counting: importing torch takes
# seconds (more on a loaded machine), and --timeout is meant for the target's own run.
STARTUP_ALLOWANCE_S = 30.0
_POLL_S = 0.25  # how often the parent looks at a running worker (start-up marker, its processes)
_RECORD_S = 1.0  # how often it notes the processes in the worker's tree
_DRAIN_S = 5.0  # waiting for a killed worker's exit status
# what is kept on disk of a worker's stdout and stderr: their last bytes (the report shows only
# their tail); a target that prints gigabytes must not fill the disk
KEEP_OUTPUT = 4 << 20
# read by the parent: "spawn" starts every worker as a fresh interpreter, warm jobs included
ENV_START = "MEND_WORKER_START"


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


JOB_DIR_PREFIX = "mend-job-"  # + the pid of the mend process that made it, "-", a random suffix
_swept = False


def remove_stale_job_dirs(root: Optional[Path] = None) -> int:
    """Remove the job folders of this user's mend processes that are gone (a SIGKILL runs no
    cleanup: the payload, with its patched sources, would stay on disk); the number removed.
    A folder is left alone where its process may live, it is a link, or another user owns it."""
    import re
    import shutil
    import stat

    if not hasattr(os, "getuid"):
        return 0
    removed = 0
    for d in Path(root or tempfile.gettempdir()).glob(f"{JOB_DIR_PREFIX}*-*"):
        m = re.match(rf"{JOB_DIR_PREFIX}(\d+)-", d.name)
        try:
            st = d.lstat()
        except OSError:
            continue
        if m is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or alive(int(m.group(1))):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed += not d.exists()
    return removed


def run_job_local(job: Job, environ: Optional[dict[str, str]] = None) -> JobOutcome:
    """Run ``job`` in a worker subprocess of this process; ``environ`` (default os.environ)
    is the environment the worker's is made from."""
    global _swept
    if _ending:
        return JobOutcome(None, f"{job.label}: not run: mend is stopping")
    if not _swept:  # once per process: what killed runs before it left behind
        _swept = True
        remove_stale_job_dirs()
    with tempfile.TemporaryDirectory(prefix=f"{JOB_DIR_PREFIX}{os.getpid()}-") as tmp:
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
            fh.seek(max(0, fh.tell() - 4 * TAIL))
            return tail_text(fh.read())
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
# torch, torch._dynamo and what a first compile imports (one such process per distinct
# environment, kept for the run).
# The job is still its own process, in its own session, with its own memory limit, process
# tree and clock, and it starts from nothing any earlier job did: the warm process runs no
# user code, compiles nothing and starts no CUDA; it only forks. Where it cannot be had (no
# fork, CUDA already up in it, ``MEND_WORKER_START=spawn``) a job starts a fresh interpreter.
WARM_PRELOAD = ("torch", "torch._dynamo")
# What a process's first compile imports besides (AOTAutograd, the min-cut partitioner, the
# Inductor passes it runs, export's tracer): about a second of every capture and verification
# that compiles, paid once here instead. Optional: a torch without one of them still forks.
WARM_PRELOAD_OPTIONAL = ("torch._dynamo.backends.debugging", "torch._dynamo.backends.inductor",
                         "torch._dynamo.repro.after_dynamo", "torch._functorch.aot_autograd",
                         "torch._functorch.partitioners", "torch._inductor.lowering",
                         "torch._inductor.pattern_matcher", "torch.export._trace")
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
        self.proc = subprocess.Popen([sys.executable, "-m", __name__, "--warm", *WARM_PRELOAD, "--",
                                      *WARM_PRELOAD_OPTIONAL],
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
                f.returncode = -signal.SIGKILL if not alive(f.pid) else 255
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
        signal_quietly(self.proc.pid, signal.SIGKILL)

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


def _warm_main(preload: Sequence[str], optional: Sequence[str] = ()) -> None:
    """The warm process: import ``preload`` (and of ``optional`` what this torch has), then
    fork a worker per request read from stdin (a JSON line), reporting its pid and, once
    reaped, its exit status on stdout."""
    import importlib
    import select

    def say(msg: dict[str, Any]) -> None:
        os.write(1, (json.dumps(msg) + "\n").encode())

    try:
        for name in preload:
            importlib.import_module(name)
        for name in optional:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
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


if __name__ == "__main__" and sys.argv[1:2] == ["--warm"]:
    _args = sys.argv[2:]
    _cut = _args.index("--") if "--" in _args else len(_args)
    _warm_main(_args[:_cut], _args[_cut + 1:])
