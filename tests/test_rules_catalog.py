"""Every rule's own VALID / INVALID cases, and the catalog against docs/internals.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rewrites.rules import RULES, RULES_BY_CODE, get_rule
from rewrites.rules.base import CATEGORIES
from rewrites.scan import scan_source

CASES = [(r.code, "invalid", i, c) for r in RULES for i, c in enumerate(r.invalid)] + \
        [(r.code, "valid", i, c) for r in RULES for i, c in enumerate(r.valid)]


@pytest.mark.parametrize("code,kind,i,source", CASES, ids=[f"{c}-{k}{i}" for c, k, i, _ in CASES])
def test_rule_case(code, kind, i, source):
    result = scan_source(source, path="case.py")
    assert result.error is None
    codes = [f.rule for f, _key, _root in result.findings]
    if kind == "invalid":
        assert code in codes, f"{code} missed:\n{source}"
    else:
        assert code not in codes, f"{code} false positive:\n{source}"


def test_codes_and_categories_match_internals():
    text = (Path(__file__).resolve().parents[1] / "docs" / "internals.md").read_text()
    documented = dict(re.findall(r"^\| (GM\d{3}) \| [^|]+\| ([a-z-]+) \|$", text, re.M))
    assert documented, "rule table not found in docs/internals.md"
    assert {r.code: r.category for r in RULES} == documented


def test_every_rule_is_documented_and_tested():
    for r in RULES:
        assert r.category in CATEGORIES
        assert r.summary and r.why and r.fix, r.code
        assert all(u.startswith("https://") for u in r.links)
        if r.static:
            assert r.valid and r.invalid, f"{r.code} needs VALID and INVALID cases"
    assert get_rule("gm101") is RULES_BY_CODE["GM101"]
    assert get_rule("GM999") is None


def test_catalog_for_reports():
    from rewrites import catalog

    info = catalog.rule_info("GM201")
    assert info.name == "print-call" and info.help_uri.startswith("https://")


def test_rule_docs_are_current(tmp_path):
    # docs/rules/ is generated from the rule modules; a rule edited without regenerating
    # leaves users reading the old fix advice
    from pathlib import Path

    from graphmend.cli.rules import write_docs

    write_docs(str(tmp_path))
    shipped = Path(__file__).resolve().parent.parent / "docs" / "rules"
    stale = [p.name for p in sorted(tmp_path.iterdir())
             if not (shipped / p.name).exists() or (shipped / p.name).read_text() != p.read_text()]
    assert not stale, f"regenerate docs/rules ({stale}): python -c 'from graphmend.cli.rules import write_docs; write_docs()'"
