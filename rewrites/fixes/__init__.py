"""Source repairs: libcst transforms, one module per rule family.

``fix_source(text, lines=None, rules=(), tensor_lines=())`` plans every family's edits on
the original tree and applies them in one pass; it returns the new text, the sites it
rewrote and the findings it refused (with the reason). Nothing here imports torch, and
nothing here decides a fix is SAFE: ``graphmend.verify`` does, by running it.

Every module of this package but ``SUPPORT`` is a fix family, found by ``family_modules()``
(nothing lists them): it holds ``RULES`` (the codes it rewrites), ``ORDER`` (where it plans
among the others), ``plan(analysis, context) -> Plan`` and ``CASES``, its examples
(:class:`rewrites.fixes.base.Case`), which ``tests/rewrites/test_fix_cases.py`` runs.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Iterable, Optional, Sequence

TOO_DEEP = "expression nested too deeply to rewrite (RecursionError); file left unchanged"

# What the families share; every other module here is a family.
SUPPORT = frozenset({"base", "conditions", "dispatch_flow", "facts", "judgements", "layout", "op_sites",
                     "opaque_region", "python_parts", "runtime", "total", "where_arms", "where_decision"})


@functools.lru_cache(maxsize=None)
def family_modules() -> tuple[ModuleType, ...]:
    """Every fix family, in ``ORDER``: a family that rewrites a whole statement claims it, and
    a later family's edits inside it are dropped (GM4 turns an ``if ...: raise`` GM1 would
    refuse), so the order decides between two families that match one statement."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in SUPPORT)
    return tuple(sorted((importlib.import_module(f"{__name__}.{n}") for n in names), key=lambda m: m.ORDER))


def fixes_for(code: str) -> tuple[str, ...]:
    """The families whose ``RULES`` name ``code`` (``Rule.fixes``)."""
    return tuple(m.__name__.rsplit(".", 1)[1] for m in family_modules() if code in m.RULES)


@functools.lru_cache(maxsize=None)
def rewriting_cases(code: str) -> tuple[bool, bool]:
    """(whether a case of a family fixing ``code`` rewrites without --unsafe-fixes, whether
    any case rewrites at all): what ``Rule.fix_kind`` is derived from. A family fixing several
    rules names those it rewrites only unsafely in ``UNSAFE_RULES`` (tests/rewrites/test_rules_catalog.py
    holds it to its cases)."""
    families = [m for m in family_modules() if code in m.RULES]
    rewrites = [(m, c) for m in families for c in m.CASES if c.after is not None]
    return any(not c.unsafe and code not in getattr(m, "UNSAFE_RULES", ()) for m, c in rewrites), bool(rewrites)


@dataclass
class FixResult:
    source: str
    new_source: str
    applied: list = field(default_factory=list)  # [base.Site]
    refused: list = field(default_factory=list)  # [base.Refusal]
    error: Optional[str] = None

    @property
    def changed(self) -> bool:
        return self.new_source != self.source


def fix_source(source: str, lines: Optional[Iterable[int]] = None, rules: Sequence[str] = (),
               tensor_lines: Iterable[int] = (), shape_lines: Iterable[int] = (),
               numpy_lines: Iterable[int] = (), unsafe: bool = False, line_length: int = 88,
               module: str = "", state_lines: Iterable[int] = (), index_lines: Iterable[int] = ()) -> FixResult:
    """Rewrite ``source``; ``lines`` limits the rewrites to statements covering those lines.
    ``tensor_lines``: Dynamo said a tensor decided a branch there; ``shape_lines``: Dynamo
    said an op's output shape depended on data there (a boolean-mask index);
    ``numpy_lines``: a NumPy call there computed a value a branch depended on;
    ``state_lines``: Dynamo recompiled because an attribute's number read there changed;
    ``index_lines``: Dynamo read a tensor's value into Python there to index with it; ``unsafe``:
    also plan the fixes that change the program's cost (GM501/GM502 dense expert dispatch);
    ``line_length``: the project formatter's, the width new code is laid out in; ``module``: the
    file's module name, which the custom ops of opaque regions are named after."""
    import libcst as cst

    from rewrites.fixes.base import Context

    try:
        an = _analysis(source)
    except cst.ParserSyntaxError as exc:
        return FixResult(source, source, error=f"syntax error at line {exc.raw_line}: {exc.message}")
    except RecursionError:  # libcst recurses per nesting level, where Python's own parser does not
        return FixResult(source, source, error=TOO_DEEP)
    ctx = Context(lines=set(lines) if lines is not None else None, rules=tuple(rules),
                  tensor_lines=set(tensor_lines), shape_lines=set(shape_lines), numpy_lines=set(numpy_lines),
                  state_lines=set(state_lines), index_lines=set(index_lines), unsafe=unsafe, module=module)
    try:
        return _fix(an, ctx, source, line_length)
    except RecursionError:
        return FixResult(source, source, error=TOO_DEEP)
    except Exception as exc:  # a transform bug on one file never stops the run
        return FixResult(source, source, error=f"rewrite failed ({type(exc).__name__}: {exc}); file left unchanged")


