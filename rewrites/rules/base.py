"""What a rule is: its documentation, its example cases and (later) its fix.

Every family module (``gm1_control_flow`` ... ``gm6_unsupported``) defines

* ``RULES``: the :class:`Rule` records of the family, each with VALID (no finding) and
  INVALID (finding) example cases that the test suite runs;
* ``HOOKS``: ``{ast node type: [detector, ...]}``; a detector is called as
  ``detector(node, ctx)`` with a :class:`rewrites.analyzer.FunctionContext` and reports
  through ``ctx.report(code, node, message, fix_hint)``.

A libcst fix transform is added beside a detector by setting ``Rule.transform`` (for
example ``RULE = replace(RULE, transform=MyTransformer)`` in the family module, or by
assigning ``FIXES = {"GM101": MyTransformer}``, which :mod:`rewrites.rules` merges) and
the rewritten cases in ``Rule.fixed`` as ``(before, after)`` pairs. Detection never needs
libcst.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from graphmend import PROJECT_URL

GRAPH_BREAKS_INDEX = "https://docs.pytorch.org/docs/stable/compile/programming_model.graph_breaks_index.html"
GB_SITE = "https://meta-pytorch.org/compile-graph-break-site/gb/{}.html"
RULE_DOC = PROJECT_URL + "/blob/main/docs/rules/{}.md"  # docs/rules/<CODE>.md, written by write_docs

CATEGORIES = ("control-flow", "side-effect", "host-scalar", "validation", "dynamic-shape",
              "unsupported-python", "unexplained")


def gb_link(gb_id: str) -> str:
    """The per-gb_type page of PyTorch's graph-break site (``gb_id`` like ``GB0170``)."""
    return GB_SITE.format(gb_id.lower())


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    category: str
    summary: str  # one line
    why: str  # why Dynamo breaks there
    fix: str  # the fix strategy
    preconditions: str = ""  # when the automatic fix applies
    limits: str = ""  # what the detector cannot see
    gb_ids: tuple[str, ...] = ()  # ids in torch/_dynamo/graph_break_registry.json
    valid: tuple[str, ...] = ()  # sources that must give no finding of this rule
    invalid: tuple[str, ...] = ()  # sources that must give at least one finding of this rule
    fixed: tuple[tuple[str, str], ...] = ()  # (before, after) for the fix transform
    transform: Optional[Any] = None  # a libcst transform class, added by the fixer
    static: bool = True  # False: documented only (GM9xx, reported by the tracer)

    @property
    def links(self) -> tuple[str, ...]:
        return tuple(gb_link(g) for g in self.gb_ids) + (GRAPH_BREAKS_INDEX,)

    @property
    def doc_uri(self) -> str:
        """This rule's documentation in the repository (what ``mend rules CODE`` prints)."""
        return RULE_DOC.format(self.code)

    @property
    def help_uri(self) -> str:
        """SARIF's ``helpUri``: the graph-break site's page for the rule's first gb id, the
        rule's own doc when Dynamo has no single id for it (GM900)."""
        return gb_link(self.gb_ids[0]) if self.gb_ids else self.doc_uri

    @property
    def description(self) -> str:
        return f"{self.summary} {self.why}"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "category": self.category,
                "summary": self.summary, "why": self.why, "fix": self.fix,
                "preconditions": self.preconditions, "limits": self.limits,
                "gb_ids": list(self.gb_ids), "links": list(self.links), "static": self.static,
                "fixable": self.transform is not None,
                "valid": list(self.valid), "invalid": list(self.invalid)}
