"""Break-message parsing and classification on recorded messages (no torch run)."""
import json
from pathlib import Path

import pytest

from tracer.classify import category_of, classify
from tracer.messages import parse_log_record, parse_reason, parse_recompile

FIXTURES = Path(__file__).parent / "fixtures" / "messages"
CASES = [c for f in sorted(FIXTURES.glob("*.json")) for c in json.loads(f.read_text())]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['torch']}-{c['case']}" for c in CASES])
def test_recorded_message(case):
    if case.get("kind", "record") == "record":
        p = parse_log_record(case["text"])
        assert p is not None and p.file and p.line
        assert p.stack and p.stack[-1].line == p.line
    else:
        p = parse_reason(case["text"])
    assert p.gb_type == case["gb_type"]
    if case["gb_type"]:
        assert p.reason == case["gb_type"]
        assert p.explanation
    if case["registry_id"] and "/gb/" in case["text"]:
        assert p.registry_id == case["registry_id"]
    assert p.frame_skipped == case.get("frame_skipped", False)
    rule = classify(p.gb_type, p.message, case["source_line"], case.get("following", []), p.frame_skipped)
    assert rule == case["rule"]
    assert category_of(rule) != "unexplained" or rule.startswith("GM9")


def test_fixtures_cover_several_versions():
    assert len({c["torch"] for c in CASES}) >= 4


def test_duplicate_record_and_hints():
    p = parse_log_record("Graph break (user stack suppressed due to duplicate graph break) in user code at /a/b.py:12\n"
                         "Graph Break Reason: Data-dependent branching\n  Explanation: e\n  Hint: h1\n  Hint: h2\n")
    assert p.duplicate and (p.file, p.line) == ("/a/b.py", 12) and p.hints == ["h1", "h2"]
    assert parse_log_record("some other debug line") is None


def test_caret_column():
    p = parse_log_record('Graph break in user code at /m.py:3\nGraph Break Reason: x\n\nUser code traceback:\n'
                         '  File "/m.py", line 3, in f\n    if y.sum() > 0:\n       ^^^^^^^^^^^^\n')
    assert p.stack[-1].caret_col == 3 and p.stack[-1].source_line == "if y.sum() > 0:"


def test_recompile():
    r = parse_recompile("Recompiling function f in /s.py:3\n    triggered by the following guard failure(s):\n"
                        "    - 0/0: tensor 'x' rank mismatch. expected 1, actual 2")
    assert r["function"] == "f" and r["line"] == 3 and "rank mismatch" in r["reason"]


@pytest.mark.parametrize("src,following,rule", [
    ("while x.sum() > 0:", [], "GM104"), ("y = a if t.any() else b", [], "GM102"),
    ("ok = t.any() and flag", [], "GM103"), ("if torch.equal(a, b):", ["    raise X"], "GM402"),
    ("n = int(t)", [], "GM303"),
])
def test_source_line_decides(src, following, rule):
    gb = "Unsupported Tensor.item() call with capture_scalar_outputs=False" if rule == "GM303" else "Data-dependent branching"
    assert classify(gb, gb, src, following) == rule
