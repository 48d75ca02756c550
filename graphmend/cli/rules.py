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
    """One rule's full documentation as Markdown (also what docs/rules/<code>.md holds), with
    how its fix is verified when it has one."""
    from graphmend.verify import PROOF
    from reports.rule_docs import rule_page

    return rule_page(rule, PROOF if rule.fixable else "")


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
    from reports.rule_docs import catalog_markdown, catalog_table

    if format is RulesFormat.md:
        emit(catalog_markdown(RULES), None)
        return
    from rich.console import Console

    Console().print(catalog_table(RULES))


def write_docs(folder: str = "docs/rules") -> None:
    """Regenerate docs/rules/<CODE>.md and its index from the rule modules."""
    from pathlib import Path

    from reports.rule_docs import catalog_index
    from rewrites.rules import RULES

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for r in RULES:
        (out / f"{r.code}.md").write_text(rule_markdown(r))
    (out / "README.md").write_text(catalog_index(RULES))
