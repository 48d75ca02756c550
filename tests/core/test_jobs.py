"""Worker subprocesses: results, errors, timeouts and signals, with a tiny worker module."""
import os
import re
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from graphmend.core.jobs import Job, run_job, run_jobs
from graphmend.core.worker import format_size


def _worker(tmp_path):
    (tmp_path / "tiny_worker.py").write_text(textwrap.dedent("""
        import os, signal, time
        from graphmend.core.worker import worker_main
        def handle(p):
            if p["do"] == "raise": raise ValueError("nope")
            if p["do"] == "assert": assert p["do"] == "never"
            if p["do"] == "sleep": time.sleep(60)
            if p["do"] == "segv": os.kill(os.getpid(), signal.SIGSEGV)
            if p["do"] == "exit": os._exit(3)
            return {"echo": p["do"]}
        worker_main(handle)
    """))
    return {"PYTHONPATH": str(tmp_path)}


@pytest.mark.parametrize("warm", [False, True], ids=["spawned", "warm"])
def test_outcomes(tmp_path, warm):
    env = _worker(tmp_path)
    jobs = [Job("tiny_worker", {"do": d}, label=f"T-{d}", timeout=4, env=env, warm=warm)
            for d in ("ok", "raise", "sleep", "segv", "exit", "assert")]
    seen = []
    ok, raised, slept, segv, exited, asserted = run_jobs(jobs, parallel=2, on_done=lambda j, o: seen.append(j.label))
    assert sorted(seen) == sorted(j.label for j in jobs)
    assert ok.result == {"echo": "ok"} and ok.error is None
    assert raised.result["error"] == "ValueError: nope"
    assert asserted.result["error"] == "AssertionError at tiny_worker.py:6 in handle"  # a bare assert: where it stands
    assert "T-sleep: timed out after 4 s" in slept.error
    assert "T-segv" in segv.error and "SIGSEGV" in segv.error
    assert "T-exit" in exited.error and "status 3" in exited.error
    from graphmend.core.jobs import TRANSIENT  # each such failure is known as one (a cache keeps none)

    assert all(any(sign in o.error for sign in TRANSIENT) for o in (slept, segv, exited))


# -- a worker's whole process tree ends with it ----------------------------------------

def _tree_worker(tmp_path):
    """A worker whose handler forks a plain child and a setsid double-forked daemon (each
    writes its pid to a file and sleeps), then returns, hangs or dies without cleaning up."""
    (tmp_path / "tree_worker.py").write_text(textwrap.dedent("""
        import os, time
        from graphmend.core.worker import worker_main

        def spawn(path, daemon):
            if os.fork() == 0:
                if daemon:
                    os.setsid()
                    if os.fork():
                        os._exit(0)
                with open(path, "w") as fh:
                    fh.write(str(os.getpid()))
                time.sleep(300)
                os._exit(0)

        def handle(p):
            spawn(p["plain"], False)
            spawn(p["daemon"], True)
            while not (os.path.exists(p["plain"]) and os.path.exists(p["daemon"])):
                time.sleep(0.05)
            if p["do"] == "hang":
                time.sleep(300)
            if p["do"] == "crash":
                time.sleep(2.5)  # the parent looks at the worker's processes once a second
                os._exit(5)
            return {"ok": True}

        worker_main(handle)
    """))
    return {"PYTHONPATH": str(tmp_path)}


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan waits for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _gone(pid: int) -> bool:
    import time

    for _ in range(100):  # SIGKILL is delivered at once; its exit takes a moment
        if not _running(pid):
            return True
        time.sleep(0.05)
    return False


def _bounded(job: Job, limit: float = 120.0):
    """run_job, failing instead of hanging when a leftover child keeps the worker's pipes open."""
    import threading

    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("outcome", run_job(job)), daemon=True)
    thread.start()
    thread.join(limit)
    assert "outcome" in box, f"{job.label}: still waiting after {limit:g} s on a child that holds the worker's pipes"
    return box["outcome"]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc (Linux)")
@pytest.mark.parametrize("warm", [False, True], ids=["spawned", "warm"])
@pytest.mark.parametrize("do", ["return", "hang", "crash"])
def test_forked_children_die_with_the_worker(tmp_path, do, warm):
    env = _tree_worker(tmp_path)
    files = {k: str(tmp_path / f"{k}.pid") for k in ("plain", "daemon")}
    out = _bounded(Job("tree_worker", {"do": do, **files}, label=f"T-{do}", timeout=5, env=env, warm=warm))
    if do == "return":
        assert out.result == {"ok": True}
    elif do == "hang":
        assert "timed out after 5 s" in out.error
    else:
        assert "status 5" in out.error
    pids = {k: int(Path(f).read_text()) for k, f in files.items()}
    try:
        for kind, pid in pids.items():
            assert _gone(pid), f"the {kind} child {pid} outlived its worker ({do})"
    finally:
        for pid in pids.values():
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


