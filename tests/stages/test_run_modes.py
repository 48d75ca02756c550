"""Run modes: eval (``.eval()`` under ``no_grad``, the default) and train (``.train()``, grad
on, a backward) for analyze, check, fix, bench and the config; explain is the reference."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphmend.core.config import ConfigError, load_config
from graphmend.core.modes import ModeError, parse_modes

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "modes"


def _line(file: str, needle: str) -> int:
    return next(i for i, ln in enumerate((FIXTURES / file).read_text().splitlines(), 1) if needle in ln)


TRAIN_PRINT = _line("models.py", 'print("train step"')
GRAD_PRINT = _line("models.py", 'print("grad is on")')
HOOK_PRINT = _line("hooked.py", 'print("grad of y"')


def mend(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # the first call only: what these runs show is not recompiles (tests/tracer/test_recompiles.py's are)
    args = (*args, "--calls", "1") if args[0] in ("analyze", "fix") or "--dynamic" in args else args
    return subprocess.run([sys.executable, "-m", "graphmend", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture()
def project(tmp_path) -> Path:
    dst = tmp_path / "proj"
    shutil.copytree(FIXTURES, dst)
    return dst


# -- the vocabulary ------------------------------------------------------------------------

def test_parse_modes_canonical_order_and_errors():
    assert parse_modes("train,eval") == ("eval", "train")
    assert parse_modes(["train"]) == ("train",)
    with pytest.raises(ModeError, match="--modes: expected eval, train or eval,train, got 'infer'"):
        parse_modes("infer")
    with pytest.raises(ModeError):
        parse_modes("")


def test_config_train_and_modes(tmp_path):
    def cfg(body: str):
        (tmp_path / "pyproject.toml").write_text(f"[tool.mend]\n{body}\n", encoding="utf-8")
        return load_config([str(tmp_path)])

    assert cfg("").modes == ("eval",)
    assert cfg("train = true").modes == ("train",)
    assert cfg('modes = ["train", "eval"]').modes == ("eval", "train")
    assert cfg("compiled_autograd = true").compiled_autograd is True
    for body, message in (("train = 1", "train must be true or false"),
                          ('train = true\nmodes = ["eval"]', "give train or modes, not both"),
                          ('modes = ["fast"]', "modes: expected eval, train")):
        with pytest.raises(ConfigError, match=message):
            cfg(body)
    assert cfg("train = true").with_flags(modes="eval").modes == ("eval",)  # the flag wins


@pytest.mark.parametrize("args, message", [
    (("analyze", "models.py", "--train", "--modes", "eval"), "--train and --modes eval disagree"),
    (("analyze", "models.py", "--modes", "fast"), "--modes: expected eval, train or eval,train"),
    (("check", "models.py", "--train"), "need --dynamic"),
    (("fix", "models.py", "--modes", "eval,train"), "mend fix captures and re-traces in one run mode"),
    (("run", "--train", "models.py"), "--train does not apply to mend run"),
])
def test_bad_mode_flags_are_one_line_usage_errors(project, args, message):
    r = mend(*args, cwd=project)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# -- capture in each mode, against explain ----------------------------------------------

def _explain(target: str, mode: str) -> tuple[int, int]:
    code = f"""
import sys, torch
sys.path.insert(0, {str(FIXTURES)!r})
import models
from graphmend.core.modes import run_mode
from graphmend.core.targets import normalise
t = normalise(models.{target}(), "t")
with run_mode(t.fn, {mode!r}):
    e = torch._dynamo.explain(t.fn)(*t.args)
print(e.graph_count, e.graph_break_count)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    graphs, breaks = out.stdout.split()[-2:]
    return int(graphs), int(breaks)


@pytest.fixture(scope="module")
def both_modes(tmp_path_factory) -> dict:
    proj = tmp_path_factory.mktemp("modes") / "proj"
    shutil.copytree(FIXTURES, proj)
    r = mend("analyze", "models.py", "--modes", "eval,train", "--dynamic-only", "-f", "json", "-q", cwd=proj)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def _run(report: dict, function: str, mode: str) -> dict:
    (t,) = [t for t in report["targets"] if t["function"] == function and t["run_mode"] == mode]
    return t


def test_both_modes_are_reported_and_equal_explain(both_modes):
    assert both_modes["run_modes"] == ["eval", "train"]
    for fn in ("mend_target_train_logged", "mend_target_grad_probe"):
        for mode in ("eval", "train"):
            t = _run(both_modes, fn, mode)
            assert (t["graph_count"], t["graph_break_count"]) == _explain(fn, mode), (fn, mode)


