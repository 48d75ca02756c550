"""``mend check --dynamic``: the targets' dynamic breaks compared with the baseline (real
capture through tracer.capture, one project shared by the tests of this module)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MODEL = '''import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x):
        y = x * 2
        print("hi")
        return y + 1


def mend_target_net():
    return Net(), (torch.ones(3),)
'''


def mend(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphmend", "check", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def updated(tmp_path_factory):
    """One dynamic run that writes the baseline: what it found, and the baseline file."""
    root = tmp_path_factory.mktemp("dyn")
    (root / "pyproject.toml").write_text('[tool.mend]\ntimeout = 120\n')
    (root / "model.py").write_text(MODEL)
    proc = mend(root, "--dynamic", "--update-baseline", "--format", "json")
    return root, proc


def test_update_records_static_and_dynamic_entries(updated):
    root, proc = updated
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [t["name"] for t in report["targets"]] == ["model.py::mend_target_net"]
    assert report["check"]["updated"] is True
    entries = json.loads((root / ".mend-baseline.json").read_text())["entries"]
    dyn = [e for e in entries if e["origin"] == "dynamic"]
    static = [e for e in entries if e["origin"] == "static"]
    assert [(e["file"], e["rule"], e["source"]) for e in dyn] == [("model.py", "GM201", 'print("hi")')]
    assert [(e["file"], e["rule"], e["source"]) for e in static] == [("model.py", "GM201", 'print("hi")')]


def test_dynamic_break_missing_from_baseline_fails(updated):
    root, _ = updated
    data = json.loads((root / ".mend-baseline.json").read_text())
    data["entries"] = [e for e in data["entries"] if e["origin"] == "static"]
    (root / "static-only.json").write_text(json.dumps(data))
    # a static run does not look at dynamic entries: the static baseline is enough
    assert mend(root, "--baseline", "static-only.json").returncode == 0
    proc = mend(root, "--dynamic", "--baseline", "static-only.json", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    new = json.loads(proc.stdout)["check"]["new"]
    assert [(e["origin"], e["rule"], e["line"], Path(e["file"]).name) for e in new] == \
        [("dynamic", "GM201", 8, "model.py")]
    assert "1 new, 1 known" in proc.stderr


def test_target_that_errors_fails_with_its_message(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\ntimeout = 120\n')
    (tmp_path / "bad.py").write_text('def mend_target_boom():\n    raise RuntimeError("boom in setup")\n')
    proc = mend(tmp_path, "--dynamic")
    assert proc.returncode == 1
    assert "mend_target_boom" in proc.stderr and "boom in setup" in proc.stderr


STEPPED = '''import torch
from torch import nn


class Stepped(nn.Module):
    def __init__(self):
        super().__init__()
        self.step = 0

    def forward(self, x):
        self.step += 1
        return x * min(1.0, self.step / 100)


def mend_target_stepped():
    return Stepped(), (torch.ones(2, 3),)
'''


def test_a_recompile_is_gated_like_a_break(tmp_path):
    """A step counter kept as a Python int recompiles on every later call (GM702): the
    baseline records it per cause and place, and a run whose baseline lacks it fails."""
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\ntimeout = 120\n')
    (tmp_path / "stepped.py").write_text(STEPPED)
    proc = mend(tmp_path, "--dynamic", "--update-baseline", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    entries = json.loads((tmp_path / ".mend-baseline.json").read_text())["entries"]
    gm7 = [e for e in entries if e["rule"].startswith("GM7")]
    assert [(e["file"], e["rule"], e["origin"], e["source"]) for e in gm7] == [
        ("stepped.py", "GM702", "dynamic", "self.step+=1")], entries  # (the line as the baseline keys it)
    (tmp_path / ".mend-baseline.json").write_text(json.dumps(
        {"version": 1, "entries": [e for e in entries if not e["rule"].startswith("GM7")]}))
    proc = mend(tmp_path, "--dynamic", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    new = json.loads(proc.stdout)["check"]["new"]
    assert [(Path(e["file"]).name, e["rule"]) for e in new] == [("stepped.py", "GM702")]
