"""Baseline keys, file format and comparison (graphmend.baseline), on Finding objects built
directly: no scanner, no torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphmend.baseline import (BaselineError, compare, dump_baseline, entries_from_findings, entries_from_targets,
                                load_baseline, normalize_source, updated_baseline)
from graphmend.core.model import Break, Finding, TargetResult


def finding(root: Path, line: int, source: str, rule: str = "GM201", fn: str = "Net.forward", file: str = "m.py"):
    return Finding(rule=rule, file=str(root / file), line=line, col=8, message=f"{rule} here", function=fn,
                   source_line=source, fix_hint="guard it")


def entries(root, *findings):
    return [e for e, _ in entries_from_findings(findings, root)]


def everything(_key):
    return True


def test_normalize_source_collapses_whitespace():
    assert normalize_source("    print( x,\t y )  \n") == "print(x,y)"
    assert normalize_source(None) == ""


def test_moving_code_keeps_it_known(tmp_path):
    base = updated_baseline(entries(tmp_path, finding(tmp_path, 10, "        print(x)")), {}, tmp_path, everything)
    moved = entries(tmp_path, finding(tmp_path, 42, "    print(x)"))  # other line, other indent
    result = compare(moved, base, tmp_path, everything, "b.json")
    assert result.new == [] and result.known == 1 and result.stale == []


def test_count_increase_is_new_and_reports_the_later_one(tmp_path):
    base = updated_baseline(entries(tmp_path, finding(tmp_path, 10, "print(x)")), {}, tmp_path, everything)
    now = entries(tmp_path, finding(tmp_path, 10, "print(x)"), finding(tmp_path, 30, "print(x)"))
    result = compare(now, base, tmp_path, everything, "b.json")
    assert [(e.line, e.rule, e.fix_hint, e.message) for e in result.new] == [(30, "GM201", "guard it", "GM201 here")]
    assert result.known == 1


def test_other_function_rule_or_line_text_is_new(tmp_path):
    base = updated_baseline(entries(tmp_path, finding(tmp_path, 10, "print(x)")), {}, tmp_path, everything)
    for f in (finding(tmp_path, 10, "print(x)", fn="Net.helper"), finding(tmp_path, 10, "print(x)", rule="GM202"),
              finding(tmp_path, 10, "print(y)"), finding(tmp_path, 10, "print(x)", file="other.py")):
        assert len(compare(entries(tmp_path, f), base, tmp_path, everything, "b").new) == 1


def test_stale_only_within_scope(tmp_path):
    base = updated_baseline(entries(tmp_path, finding(tmp_path, 1, "print(a)", file="a.py"),
                                    finding(tmp_path, 1, "print(b)", file="b.py")), {}, tmp_path, everything)
    only_a = lambda key: key[0] == "a.py"  # noqa: E731
    result = compare([], base, tmp_path, only_a, "b.json")
    assert [(e.file, e.source, e.count) for e in result.stale] == [(str(tmp_path / "a.py"), "print(a)", 1)]
    # update replaces a.py's entries and keeps b.py's
    assert updated_baseline([], base, tmp_path, only_a) == {k: v for k, v in base.items() if k[0] == "b.py"}


def test_dump_is_deterministic_sorted_and_round_trips(tmp_path):
    fs = [finding(tmp_path, 5, "print(z)", file="z.py"), finding(tmp_path, 3, "print(a)", file="a.py"),
          finding(tmp_path, 4, "print(a)", file="a.py")]
    one = dump_baseline(updated_baseline(entries(tmp_path, *fs), {}, tmp_path, everything))
    two = dump_baseline(updated_baseline(entries(tmp_path, *reversed(fs)), {}, tmp_path, everything))
    assert one == two and one.endswith("}\n")
    data = json.loads(one)
    assert [(e["file"], e["count"]) for e in data["entries"]] == [("a.py", 2), ("z.py", 1)]
    path = tmp_path / "b.json"
    path.write_text(one)
    assert dump_baseline(load_baseline(path)) == one


def test_missing_baseline_is_empty_and_corrupt_ones_raise(tmp_path):
    assert load_baseline(tmp_path / "nope.json") == {}
    for text, words in (("{not json", "not valid JSON"), ("[]", "not a mend baseline"),
                        ('{"entries": [{"file": "a.py"}]}', "entry 0"),
                        ('{"entries": [{"file": "a", "rule": "GM1", "function": "f", "source": "s", "count": 0}]}',
                         "count 0"), ('{"version": 9, "entries": []}', "version 9")):
        p = tmp_path / "bad.json"
        p.write_text(text)
        with pytest.raises(BaselineError, match=words) as info:
            load_baseline(p)
        assert str(p) in str(info.value) and "\n" not in str(info.value)


def test_finding_without_source_line_reads_the_file(tmp_path):
    (tmp_path / "m.py").write_text("def forward(x):\n    print(  x )\n")
    f = Finding(rule="GM201", file=str(tmp_path / "m.py"), line=2, col=4, message="print", function="forward")
    (e,) = entries(tmp_path, f)
    assert e.source == "print(x)" and e.origin == "static"


def test_dynamic_entries_dedupe_sites_and_key_apart_from_static(tmp_path):
    b = Break(rule="GM201", category="side-effect", reason="print", file=str(tmp_path / "m.py"), line=2,
              source_line="  print(x)", function="forward")
    targets = [TargetResult(name="m.py::mend_target_a", file="m.py", function="mend_target_a", breaks=[b]),
               TargetResult(name="m.py::mend_target_b", file="m.py", function="mend_target_b", breaks=[b])]
    dyn = entries_from_targets(targets)
    assert len(dyn) == 1 and dyn[0].origin == "dynamic" and dyn[0].source == "print(x)"
    static = entries(tmp_path, finding(tmp_path, 2, "print(x)", fn="forward"))
    base = updated_baseline(static, {}, tmp_path, everything)
    # the static entry does not make the dynamic break known
    assert len(compare(dyn, base, tmp_path, everything, "b").new) == 1


def test_spacing_a_formatter_changes_keeps_an_entry_known(tmp_path):
    """``0:`` -> ``0 :`` (what formatters do to slices) is neither new nor stale."""
    (tmp_path / "m.py").write_text("def forward(x):\n    y = x[0:].item()\n")
    f = Finding(rule="GM301", file=str(tmp_path / "m.py"), line=2, col=8, message="item", function="forward",
                source_line="    y = x[0:].item()")
    baseline = updated_baseline([e for e, _ in entries_from_findings([f], tmp_path)], {}, tmp_path, lambda k: True)
    g = Finding(rule="GM301", file=str(tmp_path / "m.py"), line=2, col=8, message="item", function="forward",
                source_line="    y = x[0 :].item( )")
    result = compare([e for e, _ in entries_from_findings([g], tmp_path)], baseline, tmp_path, lambda k: True, "b")
    assert (result.known, result.new, result.stale) == (1, [], [])
    # tokens still tell code apart, and strings keep their spaces
    assert normalize_source("y = x[0:].item()") != normalize_source("y = x[1:].item()")
    assert normalize_source('s = "a  b"') != normalize_source('s = "a b"')
    assert normalize_source("return not x") == "return not x"


def test_baseline_written_with_whitespace_keys_still_matches(tmp_path):
    """Baselines before token keys stored the whitespace-collapsed line: read, they are
    normalised again (the normalisation is idempotent), so they match today's keys."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": 1, "entries": [
        {"file": "m.py", "rule": "GM301", "function": "forward", "source": "y = x[0 :].item( )",
         "origin": "static", "count": 1}]}))
    f = Finding(rule="GM301", file=str(tmp_path / "m.py"), line=2, col=8, message="item", function="forward",
                source_line="    y = x[0:].item()")
    result = compare([e for e, _ in entries_from_findings([f], tmp_path)], load_baseline(old), tmp_path,
                     lambda k: True, "b")
    assert (result.known, result.new, result.stale) == (1, [], [])
    for text in ("if x.sum() > 0:", 'x = """unclosed  doc', "foo(a,", "print(*args, **kwargs)  # c"):
        assert normalize_source(normalize_source(text)) == normalize_source(text)
