"""What every fix family shares: the records a transform returns, the one-pass applier
and import/helper insertion. The small static judgements the families' preconditions are
built from (is this expression a tensor? is it pure?) are in ``judgements``, the facts
about a function's names in ``facts``.

A family plans edits on the ORIGINAL tree (positions from libcst's PositionProvider);
``apply_edits`` then rewrites the tree in a single pass, replacing nodes by identity, so
that line numbers the planners saw are the lines of the file on disk and edits nested in
one another (a GM3 ``.item()`` inside a GM1 condition) compose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider

from rewrites.fixes.judgements import code


@dataclass
class Site:
    """One rewrite that was applied to the source (lines of the original file)."""

    rule: str
    line: int
    end_line: int
    description: str
    # Expressions whose truth value picks an arm, as (line, col, end_line, end_col) in the
    # ORIGINAL source; verification records which arm each of them took.
    conditions: list[tuple[int, int, int, int]] = field(default_factory=list)
    strategy: str = ""  # "where" | "cond" | "defer" | "guard" | "assert_async" | ...
    # what the rewrite changes that verification may never see (its family's documented
    # caveat): planned only with --unsafe-fixes (offer_unsafe), reported as partially verified
    caveat: str = ""
    # what the rewrite claims of the source around it: STATEMENT (one statement, one family: a
    # later family's statement-level rewrite overlapping these lines is dropped) or REGION (also
    # every later family's edit inside these lines); "" claims nothing beyond its own nodes
    claims: str = ""


STATEMENT, REGION = "statement", "region"


@dataclass
class Refusal:
    """A finding this family recognised but would not rewrite, and why."""

    rule: str
    line: int
    reason: str
    advice: str = ""


@dataclass(frozen=True)
class Helper:
    """A module-level function a fix defines once in the file it rewrites (``_mend_print``),
    after the imports. Its name has mend's prefix (``rewrites.guards.MEND_HELPER_PREFIX``),
    by which the detectors know its body is a repair, not a break."""

    source: str
    # helpers this one calls, defined in the file before it (once, whoever else needs them)
    requires: tuple["Helper", ...] = ()

    def __post_init__(self) -> None:
        from rewrites.guards import MEND_HELPER_PREFIX

        if not self.name.startswith(MEND_HELPER_PREFIX):
            raise ValueError(f"helper {self.name!r}: mend's helpers are named {MEND_HELPER_PREFIX}*")

    @property
    def name(self) -> str:
        return re.match(r"def (\w+)", self.source).group(1)  # type: ignore[union-attr]

    def with_required(self) -> list["Helper"]:
        """This helper after every helper it requires (theirs first), each once."""
        out: list[Helper] = []
        for h in self.requires:
            out += [r for r in h.with_required() if r not in out]
        return out + [self]

    @property
    def text(self) -> str:
        """What a file that needs this helper gets: the required helpers' source, then its own."""
        return "\n\n".join(h.source for h in self.with_required())


@dataclass
class Edit:
    """Replace ``node`` (a node of the original tree) by ``build(updated_node)``."""

    node: cst.CSTNode
    build: Callable[[cst.CSTNode], object]  # -> node | FlattenSentinel | RemovalSentinel
    site: Optional[Site] = None
    needs_torch: bool = True
    helpers: tuple[Helper, ...] = ()  # module-level functions the new code calls
    imports: tuple[str, ...] = ()  # plain ``import x`` the new code needs (besides torch)


@dataclass
class Plan:
    edits: list[Edit] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)


@dataclass
class Context:
    """What the planners may rely on. ``lines``: only statements covering one of these
    (original) lines are rewritten (None: every match). ``rules``: selected codes or prefixes."""

    lines: Optional[set[int]] = None
    rules: Sequence[str] = ()
    # lines where Dynamo itself said "a tensor decided a branch": the condition is a tensor
    # even where the source alone cannot tell
    tensor_lines: set[int] = field(default_factory=set)
    # lines where Dynamo said "dynamic shape operator": an index there is a boolean mask
    shape_lines: set[int] = field(default_factory=set)
    # lines that computed, with NumPy, a value a data-dependent branch then read (torch 2.13
    # names them in the break's explanation)
    numpy_lines: set[int] = field(default_factory=set)
    # lines where Dynamo recompiled because a Python number read there (an attribute of
    # ``self``) had another value: the guard ``self.step == 3`` failed
    state_lines: set[int] = field(default_factory=set)
    # lines where Dynamo read a tensor's value into Python to index with it (GM303: ``x[i]``
    # with ``i`` a 0-d integer tensor, ``__index__``)
    index_lines: set[int] = field(default_factory=set)
    # fixes that keep the outputs but change the program's cost (ruff's "unsafe fixes"):
    # planned only when the user asked for them
    unsafe: bool = False
    # the file's module name (its stem): what the code a fix adds is named after (mend::<module>_...)
    module: str = ""

    def wants(self, code: str) -> bool:
        return not self.rules or any(code.startswith(r) for r in self.rules)

    def covers(self, start: int, end: int) -> bool:
        return self.lines is None or any(start <= l <= end for l in self.lines)