_ANALYSES: "dict[str, object]" = {}  # source -> its Analysis, the last few (a run plans one file many times)
_ANALYSES_KEPT = 4
_ANALYSES_LOCK = threading.Lock()


def _analysis(source: str):
    """The parsed ``source`` with its metadata (read-only to every planner): verification
    plans a file once per set of rewrites it tries, and parsing a big file takes seconds."""
    from rewrites.fixes.base import Analysis

    with _ANALYSES_LOCK:
        an = _ANALYSES.get(source)
    if an is None:
        an = Analysis(source)
        with _ANALYSES_LOCK:
            _ANALYSES[source] = an
            while len(_ANALYSES) > _ANALYSES_KEPT:
                _ANALYSES.pop(next(iter(_ANALYSES)))
    return an


def _fix(an, ctx, source: str, line_length: int = 88) -> FixResult:
    import libcst as cst

    from rewrites.fixes.base import REGION, apply_edits

    edits, refused = [], []
    claimed: list[tuple[int, int]] = []
    whole: list[tuple[int, int]] = []  # regions an earlier family replaced whole (GM5 opaque ops)
    for mod in family_modules():
        p = mod.plan(an, ctx)
        mine: list[tuple[int, int]] = []
        dropped = False  # an edit without a site is part of the rewrite before it: it goes with that one
        for e in p.edits:
            if e.site is None and dropped:
                continue
            dropped = e.site is not None
            if whole and any(a <= an.span(e.node)[0] and an.span(e.node)[1] <= b for a, b in whole):
                continue
            # one statement, one family: a later family never rewrites inside an earlier one's
            # statement-level rewrite (GM4 turns an ``if ...: raise`` that GM1 would refuse)
            if e.site is not None and e.site.claims:
                span = (e.site.line, e.site.end_line)
                if any(a <= span[0] <= b or span[0] <= a <= span[1] for a, b in claimed):
                    continue
                claimed.append(span)
                if e.site.claims == REGION:
                    mine.append(span)
            dropped = False
            edits.append(e)
        whole += mine
        # an earlier family's refusal inside a region this one made is answered by it; an unsafe
        # fix a later family offers inside an opaque region stays said: verification may still
        # reject the opaque op (dropout inside the region: its backward draws anew)
        refused = [r for r in refused if "--unsafe-fixes" in r.advice or not any(a <= r.line <= b for a, b in mine)]
        refused.extend(r for r in p.refusals
                       if not any(a <= r.line <= b for a, b in claimed)
                       or ("--unsafe-fixes" in r.advice and any(a <= r.line <= b for a, b in whole)))
    new = apply_edits(an, edits, line_length)
    try:
        cst.parse_module(new)
    except cst.ParserSyntaxError as exc:  # never hand back a file that does not parse
        return FixResult(source, source, refused=refused, error=f"rewrite produced invalid code: {exc.message}")
    applied = sorted((e.site for e in edits if e.site is not None), key=lambda s: s.line)
    return FixResult(source, new, applied, sorted(refused, key=lambda r: r.line))
