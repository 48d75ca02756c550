"""Progress as CI sees it: with stderr redirected (no TTY) ``analyze`` and ``fix`` print a
plain line per finished target, ``--quiet`` none, and ``wrote FILE`` when ``-o`` is given."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MODEL = '''import torch


def noisy(x):
    y = x.sin()
    print("step")
    return y.cos()


def clean(x):
    return torch.relu(x) * 2 + 1


def mend_target_print():
    return noisy, (torch.randn(8),)


def mend_target_clean():
    return clean, (torch.randn(8),)
'''

LINE = re.compile(r"^\[(\d+)/(\d+)\] (capturing|planning|verifying|writing) (\S+)(?:: (.*))?$")


def _mend(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # stdout and stderr are pipes: what CI's redirected output is
    return subprocess.run([sys.executable, "-m", "graphmend", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def _lines(stderr: str) -> list[tuple]:
    return [m.groups() for m in map(LINE.match, stderr.splitlines()) if m]


def test_analyze_prints_a_line_per_target_and_where_it_wrote(tmp_path):
    (tmp_path / "models.py").write_text(MODEL)
    out = _mend(tmp_path, "analyze", "models.py", "--dynamic-only", "-f", "json", "-o", "report.json")
    assert out.returncode == 1, out.stderr
    assert out.stdout == ""  # the report went to the file; progress is stderr's
    lines = _lines(out.stderr)
    stages = [(n, total, stage) for n, total, stage, _, _ in lines]
    assert stages[:2] == [("1", "2", "capturing"), ("2", "2", "capturing")], stages
    # then the planner at each issue's place (what "candidate fix" counts), one line per file
    assert [(stage, name) for _, _, stage, name, _ in lines[2:]] == [("planning", "models.py")], lines
    notes = {name: note for *_, name, note in lines}
    # the targets table's figures: breaks and recompiles apart
    # (--calls 3, the default: the later calls' batch change recompiles each frame once)
    assert re.fullmatch(r"1 break, \d+ recompiles? \(\d+\.\d s\)", notes["models.py::mend_target_print"]), notes
    assert re.fullmatch(r"0 breaks, 1 recompile \(\d+\.\d s\)", notes["models.py::mend_target_clean"]), notes
    assert out.stderr.rstrip().splitlines()[-1] == "mend: wrote report.json"
    assert json.loads((tmp_path / "report.json").read_text())["targets"]

    quiet = _mend(tmp_path, "analyze", "models.py", "--dynamic-only", "-f", "json", "-o", "q.json", "-q")
    assert quiet.returncode == 1 and quiet.stderr == ""


def test_fix_prints_capture_and_verification_lines(tmp_path):
    (tmp_path / "models.py").write_text(MODEL)
    out = _mend(tmp_path, "fix", "models.py", "-o", "fix.diff", "--write")
    lines = _lines(out.stderr)
    stages = [(stage, n, total) for n, total, stage, _, _ in lines]
    assert stages == [("capturing", "1", "2"), ("capturing", "2", "2"), ("planning", "1", "1"),
                      ("verifying", "1", "2"), ("verifying", "2", "2"), ("writing", "1", "1")], out.stderr
    assert [note for _, _, stage, _, note in lines if stage == "planning"] == ["1 rewrite"], out.stderr
    verified = {name: note for _, _, stage, name, note in lines if stage == "verifying"}
    assert verified["models.py::mend_target_print"] == "breaks 1 -> 0", out.stderr
    assert [name for _, _, stage, name, _ in lines if stage == "writing"] == ["models.py"], out.stderr
    assert out.stderr.rstrip().splitlines()[-3:] == ["mend: wrote fix.diff", "[1/1] writing models.py",
                                                     "mend: wrote 1 file(s)"]
    assert "print" in (tmp_path / "fix.diff").read_text()
