"""Rule metadata for reports, read from the rule catalog in ``rewrites/`` when it is there.

Renderers that describe rules (SARIF's ``tool.driver.rules``, the HTML and Markdown
headings) ask here; without a catalog entry a rule is described by its code and category.
"""

from __future__ import annotations

from dataclasses import dataclass

PYTORCH_GRAPH_BREAKS_URI = "https://docs.pytorch.org/docs/stable/compile/programming_model.graph_breaks_index.html"


@dataclass(frozen=True)
class RuleMeta:
    code: str
    name: str = ""
    category: str = ""
    summary: str = ""
    description: str = ""
    help_uri: str = ""
    doc_uri: str = ""
    fix: str = ""
    gb_ids: tuple[str, ...] = ()  # Dynamo's graph-break registry ids (GB0170) the rule stands for


def _catalog_entry(code: str):
    """The catalog's object for ``code``, or None: the catalog is optional for reports."""
    try:
        from rewrites import catalog  # type: ignore[attr-defined]
    except Exception:  # absent or broken catalog: reports still render
        return None
    for attr in ("rule_info", "get_rule", "get", "lookup"):
        fn = getattr(catalog, attr, None)
        if callable(fn):
            try:
                return fn(code)
            except Exception:
                return None
    rules = getattr(catalog, "RULES", None) or getattr(catalog, "CATALOG", None)
    if isinstance(rules, dict):
        return rules.get(code)
    return None


def _text(obj, *names: str) -> str:
    for name in names:
        value = getattr(obj, name, None)
        if value:
            return str(value)
    return ""


def rule_meta(code: str, category: str = "") -> RuleMeta:
    entry = _catalog_entry(code)
    if entry is None:
        return RuleMeta(code=code, category=category)
    summary = _text(entry, "summary", "short", "title")
    return RuleMeta(
        code=code,
        name=_text(entry, "name", "slug"),
        category=_text(entry, "category", "family") or category,
        summary=summary,
        description=_text(entry, "description", "doc", "documentation") or summary,
        help_uri=_text(entry, "help_uri", "help_url", "url", "doc_url"),
        doc_uri=_text(entry, "doc_uri"),
        fix=_text(entry, "fix", "help"),
        gb_ids=tuple(str(g) for g in (getattr(entry, "gb_ids", None) or ()) if isinstance(g, str)),
    )
