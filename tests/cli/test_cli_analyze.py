"""``mend analyze --dynamic-only`` end to end: CliRunner and one real subprocess."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app
from graphmend.core.model import Report

ROOT = Path(__file__).resolve().parents[2]
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
    (["analyze", str(SMALL), "--static-only", "--fullgraph"], "--fullgraph chooses how targets compile"),
    (["sweep", "transformers", "--fix", "--fullgraph"], "--fix repairs the breaks of the default compile"),
])
def test_usage_errors(args, needle):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert needle in res.output and "Traceback" not in res.output


def test_sweep_baseline_of_the_other_compile_is_refused(tmp_path):
    from graphmend.core.tables import SweepReport

    base = tmp_path / "base.json"
    base.write_text(SweepReport(library="transformers", fullgraph=True).to_json())
    res = runner.invoke(app, ["sweep", "transformers", "--baseline", str(base)])
    assert res.exit_code == 2 and "was swept with --fullgraph" in res.output and "Traceback" not in res.output


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


REPOS = ROOT / "tests" / "fixtures" / "repos"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A print in a block called from the model's layer loop (tests/fixtures/repos/tiny_transformer)."""
    out = tmp_path_factory.mktemp("tiny") / "report.json"
    res = runner.invoke(app, ["analyze", str(REPOS / "tiny_transformer"), "--format", "json", "-o", str(out),
                              "--timeout", "120", "--quiet"])
    assert res.exit_code == 1, res.output
    return Report.from_json(out.read_text())


def test_frame_skip_is_said_first_at_the_skipped_frame(tiny_run):
    from reports import render

    r = tiny_run
    (cause,) = [i for i in r.issues if i.skipped]
    (frame,) = cause.skipped
    # Dynamo names the frame it gave up on; mend finds its qualified name and its loop
    assert (cause.rule, cause.line, cause.function) == ("GM201", 14, "Block.forward")
    assert (frame.function, frame.line, frame.loop_line) == ("TinyTransformer.forward", 24, 26)
    # the `.item()` after the loop was never traced: linked to the skip, not an unrelated "potential"
    (hidden,) = [r.issues[j] for j in frame.hides]
    assert (hidden.line, hidden.status, hidden.hidden_by) == (28, "unreached", r.issues.index(cause))
    text = render(r, "text")
    model = (REPOS / "tiny_transformer" / "model.py").resolve().relative_to(r.root).as_posix()  # from the repo root
    first = text.index(f"TinyTransformer.forward ran entirely in eager (loop at {model}:26)")
    assert first < text.index("Targets") < text.index("Details:")
    assert f"hides: GM101 {model}:28:12" in text and "never traced: its frame ran in eager because of GM201" in text
    for fmt, needle in (("md", "TinyTransformer.forward ran entirely in eager"),
                        ("html", "TinyTransformer.forward ran entirely in eager"),
                        ("sarif", f"TinyTransformer.forward ran entirely in eager (loop at {model}:26)"),
                        ("github", "made Dynamo skip a frame: TinyTransformer.forward")):
        assert needle in render(r, fmt), fmt


def test_one_issue_per_cause_and_place(tiny_run):
    """The print is a static finding, a frame-skip record and a graph break: one issue, one
    SARIF result, one annotation."""
    import json as _json

    from reports import render

    r = tiny_run
    prints = [i for i in r.issues if i.line == 14]
    assert len(prints) == 1 and prints[0].status == "confirmed" and len(prints[0].breaks) == 2
    results = _json.loads(render(r, "sarif"))["runs"][0]["results"]
    assert sum(res["locations"][0]["physicalLocation"]["region"]["startLine"] == 14 for res in results) == 1
    assert sum(",line=14," in ln for ln in render(r, "github").splitlines()) == 1
    assert r.summary.issues == len(r.issues) == 2


def test_candidate_fixes_and_the_command_are_said(tiny_run):
    from reports import render

    assert tiny_run.summary.fixable == 2
    assert any(s.startswith("2 of 2 issues have a candidate fix: mend fix ") for s in tiny_run.next_steps)
    assert "Next: 2 of 2 issues have a candidate fix: mend fix" in render(tiny_run, "text")
    assert "candidate fix" in render(tiny_run, "md") and "candidate fix" in render(tiny_run, "html")


def test_no_targets_says_how_to_get_the_dynamic_half(monkeypatch):
    monkeypatch.chdir(REPOS)
    res = runner.invoke(app, ["analyze", "no_targets", "--quiet"])
    assert res.exit_code == 1, res.output
    out = res.output
    assert "0 targets" in out
    assert "mend run no_targets/train.py" in out
    # a three-line target, indented under its sentence
    assert "\n    def mend_target():\n        model = MyModel().eval()\n        return model, (torch.randn(2, 16),)\n" in out
    # mend fix verifies on a target: say so rather than promise verified patches
    assert "add one first" in out


def test_without_torch_analyze_points_at_static_only(monkeypatch):
    import graphmend.core.env as env

    monkeypatch.setattr(env, "torch_version", lambda: None)
    res = runner.invoke(app, ["analyze", str(REPOS / "no_targets")])
    assert res.exit_code == 2
    assert "needs PyTorch" in res.output and "--static-only" in res.output and "Traceback" not in res.output
