"""A newcomer's first hour on a repository: the user's own files are written in place (only
installed ones are not), one capture serves every spelling of a recorded folder, and the
scripted hour itself (mend run --record, analyze, fix --from-run --write, bench, check)."""

import os
import re
import sys
from pathlib import Path

import pytest

from graphmend.core.cache import Cache
from graphmend.core.discovery import TargetSpec
from graphmend.core.sources import installed, own_root, users_file

REPO = Path(__file__).resolve().parents[2]


def test_the_repository_is_the_users_and_site_packages_is_installed(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pkg").mkdir()
    (repo / "scripts").mkdir()
    monkeypatch.chdir(repo / "scripts")
    assert own_root() == repo.resolve()  # the git top level, not the folder mend ran in
    assert users_file(repo / "pkg" / "model.py")
    assert not users_file(repo / ".venv" / "lib" / "python3.11" / "site-packages" / "m.py")
    assert installed(Path(sys.prefix) / "lib" / "m.py") and not users_file(tmp_path / "elsewhere.py")
    plain = tmp_path / "plain"
    (plain / "sub").mkdir(parents=True)
    monkeypatch.chdir(plain)  # not in git: the working directory is the user's
    assert own_root() == plain.resolve() and users_file(plain / "sub" / "m.py")


def test_one_capture_serves_every_spelling_of_the_target_path(tmp_path, monkeypatch):
    import tracer.capture as capture
    from graphmend.core.jobs import JobOutcome
    from graphmend.core.model import TargetResult
    from graphmend.core.serial import to_dict

    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "t.py").write_text("def mend_target_f():\n    return abs, (1,)\n")
    file = str((tmp_path / "t.py").resolve())

    def worker(job):  # the capture a worker returns for `mend fix rec` (named rec/t.py::...)
        got = TargetResult(name="rec/t.py::mend_target_f", file=file, function="mend_target_f", graph_count=1)
        return JobOutcome(result={"results": [{**to_dict(got), "ran_files": [file]}]}, error=None)

    monkeypatch.setattr(capture, "run_job", worker)
    capture.capture_targets([TargetSpec("rec/t.py::mend_target_f", "mend_target_f", file=file)], cache=Cache.for_run())

    def no_worker(job):
        raise AssertionError("captured again: the cache did not serve the other spelling")

    monkeypatch.setattr(capture, "run_job", no_worker)
    again = Cache.for_run()  # `mend fix --from-run rec .`: the same file, named from another folder
    got = capture.capture_targets([TargetSpec("t.py::mend_target_f", "mend_target_f", file=file)], cache=again)
    # the same capture, under the name this run gives it
    assert [(r.name, r.graph_count) for r in got] == [("t.py::mend_target_f", 1)]
    assert "t.py::mend_target_f" in again.captured


def test_mends_own_options_before_the_script_are_mends(tmp_path):
    from typer.testing import CliRunner

    from graphmend.cli.app import app

    runner = CliRunner()
    # --verbose is mend's (the report's details), read before the script: the script is next
    r = runner.invoke(app, ["run", "--verbose", str(tmp_path / "train.py"), "--verbose"])
    assert r.exit_code == 2 and f"script does not exist: {tmp_path / 'train.py'}" in r.output, r.output
    # an option mend does not know, before the script, is named as one, not taken for the script
    r = runner.invoke(app, ["run", "--bogus", "train.py"])
    assert r.exit_code == 2 and "unknown option --bogus for mend run" in r.output, r.output


def test_fix_with_every_target_failing_to_import_exits_1_in_one_line(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from typer.testing import CliRunner

    import graphmend.fixing as fixing
    from graphmend.cli.app import app
    from graphmend.core.model import TargetResult, new_report

    def run_fix(paths, config, options, progress=None, cost=None):  # what the stage returns then
        report = new_report("fix", root=str(tmp_path))
        report.targets = [TargetResult(name="t.py::mend_target_a", file="t.py", function="mend_target_a",
                                       error="importing t.py raised ModuleNotFoundError: No module named 'x'")]
        return fixing.FixRun(report=report, patches={}, candidates={})

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fixing, "run_fix", run_fix)
    (tmp_path / "t.py").write_text("import x\n\n\ndef mend_target_a():\n    return abs, (1,)\n")
    r = CliRunner().invoke(app, ["fix", "t.py", "-q"])
    assert r.exit_code == 1, r.output  # a broken environment is not a clean run
    assert r.output == ("mend: no target ran: all 1 failed (t.py::mend_target_a: importing t.py raised "
                        "ModuleNotFoundError: No module named 'x')\n")


