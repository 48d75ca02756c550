"""Breaks whose cause is library code the user's line calls (tests/fixtures/dynamic/library):
the report names the user line AND the library frame that broke, in text and JSON; a repeat
Dynamo logs with only the library place folds into its break instead of an
``<unknown location>`` issue; explain's count matches a break whose user_stack ends in the
library."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "dynamic" / "library" / "library_breaks.py"


def _line(marker: str) -> int:
    (n,) = [i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in text]
    return n


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    """One ``mend analyze --format json`` over the fixture; the JSON and its text rendering."""
    from graphmend.core.model import Report
    from reports import render

    work = tmp_path_factory.mktemp("library")
    shutil.copy(FIXTURE, work / FIXTURE.name)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), NO_COLOR="1")
    out = subprocess.run([sys.executable, "-m", "graphmend", "analyze", FIXTURE.name, "--format", "json", "-o",
                          "report.json"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr  # findings
    data = json.loads((work / "report.json").read_text())
    report = Report.from_dict(data)
    return data, report, render(report, "text")


def _breaks(data: dict, target: str) -> list[dict]:
    (t,) = [t for t in data["targets"] if t["name"].endswith(f"::{target}")]
    assert t["error"] is None, t["error"]
    return t["breaks"]


def test_a_break_inside_a_library_function_names_the_user_line_and_the_library_frame(analyzed):
    data, _, text = analyzed
    (b,) = _breaks(data, "mend_target_deepcopy")
    assert (b["file"], b["line"], b["function"]) == (FIXTURE.name, _line("z = copy.deepcopy(y)"), "copied")
    assert [f["function"] for f in b["stack"]][-1] == "copied"  # the user frames stay the stack
    (lib,) = b["library"]
    assert Path(lib["file"]).name == "copy.py" and lib["function"] == "deepcopy" and lib["source"]
    assert b["counted"]  # explain's user_stack ends in copy.py: still the break explain counts
    assert f"{FIXTURE.name}:{_line('z = copy.deepcopy(y)')}" in text
    assert f"broke in library code it calls: deepcopy (copy.py:{lib['line']}): {lib['source']}" in text


def test_a_break_in_a_dynamo_polyfill_is_placed_at_the_user_line(analyzed):
    data, _, text = analyzed
    graph_breaks = [b for b in _breaks(data, "mend_target_gated_all") if b["kind"] == "graph_break"]
    (b,) = graph_breaks
    assert (b["file"], b["line"]) == (FIXTURE.name, _line("if all(to_drop):")) and b["counted"]
    assert b["library"][-1]["function"] == "all"
    assert b["library"][-1]["file"].replace("\\", "/").endswith("torch/_dynamo/polyfills/builtins.py")
    assert "all (torch/_dynamo/polyfills/builtins.py:" in text


def test_cached_property_skip_names_the_standard_library_lock(analyzed):
    """Python 3.11's ``functools.cached_property`` takes an RLock, a context manager Dynamo
    cannot enter: the frame is skipped, and the cause is the library's line, not the user's."""
    data, report, text = analyzed
    breaks = _breaks(data, "mend_target_cached_property")
    if sys.version_info >= (3, 12):  # no lock since 3.12: nothing to break on
        assert breaks == []
        return
    (b,) = breaks  # the repeat logged at functools.py alone folds into it: no unknown location
    assert (b["file"], b["line"]) == (FIXTURE.name, _line("y = self.lin(x) * self.scale"))
    assert b["occurrences"] == 2 and b["kind"] == "frame_skipped"
    lib = b["library"][-1]
    assert Path(lib["file"]).name == "functools.py"
    assert (lib["function"], lib["source"]) == ("cached_property.__get__", "with self.lock:")
    (issue,) = [i for i in report.issues if i.line == b["line"]]
    assert issue.said.library[-1].function == "cached_property.__get__"
    assert "cached_property.__get__ (functools.py:" in text and "with self.lock:" in text
    assert "<unknown location>" not in text
    assert all(i.file for i in report.issues)
    from reports import render

    md = render(report, "md").replace("\\", "")  # Markdown escapes the underscores
    assert "Broke in library code it calls: cached_property.__get__ (functools.py:" in md