HINTS = ("tensor", "shape", "numpy", "state", "index")  # what Dynamo may say about a line (fix_source's <hint>_lines)


@dataclass(frozen=True)
class Case:
    """One example of what a fix family does; tests/rewrites/test_fix_cases.py runs every family's
    ``CASES`` (as Fixit runs a rule's VALID and INVALID cases).

    ``fix_source(before, lines=lines, unsafe=unsafe, ...)`` gives ``after``, and running it
    again changes nothing; a case without ``after`` is left unchanged by its family, with a
    refusal whose reason holds ``reason`` when one is given. ``lines``: where Dynamo broke
    (None: anywhere); ``hints``: what Dynamo said there (``"shape"``: a data-dependent output
    shape, ``"numpy"``: a NumPy value a branch read, ``"tensor"``: a tensor decided a branch,
    ``"state"``: a recompile on the value of an attribute read there, ``"index"``: a tensor read
    into Python as an index there),
    without which the rewrite is not made; ``unsafe``: run with ``--unsafe-fixes`` (a rewrite
    then is refused without the flag, naming it). A family whose cases rewrite is a fix for
    its ``RULES``: safe, or unsafe when only unsafe cases rewrite."""

    before: str
    after: Optional[str] = None
    lines: Optional[frozenset[int]] = None
    hints: tuple[str, ...] = ()
    unsafe: bool = False
    reason: Optional[str] = None
    line_length: int = 88  # the formatter's width the case is laid out in

    def __post_init__(self) -> None:
        if self.lines is not None:
            object.__setattr__(self, "lines", frozenset(self.lines))
        unknown = set(self.hints) - set(HINTS)
        if unknown:
            raise ValueError(f"unknown hint {sorted(unknown)}: one of {HINTS}")

    def options(self, unsafe: Optional[bool] = None, hints: bool = True) -> dict:
        """``fix_source``'s keyword arguments for this case (``unsafe``, ``hints``: overridden)."""
        lines = None if self.lines is None else set(self.lines)
        out = {"lines": lines, "unsafe": self.unsafe if unsafe is None else unsafe, "line_length": self.line_length}
        for h in self.hints if hints else ():
            out[f"{h}_lines"] = lines
        return out


