"""``mend report``: re-rendering saved JSON, the round trip, and one-line errors on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app

SAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "reports" / "sample_report.json"


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


def test_json_round_trip_is_unchanged(runner, tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    r1 = runner.invoke(app, ["report", str(SAMPLE), "--format", "json", "-o", str(first)])
    assert r1.exit_code == 0, r1.output
    r2 = runner.invoke(app, ["report", str(first), "-f", "json", "--output", str(second)])
    assert r2.exit_code == 0, r2.output
    assert first.read_text() == second.read_text()
    # its paths under the root relative to it, as every format shows them (installed ones absolute)
    files = {f["file"] for t in json.loads(first.read_text())["targets"] for f in t["breaks"] if f["file"]}
    assert "models/gate.py" in files and all(not f.startswith("/home/dev/proj") for f in files), files
    assert "/opt/venv/lib/python3.11/site-packages/transformers/models/toy/modeling_toy.py" in files


@pytest.mark.parametrize("fmt, needle", [
    ("md", "| `models/loop.py::mend_target_loop` | 1 | 3 | 0 | 1 | 0 | 0.87 |"),
    ("text", "models/gate.py:21:9 in GateBlock.forward"),
    ("github", "::warning file=models/guard.py,line=7"),
    ("sarif", '"ruleId": "GM401"'),
])
def test_re_renders_to_stdout(runner, fmt, needle):
    result = runner.invoke(app, ["report", str(SAMPLE), "--format", fmt])
    assert result.exit_code == 0, result.output
    assert needle in result.stdout


def test_a_gzipped_report_is_read_and_a_broken_one_is_one_line(runner, tmp_path):
    import gzip

    packed = tmp_path / "kept.json.gz"
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    result = runner.invoke(app, ["report", str(packed), "-f", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["breaks"] == 5
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(SAMPLE.read_bytes())  # named .gz, not compressed
    result = runner.invoke(app, ["report", str(broken), "-f", "json"])
    err = result.stderr.strip()
    assert result.exit_code == 2 and "not a gzip file" in err and str(broken) in err and "\n" not in err


def test_missing_summary_is_filled_in(runner, tmp_path):
    data = json.loads(SAMPLE.read_text())
    data.pop("summary")
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["report", str(path), "-f", "json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["summary"]["breaks"] == 5


@pytest.mark.parametrize("content, message", [
    (None, "report file does not exist"),
    ("{not json", "is not JSON: "),
    ("[1, 2]", "is not a graphmend report (no schema_version)"),
    ('{"schema_version": "3.0"}', "unsupported schema_version '3.0'"),
    ('{"schema_version": "1.0", "targets": [{"graph_count": 1}]}', "does not match the report schema"),
])
def test_bad_input_is_one_line_exit_2(runner, tmp_path, content, message):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    result = runner.invoke(app, ["report", str(path), "-f", "md"])
    assert result.exit_code == 2
    err = result.stderr.strip()
    assert message in err and str(path) in err and "\n" not in err and "Traceback" not in err


def test_bad_format_is_a_usage_error(runner):
    result = runner.invoke(app, ["report", str(SAMPLE), "--format", "pdf"])
    assert result.exit_code == 2


def test_reports_never_import_torch():
    code = ("import sys, reports\nfrom graphmend.core.model import Report\n"
            f"r = Report.from_json(open({str(SAMPLE)!r}).read())\n"
            "[reports.render(r, f) for f in reports.FORMATS]\n"
            "import graphmend.cli.report\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
