"""``mend rules [CODE]``: the rule catalog, or one rule's documentation. No torch."""

from __future__ import annotations

import json
from enum import Enum
from typing import Optional

import typer

from graphmend.cli.common import emit, fail


class RulesFormat(str, Enum):
    text = "text"
    json = "json"
    md = "md"


def rule_markdown(rule) -> str:
    """One rule's full documentation as Markdown (also what docs/rules/<code>.md holds)."""
    lines = [f"# {rule.code} {rule.name}", "", f"*Category:* `{rule.category}`", "", rule.summary, "",
             "## Why Dynamo breaks here", "", rule.why, "", "## Fix", "", rule.fix, ""]
    if rule.preconditions:
        lines += ["## Preconditions", "", rule.preconditions, ""]
    if rule.fixable:
        from graphmend.verify import PROOF

        lines += ["## How mend verifies the fix", "", PROOF, ""]
    if rule.limits:
        lines += ["## Limits of the detector", "", rule.limits, ""]
    if rule.invalid:
        lines += ["## Reported (INVALID)", ""]
        for case in rule.invalid:
            lines += ["```python", case.rstrip("\n"), "```", ""]
    if rule.valid:
        lines += ["## Not reported (VALID)", ""]
        for case in rule.valid:
            lines += ["```python", case.rstrip("\n"), "```", ""]
    lines += ["## Links", ""] + [f"- <{u}>" for u in rule.links] + [""]
    return "\n".join(lines)


def rules(
    code: Optional[str] = typer.Argument(None, help="A rule code (GM101) to show in full."),
    format: RulesFormat = typer.Option(RulesFormat.text, "--format", "-f", help="Output format."),
) -> None:
    """List the rule catalog, or show one rule's documentation."""
    from rewrites.rules import RULES, get_rule

    if code is not None:
        rule = get_rule(code)
        if rule is None:
            raise fail(f"unknown rule code {code!r}; run 'mend rules' for the list")
        if format is RulesFormat.json:
            emit(json.dumps(rule.to_dict(), indent=2), None)
        elif format is RulesFormat.md:
            emit(rule_markdown(rule), None)
        else:
            from rich.console import Console
            from rich.markdown import Markdown

            Console(soft_wrap=False).print(Markdown(rule_markdown(rule)))
        return
    if format is RulesFormat.json:
        emit(json.dumps([r.to_dict() for r in RULES], indent=2), None)
        return
    if format is RulesFormat.md:
        rows = ["| code | name | category | summary |", "| --- | --- | --- | --- |"]
        rows += [f"| {r.code} | {r.name} | {r.category} | {r.summary} |" for r in RULES]
        emit("\n".join(rows), None)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="mend rules", title_justify="left")
    table.add_column("code", style="bold", no_wrap=True)
    table.add_column("name", no_wrap=True)
    table.add_column("category", no_wrap=True)
    table.add_column("summary")
    for r in RULES:
        # Text, not markup: a summary's `x[mask]` would lose "[mask]" as a style tag
        table.add_row(r.code, r.name, r.category, Text(r.summary + ("" if r.static else " (dynamic only)")))
    Console().print(table)


def write_docs(folder: str = "docs/rules") -> None:
    """Regenerate docs/rules/<CODE>.md and its index from the rule modules."""
    from pathlib import Path

    from rewrites.rules import RULES

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for r in RULES:
        (out / f"{r.code}.md").write_text(rule_markdown(r))
    idx = ["# Rules", "", "Generated from the rule modules in `rewrites/rules/` (`mend rules CODE --format md`); "
           "regenerate with", "`python -c \"from graphmend.cli.rules import write_docs; write_docs()\"`.", "",
           "| code | name | category | summary |", "| --- | --- | --- | --- |"]
    idx += [f"| [{r.code}]({r.code}.md) | {r.name} | {r.category} | {r.summary} |" for r in RULES]
    (out / "README.md").write_text("\n".join(idx) + "\n")
