"""Worker subprocesses: results, errors, timeouts and signals, with a tiny worker module."""
import textwrap

from graphmend.jobs import Job, run_jobs


def _worker(tmp_path):
    (tmp_path / "tiny_worker.py").write_text(textwrap.dedent("""
        import os, signal, time
        from graphmend.jobs import worker_main
        def handle(p):
            if p["do"] == "raise": raise ValueError("nope")
            if p["do"] == "sleep": time.sleep(60)
            if p["do"] == "segv": os.kill(os.getpid(), signal.SIGSEGV)
            if p["do"] == "exit": os._exit(3)
            return {"echo": p["do"]}
        worker_main(handle)
    """))
    return {"PYTHONPATH": str(tmp_path)}


def test_outcomes(tmp_path):
    env = _worker(tmp_path)
    jobs = [Job("tiny_worker", {"do": d}, label=f"T-{d}", timeout=4, env=env) for d in ("ok", "raise", "sleep", "segv", "exit")]
    seen = []
    ok, raised, slept, segv, exited = run_jobs(jobs, parallel=2, on_done=lambda j, o: seen.append(j.label))
    assert sorted(seen) == sorted(j.label for j in jobs)
    assert ok.result == {"echo": "ok"} and ok.error is None
    assert raised.result["error"] == "ValueError: nope"
    assert "T-sleep: timed out after 4 s" in slept.error
    assert "T-segv" in segv.error and "SIGSEGV" in segv.error
    assert "T-exit" in exited.error and "status 3" in exited.error