# -- a warm job: a fork of a process with torch imported, and nothing else ---------------

def _state_worker(tmp_path):
    (tmp_path / "state_worker.py").write_text(textwrap.dedent("""
        import os, random, sys
        PRELOADED = "torch" in sys.modules  # before this module imports anything
        # what a first compile imports (jobs.WARM_PRELOAD_OPTIONAL)
        COMPILE_READY = "torch._functorch.aot_autograd" in sys.modules
        from graphmend.core.worker import worker_main

        def handle(p):
            import time
            time.sleep(p.get("sleep", 0))
            import torch
            from torch._dynamo.utils import counters
            seen = {"preloaded": PRELOADED, "compile_ready": COMPILE_READY, "pid": os.getpid(), "cwd": os.getcwd(),
                    "path0": sys.path[0], "env": os.environ.get("MEND_TEST_VALUE"), "argv": sys.argv[1:], "random": random.random(),
                    "marked": hasattr(torch, "_mend_test_mark"), "frames": sum(counters["frames"].values()),
                    "grad": torch.is_grad_enabled(), "threads": torch.get_num_threads()}
            torch._mend_test_mark = True  # what a job leaves behind: the next must not see it
            torch.set_grad_enabled(False)
            torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
            return seen

        worker_main(handle)
    """))
    return {"PYTHONPATH": str(tmp_path)}


def test_warm_jobs_start_fresh_and_as_asked(tmp_path):
    env = _state_worker(tmp_path)
    here, there = tmp_path / "a", tmp_path / "b"
    here.mkdir()
    there.mkdir()
    first, second = (run_job(Job("state_worker", {}, label=f"T-{i}", timeout=60, warm=True, cwd=str(cwd),
                                 env={**env, "MEND_TEST_VALUE": f"v{i}"}))
                     for i, cwd in enumerate((here, there)))
    spawned = run_job(Job("state_worker", {}, label="T-spawned", timeout=60, env={**env, "MEND_TEST_VALUE": "v0"}))
    for out in (first, second, spawned):
        assert out.error is None and "error" not in out.result, out.error or out.result
    a, b, fresh = first.result, second.result, spawned.result
    assert a["preloaded"] and b["preloaded"] and not fresh["preloaded"]
    assert a["compile_ready"] and not fresh["compile_ready"]
    assert a["pid"] != b["pid"] and os.getpid() not in (a["pid"], b["pid"])
    assert (a["cwd"], a["path0"], a["env"]) == (str(here), str(here), "v0")
    assert (b["cwd"], b["path0"], b["env"]) == (str(there), str(there), "v1")
    assert len(a["argv"]) == 2 and a["argv"][1].endswith("result.json")
    # nothing of the first job reaches the second: module state, Dynamo's counters, grad mode
    assert not b["marked"] and b["frames"] == 0 and b["grad"] and b["threads"] == fresh["threads"]
    assert a["random"] != b["random"]  # each seeded from the OS, as a fresh interpreter is
    # MEND_WORKER_START=spawn: a fresh interpreter even for a warm job
    cold = run_job(Job("state_worker", {}, label="T-cold", timeout=60, warm=True,
                       env={**env, "MEND_WORKER_START": "spawn"}))
    assert cold.result and not cold.result["preloaded"]


def test_a_warm_process_let_go_still_sees_its_running_job_through(tmp_path):
    """At most two warm processes are kept (each holds torch); the one let go for a third
    environment forks no more but reports the job it still runs."""
    from concurrent.futures import ThreadPoolExecutor

    from graphmend.core import jobs

    env = _state_worker(tmp_path)
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(run_job, Job("state_worker", {"sleep": 8}, label="T-slow", timeout=60, warm=True,
                                        env={**env, "MEND_TEST_VALUE": "slow"}))
        others = [run_job(Job("state_worker", {}, label=f"T-{i}", timeout=60, warm=True,
                              env={**env, "MEND_TEST_VALUE": f"other{i}"})) for i in range(2)]
        assert len(jobs._warm) == 2
        assert all(o.result["preloaded"] for o in others)
        out = slow.result(timeout=120)
    assert out.error is None and out.result["env"] == "slow" and out.result["preloaded"]


# -- the timeout is the user's; start-up is reported apart ------------------------------

