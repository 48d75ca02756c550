"""docs/results.md is generated: the committed page is what ``python -m benchmarks results_page``
makes of the committed result files (so it cannot drift from them), and making it never imports
torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_MAKE = """
import sys
sys.argv = ["results_page"]
sys.path[:0] = [{root!r}, {root!r} + "/benchmarks"]
import runpy
try:
    runpy.run_path({root!r} + "/benchmarks/results_page.py", run_name="__main__")
except SystemExit as done:
    assert not done.code, done.code
assert "torch" not in sys.modules, "results_page imported torch"
"""


def test_the_committed_results_page_is_what_the_result_files_make():
    out = subprocess.run([sys.executable, "-c", _MAKE.format(root=str(ROOT))], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    committed = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert out.stdout == committed, ("docs/results.md differs from the result files: regenerate it with "
                                     "`python -m benchmarks results_page -o docs/results.md`")
    assert "python -m benchmarks results_page -o docs/results.md" in committed.splitlines()[2]


def test_every_result_file_is_read_by_the_page_or_a_script():
    """A result file nothing reads is not kept: the page reads each by its name or its kind."""
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    unread = [p.name for p in sorted((ROOT / "benchmarks" / "results").iterdir()) if f"`{p.name}`" not in text]
    assert unread == []


def test_a_population_run_again_on_ray_is_held_to_the_local_runs_table():
    """A run on another executor is shown for its time only, and says whether its population table
    is the local run's: a difference would be a result that depends on where the jobs ran."""
    import importlib.util

    from graphmend.core.tables import PopulationRow, SweepReport, SweepTotals

    spec = importlib.util.spec_from_file_location("results_page", ROOT / "benchmarks" / "results_page.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)

    def report(executor, jobs, wall, removed):
        return SweepReport(library="torchaudio", executor=executor, jobs=jobs, totals=SweepTotals(wall_s=wall),
                           population=[PopulationRow(library="torchaudio", modality="all", breaks=47, removed=removed)])

    local = report("local", 2, 600.0, 11)
    assert page.same_population(local, report("ray", 2, 450.0, 11)) == []
    assert page.same_population(local, report("ray", 2, 450.0, 9)) == ["removed"]
    line, = page.timing_lines([("x-ray.json", report("ray", 2, 450.0, 9))], [local])
    assert "on ray: 8 min against 10 min with `--jobs 2` on local (0.75x)" in line and "differs in removed" in line
