"""What a rule is: one record holding everything about it.

Every module of ``rewrites/rules/`` but ``base`` and ``_util`` is a rule family (found by
``rewrites.rules``, nothing lists them) and defines

* ``RULES``: the :class:`Rule` records of the family: the documentation, the VALID (no
  finding) and INVALID (finding) example cases the test suite runs, the rule's dynamic
  identity (Dynamo's gb_types and wordings that mean it, for ``tracer.classify``) and the
  advice ``mend fix`` gives where it rewrites nothing;
* ``HOOKS``: ``{ast node type: [detector, ...]}``; a detector is called as
  ``detector(node, ctx)`` with a :class:`rewrites.analyzer.FunctionContext` and reports
  through ``ctx.report(code, node, variant=..., **fields)``: the finding's message and fix hint
  are the rule's templates (``message`` / ``hint``, or the variant's in ``messages`` /
  ``hints``) filled with ``fields``, never text written at the call;
* optionally ``OVERLAPS``: the other families (``"GM3"``) whose dynamic break on a line a
  finding of this family may stand for (a condition on ``t.item()`` is GM101 statically, and
  Dynamo may name it GM301), and ``NAMES_BREAKS``: this family's rank (0 first) among those
  whose finding names a break no rule explained (GM9xx) on its line.

The fix of a rule is a family of ``rewrites/fixes/`` that names the code in its ``RULES``;
``Rule.fixes`` finds it, and ``fix_kind`` / ``fixable`` follow from that family's cases (as
Fixit derives AUTOFIX), so the catalog cannot say a rule is fixed when no rewrite shows it.
Detection never needs libcst: only those three properties import the fixes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from graphmend import PROJECT_URL

GRAPH_BREAKS_INDEX = "https://docs.pytorch.org/docs/stable/compile/programming_model.graph_breaks_index.html"
# PyTorch's page on recompilation: what every GM7xx (recompile) rule links
RECOMPILATION = ("https://docs.pytorch.org/docs/main/user_guide/torch_compiler/compile/"
                 "programming_model.recompilation.html")
GB_SITE = "https://meta-pytorch.org/compile-graph-break-site/gb/{}.html"
RULE_DOC = PROJECT_URL + "/blob/main/docs/rules/{}.md"  # docs/rules/<CODE>.md, written by write_docs

# The categories, in family order, each with the short name a narrow table column uses.
CATEGORIES = {"control-flow": "control flow", "side-effect": "side effect", "host-scalar": "host scalar",
              "validation": "guard", "dynamic-shape": "dyn. shape", "unsupported-python": "unsupported",
              "recompile": "recompile", "unexplained": "other"}

SAFE = "safe"  # `mend fix` proposes a rewrite (and verifies it)
UNSAFE = "unsafe"  # only `mend fix --unsafe-fixes` does: the rewrite changes the program's cost


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
    # What a dynamic break of this rule looks like (tracer.classify): Dynamo's gb_types that
    # mean it whatever else the text says; regexes (any case) over Dynamo's text, tried rule
    # by rule in code order when the gb_type is none of those; regexes over the break's
    # source line, the last resort when Dynamo's words name no rule
    gb_types: tuple[str, ...] = ()
    message_patterns: tuple[str, ...] = ()
    source_patterns: tuple[str, ...] = ()
    # a recompile of this rule (GM7xx, tracer.classify.classify_recompile): regexes over the
    # failed guard in Dynamo's words, tried rule by rule in code order
    guard_patterns: tuple[str, ...] = ()
    # a recompile of this rule stops once the state its guard holds stops changing (a value,
    # an identity, a mode), whatever sizes later calls bring: one a fix adds may stay as
    # warm-up (graphmend.verify.run.warmup_refusal); not a size's or a length's
    settles: bool = False
    advice: str = ""  # the replacement code mend fix suggests where it rewrites nothing
    # What a static finding of this rule says (``ctx.report(code, node, variant=..., **fields)``):
    # ``message`` and its short fix ``hint`` are ``str.format`` templates over the fields the
    # detector passes. A rule with several wordings names each in ``messages`` (variant ->
    # template), with its hint in ``hints`` where it differs from ``hint``.
    message: str = ""
    hint: str = ""
    messages: dict[str, str] = field(default_factory=dict, hash=False)
    hints: dict[str, str] = field(default_factory=dict, hash=False)
    valid: tuple[str, ...] = ()  # sources that must give no finding of this rule
    invalid: tuple[str, ...] = ()  # sources that must give at least one finding of this rule
    static: bool = True  # False: documented only (GM9xx, reported by the tracer)
    breaks_in: str = "Dynamo"  # what fails there: Dynamo (a graph break) or Inductor (a compile)

    def render(self, variant: str = "", **fields: Any) -> tuple[str, str]:
        """A finding's message and fix hint: the templates of ``variant`` (``message`` and
        ``hint`` when none) filled with ``fields``."""
        text = self.messages[variant] if variant else self.message
        return text.format(**fields), self.hints.get(variant, self.hint).format(**fields)

    @property
    def fixes(self) -> tuple[str, ...]:
        """The fix families (modules of rewrites/fixes/) that rewrite this rule."""
        from rewrites.fixes import fixes_for

        return fixes_for(self.code)

    @property
    def fix_kind(self) -> Optional[str]:
        """SAFE when a case of one of its fixes rewrites without --unsafe-fixes, UNSAFE when
        only unsafe cases do, None when mend has advice only."""
        from rewrites.fixes import rewriting_cases

        safe, rewrites = rewriting_cases(self.code)
        return SAFE if safe else UNSAFE if rewrites else None

    @property
    def fixable(self) -> bool:
        return self.fix_kind is not None

    @property
    def links(self) -> tuple[str, ...]:
        if self.category == "recompile":
            return (RECOMPILATION,)
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
                "gb_ids": list(self.gb_ids), "gb_types": list(self.gb_types), "links": list(self.links),
                "guard_patterns": list(self.guard_patterns),
                "static": self.static,
                "fixable": self.fixable, "fix_kind": self.fix_kind, "advice": self.advice,
                "valid": list(self.valid), "invalid": list(self.invalid)}