def test_eval_is_no_grad_and_train_only_breaks_are_marked(both_modes):
    # eval mode is inference: no_grad, so the grad-only print does not break it
    assert _run(both_modes, "mend_target_grad_probe", "eval")["breaks"] == []
    probe = _run(both_modes, "mend_target_grad_probe", "train")["breaks"]
    assert [b["line"] for b in probe] == [GRAD_PRINT] and probe[0]["only_in_mode"] == "train"
    # .train() turns the training-only branch on
    assert _run(both_modes, "mend_target_train_logged", "eval")["breaks"] == []
    logged = _run(both_modes, "mend_target_train_logged", "train")["breaks"]
    assert [(b["line"], b["rule"], b["only_in_mode"]) for b in logged] == [(TRAIN_PRINT, "GM201", "train")]


def test_a_target_that_cannot_backward_fails_alone(both_modes):
    assert _run(both_modes, "mend_target_no_parameters", "eval")["error"] is None
    err = _run(both_modes, "mend_target_no_parameters", "train")["error"]
    assert "cannot train: no floating-point output requires grad (the target has no parameters requiring grad)" in err
    # the target's own loss is what train mode backwards through
    assert _run(both_modes, "mend_target_custom_loss", "train")["error"] is None
    assert "the target's loss does not require grad" in _run(both_modes, "mend_target_detached_loss", "train")["error"]


def test_text_report_names_the_mode(project):
    r = mend("analyze", "models.py", "--train", "--dynamic-only", "-q", cwd=project)
    assert r.returncode == 1
    assert "mode: train" in r.stdout and "models.py::mend_target_train_logged [train]" in r.stdout


def test_compiled_autograd_records_the_backward(project):
    r = mend("analyze", "hooked.py", "--train", "--compiled-autograd", "--dynamic-only", "-f", "json", "-q", cwd=project)
    (t,) = json.loads(r.stdout)["targets"]
    assert t["backward_graph_count"] and t["backward_graph_count"] >= 1
    phases = {(b["line"], b["phase"]) for b in t["breaks"]}
    assert (HOOK_PRINT, "backward") in phases and (HOOK_PRINT, "forward") in phases, phases
    # explain counts the forward only, and so does graph_count
    assert (t["graph_count"], t["graph_break_count"]) == (2, 1)
    off = json.loads(mend("analyze", "hooked.py", "--train", "--dynamic-only", "-f", "json", "-q",
                          cwd=project).stdout)["targets"][0]
    assert off["backward_graph_count"] is None and all(b["phase"] == "forward" for b in off["breaks"])


# -- the gate keys on the mode ----------------------------------------------------------

def test_check_baseline_keeps_modes_apart(project):
    target = ["models.py"]
    r = mend("check", *target, "--dynamic", "--train", "--select", "GM2", "--update-baseline", "-q", cwd=project)
    assert r.returncode == 1  # the no-parameter target cannot train: a failed target
    baseline = json.loads((project / ".mend-baseline.json").read_text())
    dynamic = [e for e in baseline["entries"] if e["origin"] == "dynamic"]
    assert dynamic and all(e.get("mode") == "train" for e in dynamic), dynamic
    # an eval run neither sees those entries as stale nor is satisfied by them
    ev = mend("check", *target, "--dynamic", "--select", "GM2", "-f", "json", "-q", cwd=project)
    check = json.loads(ev.stdout)["check"]
    assert check["stale"] == [] and check["new"] == []
    # a train run finds them known; with the entries gone, they are new train-mode breaks
    tr = json.loads(mend("check", *target, "--dynamic", "--train", "--select", "GM2", "-f", "json", "-q",
                         cwd=project).stdout)["check"]
    assert tr["new"] == [] and tr["known"] >= 2
    baseline["entries"] = [e for e in baseline["entries"] if e["origin"] != "dynamic"]
    (project / ".mend-baseline.json").write_text(json.dumps(baseline))
    tr = json.loads(mend("check", *target, "--dynamic", "--train", "--select", "GM2", "-f", "json", "-q",
                         cwd=project).stdout)["check"]
    assert {(e["line"], e["run_mode"]) for e in tr["new"] if e["origin"] == "dynamic"} >= {(TRAIN_PRINT, "train"), (GRAD_PRINT, "train")}


