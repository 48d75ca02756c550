"""Dynamo's nested_graph_breaks: mend runs either way, records which, and the baseline keys on it."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer

from graphmend.baseline import dump_baseline, entries_from_targets, load_baseline, to_baseline_key
from graphmend.core.config import ConfigError, load_config
from graphmend.core.model import Break, Report, TargetResult

torch = pytest.importorskip("torch")
NESTED_SUPPORTED = hasattr(importlib.import_module("torch._dynamo.config"), "nested_graph_breaks")

MODEL = textwrap.dedent('''\
    import torch


    def inner(x):
        x = x + 1
        print("inner")
        return x * 2


    def outer(x):
        y = torch.sin(x)
        y = inner(y)
        return torch.cos(y)


    def mend_target_nested():
        return outer, (torch.randn(8),)
''')


def mend(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # the first call only: what these runs show is not recompiles (tests/tracer/test_recompiles.py's are)
    args = (*args, "--calls", "1") if args[0] in ("analyze", "fix") or "--dynamic" in args else args
    return subprocess.run([sys.executable, "-m", "graphmend", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nested")
    (root / "m.py").write_text(MODEL, encoding="utf-8")
    (root / "pyproject.toml").write_text("[tool.mend]\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def runs(repo) -> dict[str, dict]:
    """The capture worker with nested_graph_breaks on and off, each with explain's counts under
    the same setting (one worker each), and ``mend analyze --nested-graph-breaks on``."""
    if not NESTED_SUPPORTED:
        pytest.fail(f"torch {torch.__version__} has no nested_graph_breaks: this suite's torch range (2.11-2.15) has")
    from graphmend.core.jobs import Job, run_jobs
    from tracer.capture import WORKER

    spec = {"name": "m.py::mend_target_nested", "file": str(repo / "m.py"), "function": "mend_target_nested",
            "module": None, "line": None}
    jobs = run_jobs([Job(WORKER, {"targets": [spec], "explain": True, "modes": ["eval"], "nested_graph_breaks": on},
                         label="m.py", timeout=300) for on in (True, False)], parallel=2)
    out = {value: {"target": job.result["results"][0], "explain": job.result["explain"][0]}
           for value, job in zip(("on", "off"), jobs)}
    p = mend("analyze", "m.py", "--dynamic-only", "--nested-graph-breaks", "on", "-f", "json", "-q", cwd=repo)
    assert p.returncode == 1, p.stderr
    out["on"]["report"] = json.loads(p.stdout)
    return out


def test_each_setting_is_recorded_and_counted_as_explain_counts(runs):
    for value, run in runs.items():
        t, (graphs, breaks, _) = run["target"], run["explain"]
        assert t["nested_graph_breaks"] is (value == "on")
        assert (t["graph_count"], t["graph_break_count"]) == (graphs, breaks)
        assert [(b["line"], b["rule"]) for b in t["breaks"]] == [(6, "GM201")]
    # nesting resumes inside inner() instead of breaking outer() too: fewer graphs
    assert runs["on"]["target"]["graph_count"] < runs["off"]["target"]["graph_count"]
    # the command records the setting the run had, on the report and each target
    report = runs["on"]["report"]
    assert report["nested_graph_breaks"] is True and report["targets"][0]["nested_graph_breaks"] is True
    assert report["targets"][0]["graph_count"] == runs["on"]["target"]["graph_count"]


def test_reports_say_when_nesting_was_on(runs, repo, tmp_path):
    saved = tmp_path / "on.json"
    saved.write_text(json.dumps(runs["on"]["report"]), encoding="utf-8")
    text = mend("report", str(saved), cwd=repo).stdout
    assert "mode: eval · nested graph breaks on" in text
    off = tmp_path / "off.json"
    off.write_text(json.dumps({**runs["on"]["report"], "nested_graph_breaks": False}), encoding="utf-8")
    assert "nested graph breaks" not in mend("report", str(off), cwd=repo).stdout
    sarif = json.loads(mend("report", str(saved), "-f", "sarif", cwd=repo).stdout)
    assert sarif["runs"][0]["properties"]["nested_graph_breaks"] is True


def test_the_baseline_keys_on_nesting_and_gates_each_setting_on_its_own(repo):
    base = repo / ".mend-baseline.json"
    p = mend("check", "--dynamic", "--nested-graph-breaks", "on", "--update-baseline", "-q", cwd=repo)
    assert p.returncode == 0, p.stderr
    entries = json.loads(base.read_text(encoding="utf-8"))["entries"]
    assert [e.get("nested_graph_breaks") for e in entries if e["origin"] == "dynamic"] == [True]
    # the same break with nesting off is not known: it is gated apart, and nothing nested is stale
    p = mend("check", "--dynamic", "--nested-graph-breaks", "off", "-f", "json", cwd=repo)
    assert p.returncode == 1
    check = json.loads(p.stdout)["check"]
    assert [(e["rule"], e["nested_graph_breaks"]) for e in check["new"]] == [("GM201", False)]
    assert check["stale"] == []
    p = mend("check", "--dynamic", "--nested-graph-breaks", "on", "-q", cwd=repo)
    assert p.returncode == 0, p.stdout + p.stderr
    base.unlink()


def test_baseline_round_trip_and_bad_values(tmp_path):
    t = TargetResult(name="m.py::t", file="m.py", function="t", nested_graph_breaks=True,
                     breaks=[Break(reason="print", category="side-effect", file=str(tmp_path / "m.py"), line=3, rule="GM201",
                                   source_line="print(x)")])
    [entry] = entries_from_targets([t])
    key = to_baseline_key(entry, tmp_path)
    path = tmp_path / "b.json"
    path.write_text(dump_baseline({key: 1}), encoding="utf-8")
    assert load_baseline(path) == {key: 1}
    assert json.loads(path.read_text())["entries"][0]["nested_graph_breaks"] is True
    data = json.loads(path.read_text())
    data["entries"][0]["nested_graph_breaks"] = "yes"
    path.write_text(json.dumps(data), encoding="utf-8")
    from graphmend.baseline import BaselineError

    with pytest.raises(BaselineError, match="nested_graph_breaks 'yes'"):
        load_baseline(path)


def test_config_and_flag_errors(tmp_path, repo):
    (tmp_path / "pyproject.toml").write_text("[tool.mend]\nnested_graph_breaks = true\n", encoding="utf-8")
    assert load_config([tmp_path]).nested_graph_breaks is True
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nnested_graph_breaks = "on"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="nested_graph_breaks must be true or false"):
        load_config([tmp_path])
    for args, says in [(("analyze", "m.py", "--nested-graph-breaks", "maybe"), "expected on or off"),
                       (("analyze", "m.py", "--static-only", "--nested-graph-breaks", "on"), "--static-only"),
                       (("check", "m.py", "--nested-graph-breaks", "on"), "need --dynamic")]:
        p = mend(*args, cwd=repo)
        assert p.returncode == 2 and says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_torch_without_the_option_is_told_so(monkeypatch):
    import tracer.capture
    from graphmend.cli.common import require_nested_support
    from graphmend.core.config import Config

    monkeypatch.setattr(tracer.capture, "nested_graph_breaks_supported", lambda: False)
    require_nested_support(Config())  # nothing asked: nothing to refuse
    with pytest.raises(typer.Exit) as exc:
        require_nested_support(Config(nested_graph_breaks=True))
    assert exc.value.exit_code == 2


def test_report_json_round_trips_the_setting():
    r = Report(nested_graph_breaks=True, targets=[TargetResult(name="a", file="a.py", function="f",
                                                               nested_graph_breaks=True)])
    back = Report.from_json(r.to_json())
    assert back.nested_graph_breaks is True and back.targets[0].nested_graph_breaks is True
