"""Golden files: each renderer over the fixed sample report; a changed renderer is a reviewable diff.

Regenerate with ``MEND_UPDATE_GOLDEN=1 python -m pytest tests/reports/test_reports_golden.py``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from graphmend.core.model import Report, summarize
from reports import FORMATS, render
from reports.github import escape_data, escape_property
from reports.wording import location, rel
from reports.text import caret

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "fixtures" / "reports" / "sample_report.json"
GOLDEN = ROOT / "tests" / "golden"
EXT = {"text": "txt", "json": "json", "md": "md", "html": "html", "sarif": "sarif", "github": "github"}
UPDATE = os.environ.get("MEND_UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def sample() -> Report:
    return Report.from_json(SAMPLE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rendered(sample) -> dict[str, str]:
    # SARIF's rule texts are the rule records' (rewrites.rules): a record edited is a diff here
    return {fmt: render(sample, fmt) for fmt in FORMATS}


@pytest.mark.parametrize("fmt", FORMATS)
def test_golden(rendered, fmt):
    path = GOLDEN / f"report.{EXT[fmt]}"
    if UPDATE:
        path.write_text(rendered[fmt], encoding="utf-8")
    assert path.exists(), f"missing {path}; create it with MEND_UPDATE_GOLDEN=1"
    assert rendered[fmt] == path.read_text(encoding="utf-8"), \
        f"{fmt} output differs from {path}; if intended, regenerate with MEND_UPDATE_GOLDEN=1 and review the diff"


def test_sample_is_current(sample):
    # the fixture's summary must be what the stage would compute, and its JSON the model's own form
    assert sample.summary == summarize(sample)
    assert sample.to_json() + "\n" == SAMPLE.read_text(encoding="utf-8"), \
        "the model changed: rewrite the sample with Report.from_json(...).to_json()"


def test_outputs_hold_no_machine_paths(rendered):
    for fmt, text in rendered.items():
        assert str(ROOT) not in text, fmt
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", text), f"{fmt} has a timestamp"


def test_render_fills_missing_summary(sample):
    bare = dataclasses.replace(sample, summary=None)
    assert render(bare, "md") == render(sample, "md")
    assert bare.summary is None  # the caller's report is left alone


def test_unknown_format_is_a_value_error(sample):
    with pytest.raises(ValueError, match="unknown --format 'pdf'"):
        render(sample, "pdf")


def test_paths_relative_only_under_root():
    assert rel("/home/dev/proj/models/a.py", "/home/dev/proj") == "models/a.py"
    assert rel("/home/dev/proj/models/a.py", "/home/dev/proj/") == "models/a.py"
    assert rel("/home/dev/project2/a.py", "/home/dev/proj") == "/home/dev/project2/a.py"
    assert rel("/x/a.py", "") == "/x/a.py"
    assert location("/r/a.py", 3, "/r", col=0) == "a.py:3:1"
    assert location(None, None, "/r") == "<unknown location>"


def test_text_caret_sits_under_the_expression(rendered):
    lines = rendered["text"].splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.endswith("if h.sum() > 0:"))
    src, marks = lines[i], lines[i + 1]
    start = src.index("h.sum()")
    assert marks[start:] == "^" * len("h.sum() > 0")
    assert marks[:start].strip(" |") == ""
    assert caret("  x", None, None) == ""
    assert caret("\tab", 1, None) == "\t^"


def test_text_groups_issues_by_rule_and_shows_totals(rendered):
    text = rendered["text"]
    details = text[text.index("Details:"):]
    assert details.index("GM101 control-flow  2 issues") < details.index("GM201 side-effect  1 issue") < details.index("GM900")
    assert "models/gate.py:18:12 [confirmed] in GateBlock.forward  x2" in text
    # breaks and recompiles apart, explain's figure beside them and named as such
    assert "Total: 3 targets, 1 failed, 4 graphs, 5 breaks, 1 recompile (explain counts 2), 8 issues" in text
    assert "\x1b[" not in text


def test_text_first_screen_is_the_summary(rendered, sample):
    """Skipped frames, the top causes, the totals and the targets table come before any detail;
    Dynamo's explanations and recompile guards only with verbose."""
    text = rendered["text"]
    order = ["1 frame ran in eager: a break inside its loop made Dynamo skip it whole",
             "Scaler.forward ran entirely in eager (loop at models/loop.py:8)", "Top causes", "Total: ",
             "Next: 6 of 7 issues have a candidate fix: mend fix models", "Targets", "Details:"]
    at = [text.index(x) for x in order]
    assert at == sorted(at)
    # each recompile on the first screen: the guard that failed and the user line it guards
    assert ("mend_target_gate: recompiled GateBlock.forward (models/gate.py:14): guard failed: tensor 'x' size "
            "mismatch at index 0. expected 8, actual 16; it guards models/gate.py:15: h = self.proj(x)") in text
    assert "why: " not in text
    verbose = render(sample, "text", verbose=True)
    assert "why: " in verbose and "hint: " in verbose