def _slow_start_worker(tmp_path):
    (tmp_path / "slow_start.py").write_text(textwrap.dedent("""
        import json, sys, time
        from graphmend.core.worker import worker_main

        payload = json.loads(open(sys.argv[1]).read())

        def startup():
            time.sleep(payload["startup"])

        def handle(p):
            time.sleep(p["work"])
            return {"done": True}

        worker_main(handle, startup=startup)
    """))
    return {"PYTHONPATH": str(tmp_path)}


def test_timeout_reports_what_was_set_and_start_up_apart(tmp_path):
    env = _slow_start_worker(tmp_path)
    # start-up (1 s) is not counted against the 2 s: the work takes 1.5 s and finishes
    ok = run_job(Job("slow_start", {"startup": 1.0, "work": 1.5}, label="T-ok", timeout=2, startup=20, env=env))
    assert ok.result == {"done": True} and ok.startup_s is not None and ok.startup_s >= 1.0
    hung = run_job(Job("slow_start", {"startup": 1.0, "work": 60}, label="T-hung", timeout=2, startup=20, env=env))
    assert hung.result is None
    assert "T-hung: timed out after 2 s" in hung.error and "22 s" not in hung.error
    start_up = re.search(r"start-up before that took (\d+\.\d) s", hung.error)
    assert start_up and float(start_up.group(1)) >= 1.0, hung.error
    stuck = run_job(Job("slow_start", {"startup": 60, "work": 0}, label="T-stuck", timeout=1, startup=1, env=env))
    assert "T-stuck: timed out after 1 s" in stuck.error
    assert "had not finished starting up" in stuck.error and "1 s allowed" in stuck.error


def test_job_of_units_bounds_each_unit_and_keeps_the_finished_ones(tmp_path):
    """``Job.units``: the timeout restarts at each finished unit, so three units of 1.2 s each
    fit a 2 s timeout; a unit that hangs is named by its label and the finished ones come back."""
    (tmp_path / "unit_worker.py").write_text(textwrap.dedent("""
        import time
        from graphmend.core.worker import unit_done, worker_main
        def handle(p):
            out = []
            for i, work in enumerate(p["work"]):
                time.sleep(work)
                out.append({"unit": i})
                unit_done(out[-1])
            return {"results": out}
        worker_main(handle)
    """))
    env = {"PYTHONPATH": str(tmp_path)}
    labels = ["file.py::a", "file.py::b", "file.py::c"]
    ok = run_job(Job("unit_worker", {"work": [1.2, 1.2, 1.2]}, label="file.py", timeout=2, env=env,
                     units=3, unit_labels=labels))
    assert ok.error is None and ok.result == {"results": [{"unit": 0}, {"unit": 1}, {"unit": 2}]}
    assert ok.units == ok.result["results"]
    hung = run_job(Job("unit_worker", {"work": [0.1, 60, 0.1]}, label="file.py", timeout=2, env=env,
                       units=3, unit_labels=labels))
    assert hung.timed_out and hung.result is None and hung.units == [{"unit": 0}]
    assert hung.error.startswith("file.py::b: timed out after 2 s"), hung.error
    # without units the same worker runs, and the timeout bounds the whole job as before
    whole = run_job(Job("unit_worker", {"work": [1.2, 1.2]}, label="file.py", timeout=2, env=env))
    assert whole.timed_out and whole.units == [] and whole.error.startswith("file.py: timed out after 2 s")


# -- memory ---------------------------------------------------------------------------

def _memory_worker(tmp_path):
    (tmp_path / "mem_worker.py").write_text(textwrap.dedent("""
        import os, signal, sys
        from graphmend.core.worker import worker_main

        def handle(p):
            if p["do"] == "alloc":  # Python's own allocator
                return {"allocated": len(bytearray(2 << 30))}
            if p["do"] == "map":  # anonymous memory, as torch's allocator takes it (never touched: costs no RAM)
                import mmap
                return {"mapped": len(mmap.mmap(-1, 2 << 30, flags=mmap.MAP_PRIVATE))}
            if p["do"] == "killed":  # what the kernel's OOM killer does
                os.kill(os.getpid(), signal.SIGKILL)
            if p["do"] == "blas":  # what a worker's OpenBLAS would start with
                return {"threads": os.environ.get("OPENBLAS_NUM_THREADS")}
            if p["do"] == "openblas":  # OpenBLAS failing its buffers at load, as on a 16-core H200
                sys.stderr.write("OpenBLAS error: Memory allocation still failed after 10 retries, giving up.\\n")
                sys.stderr.flush()
                os._exit(1)
            if p["do"] == "abort":  # a C++ allocation failure nobody caught
                sys.stderr.write("terminate called after throwing an instance of 'std::bad_alloc'\\n")
                sys.stderr.flush()
                os.abort()
            return {"ok": True}

        worker_main(handle)
    """))
    return {"PYTHONPATH": str(tmp_path)}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resource limits as Linux applies them")
