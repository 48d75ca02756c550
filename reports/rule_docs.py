"""The rule catalog as documentation: one rule's page (``mend rules CODE --format md``,
docs/rules/CODE.md), the catalog as a Markdown table, as its docs/rules/README.md index and
as the terminal table of ``mend rules``. Formatting only: the records are ``rewrites.rules``';
how a rule's fix is verified, when it has one, is the caller's to say (``proof``)."""

from __future__ import annotations

from typing import Any, Sequence

REGENERATE = "`python -c \"from graphmend.cli.rules import write_docs; write_docs()\"`."


def rule_page(rule: Any, proof: str = "") -> str:
    """One rule's full documentation as Markdown; ``proof``: how mend verifies its fix."""
    lines = [f"# {rule.code} {rule.name}", "", f"*Category:* `{rule.category}`", "", rule.summary, "",
             f"## Why {rule.breaks_in} {'recompiles' if rule.category == 'recompile' else 'breaks'} here", "",
             rule.why, "", "## Fix", "", rule.fix, ""]
    if rule.preconditions:
        lines += ["## Preconditions", "", rule.preconditions, ""]
    if proof:
        lines += ["## How mend verifies the fix", "", proof, ""]
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


def catalog_markdown(rules: Sequence[Any]) -> str:
    rows = ["| code | name | category | summary |", "| --- | --- | --- | --- |"]
    rows += [f"| {r.code} | {r.name} | {r.category} | {r.summary} |" for r in rules]
    return "\n".join(rows)


def catalog_index(rules: Sequence[Any]) -> str:
    """docs/rules/README.md: the catalog, each code linking to its page."""
    idx = ["# Rules", "", "Generated from the rule modules in `rewrites/rules/` (`mend rules CODE --format md`); "
           "regenerate with", REGENERATE, "",
           "| code | name | category | summary |", "| --- | --- | --- | --- |"]
    idx += [f"| [{r.code}]({r.code}.md) | {r.name} | {r.category} | {r.summary} |" for r in rules]
    return "\n".join(idx) + "\n"


def catalog_table(rules: Sequence[Any]) -> Any:
    """The catalog as a rich ``Table`` (the command prints it)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="mend rules", title_justify="left")
    table.add_column("code", style="bold", no_wrap=True)
    table.add_column("name", no_wrap=True)
    table.add_column("category", no_wrap=True)
    table.add_column("summary")
    for r in rules:
        # Text, not markup: a summary's `x[mask]` would lose "[mask]" as a style tag
        table.add_row(r.code, r.name, r.category, Text(r.summary + ("" if r.static else " (dynamic only)")))
    return table