def test_one_result_per_issue_in_every_machine_format(rendered, sample):
    import json

    n = len(sample.issues)
    assert n == 8 < sum(len(t.breaks) for t in sample.targets) + len(sample.findings)
    assert len(json.loads(rendered["sarif"])["runs"][0]["results"]) == n
    annotations = [ln for ln in rendered["github"].splitlines() if "title=GM" in ln and "(new)" not in ln]
    assert len(annotations) == n
    # the print at gate.py:21 is one static finding and one dynamic break: annotated once
    assert sum("file=models/gate.py,line=21," in ln for ln in annotations) == 1


def test_every_format_names_a_lowering_failure(rendered):
    """A graph Inductor cannot compile (GM608) reads the same everywhere: the op, the user's
    line, Inductor's reason, each from the issue."""
    import json

    op, why = "aten._weight_int8pack_mm.default", "LoweringException: AssertionError: "
    text = rendered["text"]
    assert "models/gate.py:24 [dynamic] in forward" in text and f"Inductor cannot lower `{op}`" in text
    assert f"inductor: {why}" in text
    assert "Inductor cannot lower \\`aten.\\_weight\\_int8pack\\_mm.default\\`" in rendered["md"]
    assert f"Inductor:</b> {why}" in rendered["html"]
    (res,) = [x for x in json.loads(rendered["sarif"])["runs"][0]["results"] if x["ruleId"] == "GM608"]
    assert res["properties"]["op"] == op and res["locations"][0]["physicalLocation"]["region"]["startLine"] == 24
    assert f"Inductor: {why}" in res["message"]["text"]
    (issue,) = [i for i in json.loads(rendered["json"])["issues"] if i["rule"] == "GM608"]
    assert issue["op"] == op and issue["lowering"] == [[0, 0]]


def test_text_colour_only_when_asked(sample):
    assert "\x1b[" in render(sample, "text", color=True)


def test_markdown_has_locations_and_fenced_diffs(rendered):
    md = rendered["md"]
    assert "| `models/gate.py::mend_target_gate` | 3 | 2 | 1 | 0 | 2 | 1.23 |  |" in md
    assert "- `models/gate.py:18` in `GateBlock.forward` ×2" in md
    assert "  ```diff\n  --- a/models/gate.py" in md
    assert "&lt;condition&gt; &amp; message" in md  # no raw HTML reaches the PR comment


def test_html_is_self_contained_and_escaped(rendered):
    html = rendered["html"]
    assert not re.search(r"https?://|(src|href)=|url\(|<script|<link|@import", html, re.I)
    assert "&lt;not traceable&gt;" in html and "<not traceable>" not in html
    assert html.count('class="graph-bar"') == 3 and html.count('class="bench-chart"') == 2


def test_github_escaping():
    assert escape_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"


def test_github_levels(rendered):
    lines = rendered["github"].splitlines()
    assert "::error file=models/gate.py,line=18,col=12,endColumn=22,title=GM101::`if` on a tensor value: Dynamo " \
        "breaks the graph here%0ADynamo: Data-dependent branching" in "\n".join(lines)
    assert any(ln.startswith("::warning file=models/guard.py,line=7,col=9") and "100%25, a:b" in ln for ln in lines)
    # a finding in a frame Dynamo skipped: a warning that names the break that hid it
    assert any(ln.startswith("::warning file=models/loop.py,line=12,") and "because of GM301 at models/loop.py:9" in ln
               for ln in lines)
    assert all(ln.startswith(("::error", "::warning", "::notice")) for ln in lines)
