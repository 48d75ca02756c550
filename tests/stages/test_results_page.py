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