def test_a_targets_error_does_not_repeat_its_name(tmp_path, monkeypatch):
    import tracer.capture as capture
    from graphmend.core.jobs import JobOutcome
    from graphmend.core.model import TargetResult
    from graphmend.core.serial import to_dict

    name = "t.py::mend_target_a"

    def worker(job):  # the worker's message starts with the target's name, for its logs
        got = TargetResult(name=name, file="t.py", function="mend_target_a",
                           error=f"{name}: importing t.py raised ModuleNotFoundError: No module named 'x'")
        return JobOutcome(result={"results": [to_dict(got)]}, error=None)

    monkeypatch.setattr(capture, "run_job", worker)
    (got,) = capture.capture_targets([TargetSpec(name, "mend_target_a", file=str(tmp_path / "t.py"))])
    # every listing prints the name beside the error: "t.py::mend_target_a: importing t.py raised ..."
    assert got.error == "importing t.py raised ModuleNotFoundError: No module named 'x'"


@pytest.mark.parametrize("index, expected", [
    ("x > 0", "boolean-mask index `x[keep_mask]` has a data-dependent shape"),
    ("torch.argsort(x)", "index `x[keep_mask]` by a tensor named like a mask: a data-dependent shape if it is "
                         "boolean (an integer index is not)"),
])
def test_an_index_is_called_a_boolean_mask_only_when_it_is_one(index, expected):
    from rewrites.scan import scan_source

    src = (f"import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        keep_mask = {index}\n"
           "        return x[keep_mask]\n")
    assert [f.message for f, *_ in scan_source(src, "m.py").findings] == [expected]


MODEL = '''import torch
from torch import nn


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            y = y * 2
        return y.relu()
'''

# a training script in a subfolder, its model in the repository's own package, no mend_target
TRAIN = '''import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch
from pkg.model import TinyNet

torch.manual_seed(0)
model = TinyNet()
step = torch.compile(model, backend="aot_eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
step(x).sum().backward()
opt.step()
with torch.no_grad():  # grad mode off: a recompile, not a break
    step(x)
'''


def _quant() -> tuple[str, int]:
    """A file holding tests/tracer/test_lowering.py's quantized layer (Dynamo captures it whole,
    Inductor on torch 2.13's CPU cannot lower it: its scales are computed in the graph) and a
    target, with the line of the op's call. Its source is read from that file, not imported:
    the test module lives in another folder of tests/."""
    import ast

    lowering = (REPO / "tests" / "tracer" / "test_lowering.py").read_text(encoding="utf-8")
    layer = next(n for n in ast.parse(lowering).body if isinstance(n, ast.ClassDef) and n.name == "Int8Linear")
    head = "import torch\nfrom torch import nn\n\n\n"
    body = ast.get_source_segment(lowering, layer) + "\n"
    line = head.count("\n") + next(i for i, t in enumerate(body.splitlines(), 1) if "_weight_int8pack_mm" in t)
    return head + body + "\n\ndef mend_target_int8():\n    return Int8Linear().eval(), (torch.randn(4, 8),)\n", line


def test_a_first_hour_on_a_repository_without_targets(tmp_path):
    """mend run --record, analyze, fix --from-run --write, bench, check: what a newcomer reads;
    then analyze --lower on the quantized layer torch.compile cannot build."""
    pytest.importorskip("torch")
    import subprocess

    repo = tmp_path / "repo"
    quant, quant_line = _quant()
    for rel, text in {"pkg/__init__.py": "", "pkg/model.py": MODEL, "scripts/train.py": TRAIN,
                      "quant.py": quant}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / ".git").mkdir()  # the repository's top level: its files are the user's
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEND_CACHE_DIR": str(tmp_path / "cache")}

    def mend(*args):
        return subprocess.run([sys.executable, "-m", "graphmend", *args], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=600)

    run = mend("run", "--record", "rec", "scripts/train.py")
    assert run.returncode == 0, run.stderr
    # one break, one recompile (grad mode), apart; explain's figure beside them, named
    assert "1 break, 1 recompile (explain counts 3)" in run.stderr, run.stderr
    assert "recompiled forward (pkg/model.py:10): guard failed: GLOBAL_STATE changed: grad_mode" in run.stderr
    # the compiled function by its qualified name and its file relative to the repository
    assert "  TinyNet.forward (pkg/model.py)  " in run.stderr, run.stderr
    analyze = mend("analyze", "rec", "-q")
    assert analyze.returncode == 1 and "GM101" in analyze.stdout and "pkg/model.py:12" in analyze.stdout, analyze
    fix = mend("fix", "--from-run", "rec", "--write")
    assert "installed packages" not in fix.stderr and "mend: wrote 1 file(s)" in fix.stderr, fix.stderr
    assert "y = torch.where(y.sum() > 0, y * 2, y)" in (repo / "pkg" / "model.py").read_text()
    # the recorded target, mended, timed: a table with its arms, never Inductor's IR
    bench = mend("bench", "rec", "--runs", "3", "--warmup", "1", "--arms", "eager,original")
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "Total: 1 target benchmarked, 2 arms run" in bench.stdout, bench.stdout
    # (a median the machine made noisy is marked "unstable" in its cell: not a column)
    arms = [[w for w in line.split() if w != "unstable"] for line in bench.stdout.splitlines()
            if line.lstrip().startswith(("eager ", "original "))]
    assert [a[0] for a in arms] == ["eager", "original"] and all(a[-1] == "match" for a in arms), bench.stdout
    assert arms[1][5:7] == ["1", "0"], bench.stdout  # one graph, no break: the fix is what was timed
    for text in (bench.stdout, bench.stderr):
        assert not re.search(r"ComputedBuffer|Pointwise\(|\bbuf\d+ = |def call\(args\)", text), text
    assert all(line.startswith("[") for line in bench.stderr.splitlines()), bench.stderr  # progress lines only
    check = mend("check", "pkg")
    assert check.returncode == 0 and "accept today's with `mend check pkg --update-baseline`" in check.stderr, check
    # a lowering failure named: the op, the user's line, Inductor's reason; never its IR
    lower = mend("analyze", "quant.py", "--lower", "-q")
    assert lower.returncode == 1 and "GM608" in lower.stdout and f"quant.py:{quant_line} [dynamic] in forward" in lower.stdout, lower
    assert "Inductor cannot lower `aten._weight_int8pack_mm.default`" in lower.stdout, lower.stdout
    assert "inductor: LoweringException: AssertionError: <class 'torch._inductor.ir.Pointwise'>" in lower.stdout
    for text in (lower.stdout, lower.stderr):
        assert not re.search(r"ComputedBuffer|Pointwise\(|\bbuf\d+ = |def call\(args\)", text), text