@pytest.mark.parametrize("warm", [False, True], ids=["spawned", "warm"])
def test_memory_limit(tmp_path, warm):
    env = _memory_worker(tmp_path)
    limit = 1 << 30 if warm else 512 << 20  # a warm worker starts with torch loaded: its memory counts
    size = format_size(limit)
    alloc, mapped, killed, abort, fine = run_jobs([Job("mem_worker", {"do": d}, label=f"T-{d}", timeout=20, env=env,
                                                       memory_limit=limit, warm=warm)
                                                   for d in ("alloc", "map", "killed", "abort", "ok")])
    assert alloc.result["error"].startswith(f"out of memory (limit {size})"), alloc.result
    assert mapped.result["error"].startswith(f"out of memory (limit {size})"), mapped.result
    assert f"T-killed: out of memory (limit {size})" in killed.error and "SIGKILL" in killed.error
    assert f"T-abort: out of memory (limit {size})" in abort.error
    assert fine.result == {"ok": True}
    # the same allocation without a limit succeeds: the limit, not the machine, stopped it
    free = run_job(Job("mem_worker", {"do": "map"}, label="T-free", timeout=20, env=env))
    assert free.result == {"mapped": 2 << 30}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resource limits as Linux applies them")
def test_memory_limit_caps_openblas_threads_and_names_its_failure(tmp_path, monkeypatch):
    from graphmend.core.worker import LIMITED_BLAS_THREADS

    env = _memory_worker(tmp_path)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    capped, free, failed = run_jobs([
        Job("mem_worker", {"do": "blas"}, label="T-capped", timeout=20, env=env, memory_limit=1 << 30),
        Job("mem_worker", {"do": "blas"}, label="T-free", timeout=20, env=env),
        Job("mem_worker", {"do": "openblas"}, label="T-blas", timeout=20, env=env, memory_limit=1 << 30)])
    assert capped.result == {"threads": str(LIMITED_BLAS_THREADS)} and free.result == {"threads": None}
    assert "T-blas: out of memory (limit 1 GiB)" in failed.error
    # the user's own setting wins
    (mine,) = run_jobs([Job("mem_worker", {"do": "blas"}, label="T-mine", timeout=20,
                            env={**env, "OPENBLAS_NUM_THREADS": "1"}, memory_limit=1 << 30)])
    assert mine.result == {"threads": "1"}


def test_format_size():
    assert format_size(4 << 30) == "4 GiB" and format_size(512 << 20) == "512 MiB" and format_size(3 << 29) == "1.5 GiB"


def test_workers_import_mend_from_where_this_process_did():
    """The first PYTHONPATH entry a worker gets is the folder holding this graphmend (and
    tracer, rewrites...): a worker must run the same code as its parent, installed or not."""
    import graphmend
    from graphmend.core.jobs import _worker_env

    first = Path(_worker_env({})["PYTHONPATH"].split(os.pathsep)[0])
    assert (first / "graphmend" / "__init__.py").resolve() == Path(graphmend.__file__).resolve()
    assert (first / "tracer" / "worker.py").is_file()


def test_job_folders_a_killed_mend_left_are_removed_and_no_others(tmp_path):
    import subprocess

    from graphmend.core.jobs import JOB_DIR_PREFIX, remove_stale_job_dirs

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid no process has now (a SIGKILLed mend's)
    stale = tmp_path / f"{JOB_DIR_PREFIX}{gone.pid}-abc"
    (stale / "sub").mkdir(parents=True)
    (stale / "payload.json").write_text("{}")
    live = tmp_path / f"{JOB_DIR_PREFIX}{os.getpid()}-def"  # a running mend's
    live.mkdir()
    unnamed = tmp_path / f"{JOB_DIR_PREFIX}abc123"  # no pid in its name: not known to be stale
    unnamed.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / f"{JOB_DIR_PREFIX}{gone.pid}-lnk"
    link.symlink_to(target)  # a link is never followed or removed
    assert remove_stale_job_dirs(tmp_path) == 1
    assert not stale.exists() and live.is_dir() and unnamed.is_dir() and link.is_symlink() and target.is_dir()


def test_a_job_folder_names_the_mend_process_that_made_it(tmp_path):
    env = _worker(tmp_path)
    (tmp_path / "tiny_worker.py").write_text(textwrap.dedent("""
        import os, sys
        from graphmend.core.worker import worker_main
        worker_main(lambda p: {"dir": os.path.basename(os.path.dirname(sys.argv[-1]))})  # the result file's
    """))
    out = run_job(Job("tiny_worker", {}, label="T", timeout=10, env=env))
    assert out.result["dir"].startswith(f"mend-job-{os.getpid()}-"), out
