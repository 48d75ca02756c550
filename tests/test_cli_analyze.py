"""``mend analyze --dynamic-only`` end to end: CliRunner and one real subprocess."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app
from graphmend.model import Report

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "tests" / "fixtures" / "dynamic" / "models"
runner = CliRunner()


@pytest.fixture(scope="module")
def json_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "report.json"
    res = runner.invoke(app, ["analyze", str(SMALL), "--dynamic-only", "--format", "json", "--output", str(out),
                              "--jobs", "2", "--timeout", "120", "--quiet"])
    return res, out


def test_json_output_and_exit_code(json_run):
    res, out = json_run
    assert res.exit_code == 1, res.output
    data = json.loads(out.read_text())
    for key in ("schema_version", "graphmend_version", "torch_version", "python_version", "platform", "targets"):
        assert key in data
    t = {x["name"]: x for x in data["targets"]}
    assert set(t) >= {"small.py::mend_target_branch", "small.py::mend_target_clean"}
    for key in ("name", "file", "function", "graph_count", "graph_break_count", "frames_skipped", "ops_per_graph",
                "recompiles", "error", "duration_s", "breaks"):
        assert key in t["small.py::mend_target_branch"]
    brk = t["small.py::mend_target_branch"]["breaks"][0]
    for key in ("rule", "category", "reason", "explanation", "hints", "gb_type", "registry_id", "file", "line", "col",
                "source_line", "function", "occurrences", "stack"):
        assert key in brk
    assert Report.from_json(out.read_text()).targets[0].name == data["targets"][0]["name"]


@pytest.mark.parametrize("args,needle", [
    (["analyze", "/no/such/path", "--dynamic-only"], "path does not exist"),
    (["analyze", str(SMALL), "--dynamic-only", "--jobs", "0"], "--jobs"),
    (["analyze", str(SMALL), "--static-only", "--dynamic-only"], "exclude each other"),
])
def test_usage_errors(args, needle):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert needle in res.output and "Traceback" not in res.output


def test_dir_without_python_files(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    res = runner.invoke(app, ["analyze", str(tmp_path), "--dynamic-only"])
    assert res.exit_code == 2 and "no Python files" in res.output


def test_real_subprocess_clean_target(tmp_path):
    (tmp_path / "m.py").write_text("import torch\n\ndef f(x):\n    return x + 1\n\n"
                                   "def mend_target_ok():\n    return f, (torch.ones(3),)\n")
    (tmp_path / "broken.py").write_text("def mend_target_x(:\n")
    proc = subprocess.run([sys.executable, "-m", "graphmend", "analyze", str(tmp_path), "--dynamic-only",
                           "--format", "json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (t,) = data["targets"]
    assert (t["name"], t["graph_count"], t["graph_break_count"], t["breaks"]) == ("m.py::mend_target_ok", 1, 0, [])
    assert any("syntax error" in e["message"] for e in data["errors"])
