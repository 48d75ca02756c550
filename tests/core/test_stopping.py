"""Ctrl-C or SIGTERM on mend ends every process it started: the worker, what the target
started, the warm process; so does mend's death by SIGKILL, within a few seconds (each worker
watches mend)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphmend.core.processes import proc_table as _proc_table

ROOT = Path(__file__).resolve().parents[2]

TARGET = '''
import os, subprocess, sys, time


def mend_target_spins():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["MEND_TEST_MARK"], "w") as fh:
        fh.write(f"{os.getpid()} {child.pid}")
    time.sleep(600)
'''


_table = _proc_table  # pid -> (parent pid, start time), as mend itself reads /proc


def _below(pid: int) -> dict[int, int]:
    """pid -> start time of every process under ``pid``."""
    table = _table()
    found, stack = {}, [pid]
    while stack:
        p = stack.pop()
        for c, (ppid, start) in table.items():
            if ppid == p and c not in found:
                found[c] = start
                stack.append(c)
    return found


def _running(pid: int, start: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    fields = data[data.rindex(b")") + 2:].split()
    return int(fields[19]) == start and fields[0] not in (b"Z", b"X")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process tree from /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["SIGTERM", "SIGINT", "SIGKILL"])
def test_a_signal_to_mend_ends_every_process_it_started(tmp_path, sig):
    (tmp_path / "spin.py").write_text(TARGET)
    mark = tmp_path / "mark"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "MEND_TEST_MARK": str(mark), "MEND_NO_CACHE": "1"}
    mend = subprocess.Popen([sys.executable, "-m", "graphmend", "analyze", str(tmp_path / "spin.py"), "--dynamic-only",
                             "--timeout", "600", "-q"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 240
        while not mark.exists() or not mark.read_text().strip():
            assert mend.poll() is None, mend.stderr.read().decode()
            assert time.monotonic() < deadline, "the target never started"
            time.sleep(0.2)
        time.sleep(0.5)
        seen = _below(mend.pid)
        target, child = map(int, mark.read_text().split())
        assert target in seen and child in seen, (target, child, seen)
        assert len(seen) >= 3  # the warm process, the worker (and its unit), the target's child
        os.kill(mend.pid, sig)
        mend.wait(30)
        deadline = time.monotonic() + 5
        while any(_running(p, t) for p, t in seen.items()) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p, t in seen.items() if _running(p, t)]
        assert not left, f"still running after mend got {sig.name}: {left}"
    finally:
        if mend.poll() is None:
            mend.kill()
            mend.wait()
        for p, t in seen.items():
            if _running(p, t):
                os.kill(p, signal.SIGKILL)
