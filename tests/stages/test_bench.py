"""``mend bench``: one real CPU bench of a tiny target/reference pair (shared by the tests
below), the CUDA path where a GPU exists, and the pure parts (stats, arms, ratios)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphmend.bench.arms import parse_arms, resolve
from graphmend.bench.stage import BenchOptions, failed, ratios_for
from graphmend.bench.stats import iqr, median, ratio
from graphmend.core.config import Config
from graphmend.core.model import BenchRow, Report

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "bench"
SCHEMA = REPO / "reports" / "schema" / "report.schema.json"


def _mend_bench(*args: str, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # no compile-worker pool on a 2-core box
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "graphmend", "bench", *args, "-q", "-f", "json", "-o", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)


@pytest.fixture(scope="module")
def cpu_bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "report.json"
    proc = _mend_bench(str(FIXTURE), "--runs", "3", "--warmup", "1", out=out)
    return proc, out


def test_cpu_bench_end_to_end(cpu_bench):
    proc, out = cpu_bench
    data = json.loads(out.read_text())
    # a mended arm slower than the original beyond noise is a regression: a finding (exit 1)
    slower = [x for x in data["ratios"] if x.get("slower")]
    assert proc.returncode == (1 if slower else 0), proc.stderr[-2000:]
    assert "mended arm is slower" not in proc.stderr  # -q: the exit code and the JSON say it
    if SCHEMA.exists():
        import jsonschema

        jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    report = Report.from_dict(data)
    assert report.command == "bench" and not report.errors
    rows = {r.arm: r for r in report.bench}
    assert set(rows) == {"eager", "original", "mended", "reference"}  # the reference is an arm, not a target
    assert {r.target for r in report.bench} == {"mlp_pair.py::mend_target_mlp"}
    ran = [r for r in report.bench if not r.skipped]
    assert {"eager", "original", "reference"} <= {r.arm for r in ran}
    for r in ran:
        assert r.error is None, r.error
        assert r.cold_s > 0 and r.median_ms > 0 and r.iqr_ms >= 0 and r.runs == 3
        assert r.outputs_match is True, r.mismatch
        assert r.peak_mem_mb is not None and r.memory == "cpu_peak_rss_delta"
        assert r.device == "cpu" and r.mode == "default" and r.dtype == "float32"
    # every arm its own fresh Inductor cache
    caches = [r.cache_dir for r in ran]
    assert all(caches) and len(set(caches)) == len(caches)
    # compiled arms: C++/OpenMP kernels; the original breaks (logger, data-dependent if), the reference does not
    for arm in ("original", "reference"):
        assert rows[arm].backend.startswith("cpp") and rows[arm].kernel_count > 0
    assert rows["eager"].backend is None and rows["eager"].graph_count is None
    assert rows["original"].break_count >= 1 and rows["original"].graph_count >= 2
    assert rows["reference"].break_count == 0 and rows["reference"].graph_count == 1
    mended = rows["mended"]
    if mended.skipped:
        assert mended.error and mended.error.startswith("mended arm")
    else:
        assert mended.outputs_match is True and mended.break_count < rows["original"].break_count
    names = {x.name: x.value for x in report.ratios}
    assert names["original/eager"] == pytest.approx(rows["original"].median_ms / rows["eager"].median_ms)
    assert names["reference/original"] == pytest.approx(rows["reference"].median_ms / rows["original"].median_ms)
    assert "mended/reference" in names


def test_arms_without_eager_are_not_compared_and_not_called_different(tmp_path):
    # no eager arm asked for: nothing to compare with, which is neither a match nor a difference
    out = tmp_path / "r.json"
    proc = _mend_bench(str(FIXTURE), "--arms", "original", "--runs", "1", "--warmup", "0", out=out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = Report.from_json(out.read_text()).bench
    assert row.arm == "original" and row.error is None
    assert row.outputs_match is None and row.mismatch is None


@pytest.mark.skipif(not __import__("importlib").util.find_spec("torch"), reason="torch is not installed")
def test_cuda_path(tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine: the Triton path of mend bench is not exercised here")
    out = tmp_path / "cuda.json"
    proc = _mend_bench(f"{FIXTURE}/mlp_pair.py::mend_target_mlp", "--device", "cuda", "--dtype", "float16",
                       "--runs", "3", "--warmup", "1", "--arms", "eager,original,reference", out=out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r.arm: r for r in Report.from_json(out.read_text()).bench}
    assert rows["original"].backend == "triton" and rows["original"].kernel_count > 0
    assert rows["reference"].outputs_match is True and rows["eager"].memory == "cuda_max_allocated"


def test_usage_errors_exit_2():
    from typer.testing import CliRunner

    from graphmend.cli.app import app

    runner = CliRunner()
    bad_arm = runner.invoke(app, ["bench", str(FIXTURE), "--arms", "eager,jit"])
    assert bad_arm.exit_code == 2 and "jit" in bad_arm.output
    missing = runner.invoke(app, ["bench", "no/such/dir"])
    assert missing.exit_code == 2 and "no/such/dir" in missing.output
    import torch

    if not torch.cuda.is_available():
        cuda = runner.invoke(app, ["bench", str(FIXTURE), "--device", "cuda"])
        assert cuda.exit_code == 2 and "--device cuda" in cuda.output


def test_resolve_pairs_reference_and_picks_one_target():
    items, errors = resolve([str(FIXTURE)], Config(root=REPO))
    assert not errors
    assert [(i.spec.function, i.reference) for i in items] == [("mend_target_mlp", "mend_target_mlp_reference")]
    items, _ = resolve([f"{FIXTURE}/mlp_pair.py::mend_target_mlp_reference"], Config(root=REPO))
    assert [(i.spec.function, i.reference) for i in items] == [("mend_target_mlp_reference", None)]
    items, errors = resolve([f"{FIXTURE}/mlp_pair.py::mend_target_nope"], Config(root=REPO))
    assert not items and "mend_target_nope" in errors[0].message
    from graphmend.bench.arms import BenchItem, PatchSource
    from graphmend.core.discovery import TargetSpec

    patches, why = PatchSource(Config(root=REPO), 10).patches_for(BenchItem(TargetSpec("pkg.m::f", "f", module="pkg.m")))
    assert patches is None and why.startswith("mended arm") and "pkg.m::f" in why
    assert parse_arms("reference, eager") == ["eager", "reference"]
    with pytest.raises(ValueError, match="jit"):
        parse_arms("jit")


def test_stats_ratios_and_failure():
    assert median([3.0, 1.0, 2.0]) == 2.0 and iqr([1.0]) == 0.0 and iqr([]) is None
    assert iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0)
    assert ratio(2.0, 4.0) == 0.5 and ratio(None, 1.0) is None and ratio(1.0, 0.0) is None
    rows = [BenchRow("t", "eager", "cpu", "default", median_ms=1.0),
            BenchRow("t", "original", "cpu", "default", median_ms=3.0, cold_s=10.0),
            BenchRow("t", "mended", "cpu", "default", error="mended arm skipped: no fix", skipped=True)]
    got = {x.name: x.value for x in ratios_for("t", rows, BenchOptions())}
    assert got["original/eager"] == 3.0 and got["mended/original"] is None and "mended/reference" not in got
    report = Report(command="bench", bench=rows)
    assert not failed(report)
    rows[1].outputs_match = False
    assert failed(report)


def test_output_comparison_nested_and_tolerances():
    import torch

    from graphmend.verify.compare import COMPILED_TOLERANCES, compare, to_plain, tolerance_for
    from graphmend.verify.inputs import convert

    a = torch.ones(3)
    out = to_plain({"x": (a, {"n": 2}), "y": None})
    bench = {"defaults": COMPILED_TOLERANCES, "precision": "float32"}  # what the bench worker passes
    assert compare(out, to_plain({"x": (a + 1e-6, {"n": 2}), "y": None}), "output", **bench) is None
    why = compare(out, to_plain({"x": (a + 1.0, {"n": 2}), "y": None}), "output", **bench)
    assert why and "output.x[0]" in why and "max abs diff 1" in why
    assert compare(out, to_plain({"x": (a, {"n": 3}), "y": None}), "output", **bench)
    assert tolerance_for("float16", None, COMPILED_TOLERANCES)[0] > tolerance_for("float32", None, COMPILED_TOLERANCES)[0]
    assert tolerance_for("float32", {"rtol": 0.5, "atol": 0.25}, COMPILED_TOLERANCES) == (0.5, 0.25)
    assert tolerance_for("float16", {"float16": {"atol": 1.0}}, COMPILED_TOLERANCES)[1] == 1.0
    moved = convert({"a": [torch.zeros(2, dtype=torch.float64), torch.arange(2)]}, "cpu", torch.float16)
    assert moved["a"][0].dtype == torch.float16 and moved["a"][1].dtype == torch.int64


def test_one_comparator_serves_the_bench_at_its_precision():
    """The bench compares compiled arms with eager through verification's comparator: at the
    run's --dtype every floating output takes that dtype's tolerance (a float32 output of a
    bfloat16 run carries bfloat16 rounding), and floating dtypes may differ; verification,
    with no precision, holds a dtype change to be a difference."""
    import torch

    from graphmend.verify.compare import COMPILED_TOLERANCES, compare

    eager = torch.tensor([1.0, 2.0])
    compiled = eager + 0.03  # within bfloat16's 5e-2, far outside float32's 1e-3
    assert compare(eager, compiled, defaults=COMPILED_TOLERANCES, precision="bfloat16") is None
    assert compare(eager, compiled, defaults=COMPILED_TOLERANCES, precision="float32") is not None
    assert compare(eager, eager.double(), defaults=COMPILED_TOLERANCES, precision="float32") is None
    assert "dtype" in compare(eager, eager.double())
    nan = compare(eager, torch.tensor([1.0, float("nan")]), sides=("eager", "mended"))
    assert nan == "out: NaN where the other side has a number (on the mended side)"


def test_summary_table_one_row_per_target_and_mode(tmp_path):
    from reports.bench_md import summary_table

    rows = [BenchRow("corpus/m.py::t", "eager", "cuda", "reduce-overhead", median_ms=2.0),
            BenchRow("corpus/m.py::t", "original", "cuda", "reduce-overhead", median_ms=1.0, graph_count=3,
                     break_count=2, cold_s=4.0),
            BenchRow("corpus/m.py::t", "mended", "cuda", "reduce-overhead", median_ms=0.25, graph_count=1,
                     break_count=0, cold_s=3.0),
            BenchRow("corpus/m.py::u", "original", "cuda", "reduce-overhead", median_ms=1.0, graph_count=2,
                     break_count=1),
            BenchRow("corpus/m.py::u", "mended", "cuda", "reduce-overhead", error="no fix", skipped=True)]
    opts = BenchOptions(device="cuda", mode="reduce-overhead")
    report = Report(command="bench", bench=rows,
                    ratios=ratios_for("corpus/m.py::t", rows[:3], opts) + ratios_for("corpus/m.py::u", rows[3:], opts))
    lines = summary_table([report]).splitlines()
    assert len(lines) == 4
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[:7] == ["m.py::t", "reduce-overhead", "3 / 2 → 1 / 0", "2.000", "1.000", "0.250", "–"]
    assert cells[7:] == ["0.500", "0.250", "–", "0.750"]  # original/eager, mended/original, -, cold
    assert "2 / 1 → skipped" in lines[3]
    # the docs' tables come from saved reports through the script around the renderer
    saved = tmp_path / "bench.json"
    saved.write_text(report.to_json(), encoding="utf-8")
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_table.py"), "--summary", str(saved)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == summary_table([report])


def test_unstable_medians_are_flagged_in_the_model_and_every_view():
    """Timings whose IQR dwarfs their median (38x on a busy machine) are marked unstable, as
    are the ratios built on them; steady ones are not. Synthetic samples, no timing."""
    from graphmend.bench.stage import fill_row
    from graphmend.bench.stats import UNSTABLE_IQR_RATIO, unstable
    from graphmend.core.jobs import JobOutcome
    from reports import render

    steady = [10.0, 10.1, 9.9, 10.2, 10.0, 9.8, 10.1]
    noisy = [0.2, 0.3, 40.0, 0.25, 35.0, 0.3, 30.0, 0.2]  # a median of 0.3, an IQR ~ 30
    assert not unstable(median(steady), iqr(steady))
    assert unstable(median(noisy), iqr(noisy)) and iqr(noisy) / median(noisy) > 38
    assert not unstable(None, 1.0) and not unstable(1.0, None) and unstable(0.0, 0.5) and not unstable(0.0, 0.0)
    assert unstable(4.0, 4.0 * UNSTABLE_IQR_RATIO + 0.01) and not unstable(4.0, 4.0 * UNSTABLE_IQR_RATIO)

    rows = []
    for arm, times in (("eager", steady), ("original", steady), ("mended", noisy)):
        row = BenchRow("m.py::t", arm, "cpu", "default")
        fill_row(row, JobOutcome({"median_ms": median(times), "iqr_ms": iqr(times), "runs": len(times)}, None))
        rows.append(row)
    assert [r.unstable for r in rows] == [False, False, True]
    ratios = {x.name: x for x in ratios_for("m.py::t", rows, BenchOptions())}
    assert not ratios["original/eager"].unstable
    assert ratios["mended/original"].unstable and not ratios["mended/original (cold)"].unstable
    report = Report(command="bench", bench=rows, ratios=list(ratios.values()))

    data = json.loads(render(report, "json"))
    assert [b["unstable"] for b in data["bench"]] == [False, False, True]
    assert {x["name"]: x["unstable"] for x in data["ratios"]}["mended/original"] is True
    text = render(report, "text")
    (mended,) = [ln for ln in text.splitlines() if ln.strip().startswith("mended ")]
    (eager,) = [ln for ln in text.splitlines() if ln.strip().startswith("eager ")]
    assert "unstable" in mended and "unstable" not in eager
    assert "mended/original 1.500x unstable" not in text  # 0.3 / 10.0
    assert "mended/original 0.030x unstable" in text and "original/eager 1.000x," in text
    assert "rerun on an idle machine" in " ".join(text.split())
    # why, in figures, and what to do on a busy CPU; the header counts the benchmark, not captures
    assert f"  mended: unstable: IQR {iqr(noisy):.3f} ms is {iqr(noisy) / 0.3:.0%} of the median 0.300 ms (above 25%)" \
        in text, text
    assert "OMP_NUM_THREADS=1" in text and "Total: 1 target benchmarked, 3 arms run, 1 unstable" in text
    assert "0.300 **unstable**" in render(report, "md") and ">unstable</span>" in render(report, "html")
    from reports.bench_md import bench_table

    assert "0.300 unstable" in bench_table(report)
    steady_only = Report(command="bench", bench=rows[:2], ratios=ratios_for("m.py::t", rows[:2], BenchOptions()))
    assert "unstable" not in render(steady_only, "text") and "unstable" not in render(steady_only, "md")