def test_old_baselines_read_as_eval(tmp_path):
    from graphmend.baseline import dump_baseline, load_baseline

    path = tmp_path / "b.json"
    path.write_text(json.dumps({"version": 1, "entries": [
        {"file": "m.py", "rule": "GM201", "function": "f", "source": "print(1)", "origin": "dynamic", "count": 1},
        {"file": "m.py", "rule": "GM201", "function": "f", "source": "print(1)", "origin": "dynamic", "mode": "train"},
    ]}))
    counts = load_baseline(path)
    assert counts == {("m.py", "dynamic", "f", "GM201", "print(1)"): 1,
                      ("m.py", "dynamic:train", "f", "GM201", "print(1)"): 1}
    again = json.loads(dump_baseline(counts))["entries"]
    assert [e.get("mode") for e in again] == [None, "train"] and {e["origin"] for e in again} == {"dynamic"}


# -- fix and bench in train mode ---------------------------------------------------------

@pytest.mark.slow
def test_fix_train_removes_the_training_only_break(project):
    r = mend("fix", "models.py", "--train", "--rule", "GM201", "-f", "json", "-q", cwd=project)
    report = json.loads(r.stdout)
    assert report["run_modes"] == ["train"]
    fixes = [f for f in report["fixes"] if f["line"] == TRAIN_PRINT]
    assert fixes and fixes[0]["status"] == "verified", fixes
    assert "train+grad" in fixes[0]["checks"]
    (ft,) = [t for t in report["fix_targets"] if t["name"].endswith("mend_target_train_logged")]
    assert (ft["breaks_before"], ft["breaks_after"]) == (1, 0)


@pytest.mark.slow
def test_bench_times_a_training_step(project):
    r = mend("bench", "models.py::mend_target_custom_loss", "--train", "--optimizer", "adamw", "--arms",
             "eager,original", "--runs", "3", "--warmup", "1", "-f", "json", "-q", cwd=project)
    assert r.returncode == 0, r.stderr + r.stdout
    report = json.loads(r.stdout)
    rows = {b["arm"]: b for b in report["bench"]}
    assert set(rows) == {"eager", "original"}
    for b in rows.values():
        assert (b["run_mode"], b["optimizer"]) == ("train", "adamw") and b["median_ms"] > 0 and b["runs"] == 3
    # the compiled training step's first loss and gradients are eager's
    assert rows["original"]["outputs_match"] is True and rows["original"]["graph_count"] >= 1
    assert report["ratios"][0]["run_mode"] == "train"
    bad = json.loads(mend("bench", "models.py::mend_target_no_parameters", "--train", "--arms", "eager", "--runs", "1",
                          "-f", "json", "-q", cwd=project).stdout)
    assert "cannot train" in bad["bench"][0]["error"]


def test_every_format_names_the_mode_and_train_only_breaks():
    from graphmend.core.model import Break, TargetResult, new_report
    from reports import render

    r = new_report("analyze", root="/p")
    r.run_modes = ["eval", "train"]
    brk = Break(rule="GM202", category="side-effect", reason="Logger not supported", file="/p/m.py", line=7, col=8,
                source_line="        log.info('step')", function="M.forward", only_in_mode="train")
    bwd = Break(rule="GM201", category="side-effect", reason="Failed to trace builtin operator", file="/p/m.py",
                line=9, col=8, source_line="        print(g)", counted=False, phase="backward")
    r.targets = [TargetResult(name="m.py::mend_target_m", file="/p/m.py", function="mend_target_m", graph_count=1),
                 TargetResult(name="m.py::mend_target_m", file="/p/m.py", function="mend_target_m", run_mode="train",
                              graph_count=2, graph_break_count=1, breaks=[brk, bwd], backward_graph_count=2)]
    from graphmend.correlate import with_issues  # a hand-made report: its issues merged, as the CLI does

    r = with_issues(r)
    out = {fmt: render(r, fmt) for fmt in ("text", "md", "html", "sarif", "github", "json")}
    for fmt in ("text", "md", "html"):
        assert "eval,train" in out[fmt] and "m.py::mend_target_m [train]" in out[fmt], fmt
        assert "train only" in out[fmt] and "in the backward (compiled autograd)" in out[fmt], fmt
    assert "backward: 2 graphs" in out["text"]
    sarif = json.loads(out["sarif"])["runs"][0]["results"]
    assert {(tuple(x["properties"]["targets"]), x["properties"].get("only_in_mode"), x["properties"].get("phase"))
            for x in sarif} == {(("m.py::mend_target_m [train]",), "train", None),
                                (("m.py::mend_target_m [train]",), None, "backward")}
    assert "[train] (train only)" in out["github"]
    data = json.loads(out["json"])
    assert data["run_modes"] == ["eval", "train"] and data["targets"][1]["breaks"][1]["phase"] == "backward"
