"""`mend rules` and `mend rules CODE`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graphmend.cli.app import app
from rewrites.rules import RULES

runner = CliRunner()


def test_rules_table_lists_every_code():
    out = runner.invoke(app, ["rules"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    for r in RULES:
        assert r.code in out.stdout


def test_rules_json():
    out = runner.invoke(app, ["rules", "--format", "json"])
    assert out.exit_code == 0
    data = json.loads(out.stdout)
    assert [d["code"] for d in data] == [r.code for r in RULES]
    assert all(d["links"] for d in data)


def test_one_rule_doc():
    out = runner.invoke(app, ["rules", "GM101", "--format", "md"])
    assert out.exit_code == 0
    assert "# GM101 tensor-condition-if" in out.stdout
    assert "Why Dynamo breaks here" in out.stdout and "gb0170" in out.stdout
    out = runner.invoke(app, ["rules", "gm301", "--format", "json"])
    assert json.loads(out.stdout)["name"] == "item-call"
    out = runner.invoke(app, ["rules", "GM301"], env={"COLUMNS": "120"})
    assert out.exit_code == 0 and "item-call" in out.stdout


def test_unknown_code_exit_2():
    out = runner.invoke(app, ["rules", "GM999"])
    assert out.exit_code == 2
    assert "unknown rule code 'GM999'" in out.output
    assert len(out.output.strip().splitlines()) == 1


def _flat(text: str) -> str:
    """Whitespace collapsed, table borders dropped: what a reader sees, however it wrapped."""
    return " ".join(text.replace("│", " ").split())


def _bracketed_code(text: str) -> list[str]:
    import re

    prose = re.sub(r"```.*?```", "", text, flags=re.S)  # inline code spans, not the example blocks
    return [span for span in re.findall(r"`([^`\n]+)`", prose) if "[" in span]


def test_rules_table_keeps_brackets_in_summaries():
    # rich markup would read `x[mask]` as "x" plus a [mask] style tag
    out = runner.invoke(app, ["rules"], env={"COLUMNS": "400"})
    assert out.exit_code == 0
    assert "(`x[mask]`)" in out.stdout
    with_brackets = [r for r in RULES if "[" in r.summary]
    assert with_brackets
    for r in with_brackets:
        assert _flat(r.summary) in _flat(out.stdout), r.code


def test_rule_doc_keeps_every_bracketed_code_span():
    out = runner.invoke(app, ["rules", "GM502"], env={"COLUMNS": "120"})
    assert out.exit_code == 0 and "x[mask]" in out.stdout and "x[mask].sum()" in out.stdout
    from graphmend.cli.rules import rule_markdown

    checked = 0
    for r in RULES:
        spans = _bracketed_code(rule_markdown(r))
        if not spans:
            continue
        shown = _flat(runner.invoke(app, ["rules", r.code], env={"COLUMNS": "200"}).stdout)
        for span in spans:
            assert _flat(span) in shown, (r.code, span)
            checked += 1
    assert checked >= 5