class Analysis:
    """The parsed original with metadata, shared by all planners."""

    def __init__(self, source: str):
        self.module = cst.parse_module(source)
        self.wrapper = cst.MetadataWrapper(self.module, unsafe_skip_copy=True)
        self.pos = self.wrapper.resolve(PositionProvider)
        self.parents = self.wrapper.resolve(ParentNodeProvider)

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        r = self.pos[node]
        return r.start.line, r.end.line

    def rng(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        r = self.pos[node]
        return r.start.line, r.start.column, r.end.line, r.end.column

    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.parents.get(node)

    def visit_covering(self, visitor: cst.CSTVisitor, ctx: "Context") -> None:
        """``self.module.visit(visitor)``, skipping every statement that covers none of
        ``ctx.lines``: for a planner that keeps only nodes ``ctx.covers`` (each such node is
        inside a statement covering one of the lines), the same finds, in a fraction of the
        walk. A planner that reads facts from other statements walks the whole module."""
        if ctx.lines is None:
            self.module.visit(visitor)
        else:
            self.module.visit(_Covering(visitor, self, ctx))

    def findall(self, what, ctx: "Context") -> list:
        """The nodes matching ``what`` (a libcst matcher, or a node class) that
        :meth:`visit_covering` reaches, in source order."""
        from libcst import matchers

        out: list = []

        class Collect(cst.CSTVisitor):
            def on_visit(self, node: cst.CSTNode) -> bool:
                if isinstance(what, type) and isinstance(node, what) or not isinstance(what, type) and \
                        matchers.matches(node, what):
                    out.append(node)
                return True

        self.visit_covering(Collect(), ctx)
        return out

    def enclosing_function(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        p = self.parent(node)
        while p is not None and not isinstance(p, cst.FunctionDef):
            p = self.parent(p)
        return p

    def in_loop(self, node: cst.CSTNode) -> bool:
        """``node`` is inside a ``for`` / ``while`` of its own function."""
        p = self.parent(node)
        while p is not None and not isinstance(p, cst.FunctionDef):
            if isinstance(p, (cst.For, cst.While)):
                return True
            p = self.parent(p)
        return False


class _Covering(cst.CSTVisitor):
    """Delegates to ``inner`` on every node but the statements covering none of the lines
    (and what they hold)."""

    def __init__(self, inner: cst.CSTVisitor, an: Analysis, ctx: "Context"):
        super().__init__()
        self.inner, self.an, self.ctx = inner, an, ctx

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and not self.ctx.covers(
                *self.an.span(node)):
            return False
        return self.inner.on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and not self.ctx.covers(
                *self.an.span(original_node)):
            return
        self.inner.on_leave(original_node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.inner.on_visit_attribute(node, attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.inner.on_leave_attribute(original_node, attribute)


# -- applying --------------------------------------------------------------------------

class _Ids(cst.CSTVisitor):
    def __init__(self) -> None:
        self.ids: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.ids.add(id(node))
        return True


class _Apply(cst.CSTTransformer):
    """Each edit's replacement, laid out as a formatter would (``layout``): what a fix built is
    written formatted; a statement an edit changed only in part is re-laid out when it no
    longer fits its line."""

    def __init__(self, edits: dict[int, Edit], default_indent: str, width: int, inside: set[int]):
        super().__init__()
        self.edits = edits
        self.inside = inside  # the edited nodes and their ancestors: nothing else needs a visit
        self.width = width
        self.indent = len(default_indent)
        self.blocks: list[int] = []  # the indentation the enclosing blocks add
        self.touched: list[bool] = []  # per enclosing statement: an expression inside was rewritten

    def on_visit(self, node) -> bool:  # type: ignore[override]
        if isinstance(node, cst.IndentedBlock):
            self.blocks.append(len(node.indent) if node.indent is not None else self.indent)
        elif isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.touched.append(False)
        return id(node) in self.inside

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        from rewrites.fixes.layout import lay_out_built, refit

        if isinstance(original_node, cst.IndentedBlock):
            self.blocks.pop()
        statement = isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        touched = self.touched.pop() if statement else False
        base = sum(self.blocks)
        e = self.edits.get(id(original_node))
        if e is None:
            return refit(updated_node, base, self.width) if touched else updated_node
        if not statement:
            if self.touched:
                self.touched[-1] = True
            return e.build(updated_node)
        ids = _Ids()
        updated_node.visit(ids)
        return lay_out_built(e.build(updated_node), base, ids.ids, self.indent, self.width)


def apply_edits(analysis: Analysis, edits: Sequence[Edit], width: int = 88) -> str:
    if not edits:
        return analysis.module.code
    inside: set[int] = set()
    for e in edits:
        node = e.node
        while node is not None and id(node) not in inside:
            inside.add(id(node))
            node = analysis.parent(node)
    new = analysis.module.visit(_Apply({id(e.node): e for e in edits}, analysis.module.default_indent, width, inside))
    assert isinstance(new, cst.Module)
    if any(e.needs_torch for e in edits):
        new = ensure_import(new, "torch")
    for name in dict.fromkeys(i for e in edits for i in e.imports):
        new = ensure_import(new, name)
    helpers = list(dict.fromkeys(r for e in edits for h in e.helpers for r in h.with_required()))
    for h in reversed(helpers):  # each goes in at the same place: keep the edits' order
        new = ensure_helper(new, h)
    return new.code


def _is_import_stmt(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def single(stmt: cst.CSTNode) -> Optional[cst.BaseSmallStatement]:
    """The one small statement of a line that holds exactly one (``x = f()``), else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def _is_docstring(stmt: cst.CSTNode) -> bool:
    s = single(stmt)
    return isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString))


def _insert_at(module: cst.Module) -> int:
    """Index after the docstring, ``__future__`` imports and the leading import block."""
    body = list(module.body)
    i = 0
    if body and _is_docstring(body[0]):
        i = 1
    last_import = None
    for j in range(i, len(body)):
        if _is_import_stmt(body[j]):
            last_import = j
        elif isinstance(body[j], (cst.If, cst.Try)) and j == (last_import or i - 1) + 1 and last_import is not None:
            continue  # ``try: import x`` blocks right after the imports
        else:
            break
    return (last_import + 1) if last_import is not None else i


def ensure_import(module: cst.Module, name: str) -> cst.Module:
    """``import name`` once, after the module's leading imports (after a docstring and
    ``from __future__``), unless the module has it: libcst's AddImportsVisitor."""
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    for stmt in module.body:  # the common case, found without the codemod's pass over the whole file
        if _is_import_stmt(stmt) and any(
                isinstance(s, cst.Import) and any(a.asname is None and code(a.name) == name for a in s.names)
                for s in stmt.body):
            return module
    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, name)
    return AddImportsVisitor(context).transform_module(module)


def ensure_helper(module: cst.Module, helper: Helper) -> cst.Module:
    """Define ``helper`` at module level once (idempotent)."""
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == helper.name:
            return module
    parsed = cst.parse_module(helper.source)
    body = list(module.body)
    i = _insert_at(module)
    new_stmts = list(parsed.body)
    first = new_stmts[0]
    new_stmts[0] = first.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    if i < len(body):
        body[i] = body[i].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(),
                                                      *[l for l in body[i].leading_lines if l.comment]])
    body[i:i] = new_stmts
    return module.with_changes(body=body)


# -- unsafe fixes ----------------------------------------------------------------------

def offer_unsafe(ctx: Context, result: Plan, rule: str, line: int, cost: str, what: str) -> bool:
    """True when the run asked for unsafe fixes; otherwise the finding says the fix exists,
    what it costs, and the flag that offers it."""
    if ctx.unsafe:
        return True
    result.refusals.append(Refusal(rule, line, f"{what} removes this break, but it is an unsafe fix: {cost}",
                                   advice="mend fix --unsafe-fixes offers it (verified like every fix)"))
    return False
