"""The worker side of a job (``python -m MODULE PAYLOAD RESULT``, see graphmend.core.jobs): its
start-up (memory limit, process tree, the watch on its parent), its result, the units of a job
of units, and how a worker's death is put in one line. Both sides share the protocol's names.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Optional

from graphmend.core.processes import become_subreaper, die_with_parent, on_term, reap_children, watch_parent

TAIL = 2000
# set by the parent for the worker (and read and removed by worker_main)
ENV_STARTED = "MEND_WORKER_STARTED"  # a file the worker creates once its start-up is done
ENV_MEMORY = "MEND_WORKER_MEMORY_LIMIT"  # bytes
ENV_UNITS = "MEND_WORKER_UNITS"  # a file the worker appends each finished unit's result to (JSON lines)
# a pid the worker watches: when that process is gone, nobody enforces the worker's timeout any
# more, and the worker ends its tree and itself (run_job_local sets it to its own process's pid:
# mend's, or on Ray the Ray worker's)
ENV_WATCH = "MEND_WORKER_WATCH"


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


def tail_text(b: Optional[bytes]) -> str:
    if not b:
        return ""
    s = b.decode("utf-8", "replace")
    return s[-TAIL:]


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
    become_subreaper()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
    die_with_parent(signal.SIGTERM)
    _units_path = os.environ.pop(ENV_UNITS, None)  # the user's code and its children need not see it
    watch_parent(ENV_WATCH)
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
    reap_children()
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
            die_with_parent(signal.SIGKILL)
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
    reap_children()  # what the unit started and left running
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
            fh.seek(max(mark, end - 4 * TAIL))
            return tail_text(fh.read(end - fh.tell()))
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
