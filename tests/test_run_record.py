"""``mend run``: its exit code (``--fail-on-breaks``) and where its report goes (a machine
format on stdout, the program's stdout moved to stderr)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _mend(*args, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "graphmend", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


def _break_set(report: dict) -> set:
    return {(b["rule"], Path(b["file"]).name, b["line"], b["kind"]) for t in report["targets"] for b in t["breaks"]}


EXITS = '''\
import sys, torch
def step(x):
    if BREAK and x.sum() > 0:
        x = x + 1
    return x * 2
torch.compile(step, backend="eager")(torch.ones(4))
print("PROGRAM-STDOUT")
sys.exit(CODE)
'''


@pytest.mark.parametrize("breaks,code,flags,expected", [
    (True, 0, [], 0),                      # breaks alone do not fail a run
    (True, 0, ["--fail-on-breaks"], 1),    # unless asked
    (False, 0, ["--fail-on-breaks"], 0),   # a clean program passes the gate
    (True, 3, ["--fail-on-breaks"], 3),    # a failed program's own code wins
])
def test_run_exit_code(tmp_path, breaks, code, flags, expected):
    (tmp_path / "prog.py").write_text(EXITS.replace("BREAK", str(breaks)).replace("CODE", str(code)))
    proc = _mend("run", "-q", *flags, "prog.py", cwd=tmp_path, timeout=300)
    assert proc.returncode == expected, proc.stderr
    assert "PROGRAM-STDOUT" in proc.stdout


def test_run_machine_format_goes_to_stdout_and_the_program_stdout_to_stderr(tmp_path):
    (tmp_path / "prog.py").write_text(EXITS.replace("BREAK", "True").replace("CODE", "0")
                                      + "\n# and a child process writing to fd 1\n")
    (tmp_path / "prog.py").write_text((tmp_path / "prog.py").read_text().replace(
        'print("PROGRAM-STDOUT")',
        'print("PROGRAM-STDOUT")\nimport subprocess\nsubprocess.run([sys.executable, "-c", "print(\'CHILD-STDOUT\')"])'))
    proc = _mend("run", "--format", "json", "prog.py", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # nothing but the report on stdout
    assert report["command"] == "run" and _break_set(report) == {("GM101", "prog.py", 3, "graph_break")}
    assert "PROGRAM-STDOUT" in proc.stderr and "CHILD-STDOUT" in proc.stderr
    # the text report keeps to stderr, the program's stdout stays its own
    text = _mend("run", "prog.py", cwd=tmp_path, timeout=300)
    assert "PROGRAM-STDOUT" in text.stdout and "GM101" in text.stderr and "GM101" not in text.stdout