def test_a_long_target_name_wraps_alone_and_no_column_collapses():
    from graphmend.core.model import Report, TargetResult
    from reports import render

    name = "EncoderBlockOfAVisionTransformerWithAVeryLongName.forward (models/vision/transformer_encoder_blocks.py)"
    report = Report(command="run", root="/r", targets=[
        TargetResult(name=name, file="/r/m.py", function="forward", graph_count=13, graph_break_count=12,
                     frames_skipped=1)])
    lines = render(report, "text").splitlines()
    head = next(l for l in lines if l.lstrip().startswith("target"))
    assert head.split() == ["target", "graphs", "breaks", "recompiles", "skipped", "explain", "s", "status"]
    row = next(l for l in lines if l.lstrip().startswith("EncoderBlock"))
    assert row.split()[1:] == ["13", "0", "0", "1", "12", "0.00", "ok"], row  # every figure whole


def test_run_names_a_compiled_function_short_and_relative(tmp_path):
    from graphmend.core.model import Break, TargetResult
    from tracer.recorder import qualname as _qualname
    from tracer.run_script import short_names

    (tmp_path / "pkg").mkdir()
    model = tmp_path / "pkg" / "model.py"
    model.write_text(MODEL + "\n\nclass Decoder(nn.Module):\n    def forward(self, x):\n        return x\n")
    # encoder and decoder of one model: two rows, each by its class
    assert _qualname(str(model), "forward", 10) == "TinyNet.forward"
    assert _qualname(str(model), "forward", 18) == "Decoder.forward"
    key = f"forward ({model})"
    t = TargetResult(name=key, file=str(model), function="TinyNet.forward",
                     breaks=[Break(rule="GM101", category="control-flow", reason="r", compiled_function=key)])
    short_names([t], str(tmp_path))
    assert t.name == t.breaks[0].compiled_function == "TinyNet.forward (pkg/model.py)"


def test_a_wide_bench_table_keeps_every_cell_whole():
    from graphmend.core.model import BenchRow, Report
    from reports import render

    report = Report(command="bench", bench=[
        BenchRow("models/gate.py::mend_target_gate", "original", "cpu", "reduce-overhead", run_mode="train",
                 optimizer="adamw", cold_s=12.5, median_ms=400.123, iqr_ms=210.5, unstable=True, graph_count=3,
                 break_count=2, kernel_count=15, backend="cpp/openmp", peak_mem_mb=1234.5, outputs_match=True),
        BenchRow("models/gate.py::mend_target_gate", "mended", "cpu", "reduce-overhead", skipped=True,
                 error="no verified fix")])
    text = render(report, "text")
    row = next(l for l in text.splitlines() if l.lstrip().startswith("original "))
    assert "cpp/openmp" in row and "1234.5" in row and "match" in row, text
    assert next(l for l in text.splitlines() if l.lstrip().startswith("mended ")).rstrip().endswith("skipped")
    assert "Total: 1 target benchmarked, 1 arms run, 1 unstable" in text and "0 targets" not in text


def test_a_failed_bench_arm_is_one_line():
    from graphmend.core.model import BenchRow, Report
    from reports import render

    ir = "\n".join(f"  buf{i} = ComputedBuffer(layout=FixedLayout('cpu', torch.float32, size=[{i}]))" for i in range(40))
    report = Report(command="bench", bench=[BenchRow("m.py::t", "original", "cpu", "default", error=(
        "m.py::t [original]: InductorError: LoweringException: NotImplementedError: unique\n" + ir))])
    lines = [l for l in render(report, "text").splitlines() if "original:" in l or "ComputedBuffer" in l]
    assert lines == ["  original: m.py::t [original]: InductorError: LoweringException: NotImplementedError: unique "
                     "(40 more lines in the JSON report)"], lines
