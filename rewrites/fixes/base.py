"""What every fix family shares: the records a transform returns, the one-pass applier,
import/helper insertion, and the small static judgements (is this expression a tensor?
is it pure?) the families' preconditions are built from.

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

from rewrites.tensors import (BOOL_METHODS, TENSOR_PARAM_NAMES, TORCH_HOST_FUNCS, TORCH_NON_TENSOR_FUNCS,
                              TORCH_NON_TENSOR_SUBMODULES)


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
    # fixes that keep the outputs but change the program's cost (ruff's "unsafe fixes"):
    # planned only when the user asked for them
    unsafe: bool = False
    # the file's module name (its stem): what the code a fix adds is named after (mend::<module>_...)
    module: str = ""

    def wants(self, code: str) -> bool:
        return not self.rules or any(code.startswith(r) for r in self.rules)

    def covers(self, start: int, end: int) -> bool:
        return self.lines is None or any(start <= l <= end for l in self.lines)


HINTS = ("tensor", "shape", "numpy")  # what Dynamo may say about a line (fix_source's <hint>_lines)


@dataclass(frozen=True)
class Case:
    """One example of what a fix family does; tests/test_fix_cases.py runs every family's
    ``CASES`` (as Fixit runs a rule's VALID and INVALID cases).

    ``fix_source(before, lines=lines, unsafe=unsafe, ...)`` gives ``after``, and running it
    again changes nothing; a case without ``after`` is left unchanged by its family, with a
    refusal whose reason holds ``reason`` when one is given. ``lines``: where Dynamo broke
    (None: anywhere); ``hints``: what Dynamo said there (``"shape"``: a data-dependent output
    shape, ``"numpy"``: a NumPy value a branch read, ``"tensor"``: a tensor decided a branch),
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


# -- static judgements -----------------------------------------------------------------

def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def full_name(node: cst.CSTNode) -> Optional[str]:
    try:
        return cst.helpers.get_full_name_for_node(node)
    except Exception:  # libcst raises for a node it cannot name (a call's result, a subscript): no name
        return None


TORCH_PREFIXES = ("torch.", "F.", "nn.functional.", "math.")
# Tensor methods that compute a new value (no mutation, no host sync).
PURE_METHODS = frozenset("""
abs add sub mul div neg exp log log1p sqrt rsqrt sigmoid tanh relu softmax log_softmax sum mean
max min amax amin argmax argmin prod std var norm clamp clamp_min clamp_max clip pow matmul bmm mm
transpose permute reshape view view_as expand expand_as contiguous flatten unsqueeze squeeze to float
half bfloat16 double int long bool type_as masked_fill where any all isnan isinf isfinite round
floor ceil sign cumsum cumprod flip roll t chunk split narrow select index_select gather repeat
new_zeros new_ones new_full new_empty zeros_like ones_like size dim numel eq ne lt le gt ge
logical_and logical_or logical_not detach clone float_power lerp baddbmm addmm softplus gelu
triu tril diagonal log2 log10 reciprocal acos asin atanh expm1 sin cos atan erf square nan_to_num
maximum minimum
""".split())
_SELF_NON_TENSOR = frozenset({"training", "config", "get_extended_attention_mask", "get_head_mask",
                              "dtype", "device"})
REDUCTIONS = frozenset("sum mean max min amax amin any all prod norm std var count_nonzero".split())
SIDE_EFFECT_CALLS = ("print", "logging.", "logger.", "log.", "warnings.", "_logger.", "LOGGER.", "open",
                     "sys.stdout", "sys.stderr")
LOG_METHODS = frozenset("debug info warning warn error exception critical log warning_once info_once".split())


# Python bools Dynamo resolves while tracing (never tensors)
COMPILE_FLAGS = frozenset({"torch.compiler.is_compiling", "torch._dynamo.is_compiling", "torch.jit.is_scripting",
                           "torch.jit.is_tracing", "torch.compiler.is_dynamo_compiling"})
IS_COMPILING = "torch.compiler.is_compiling()"


def is_compiling_test(test: cst.BaseExpression) -> bool:
    """``torch.compiler.is_compiling()`` exactly (the test of the compiled/eager split)."""
    t = strip_parens(test)
    return isinstance(t, cst.Call) and not t.args and full_name(t.func) == "torch.compiler.is_compiling"


def in_compile_split(an: "Analysis", node: cst.CSTNode) -> bool:
    """Is ``node`` inside an ``if torch.compiler.is_compiling(): ... else/elif ...`` a fix
    wrote (its eager or its compiled side)? Then it is already repaired: leave it."""
    p = an.parent(node)
    while p is not None and not isinstance(p, cst.FunctionDef):
        if isinstance(p, cst.If) and is_compiling_test(p.test):
            return True
        p = an.parent(p)
    return False


def _torch_non_tensor(fn: str) -> bool:
    """``torch.jit.isinstance``, ``torch.cuda.is_available``, ``torch.finfo``: torch calls
    that return no tensor (``rewrites.tensors``' lists, shared with the static scan)."""
    parts = fn.split(".")
    return len(parts) > 2 and parts[1] in _NO_TENSOR_SUBMODULES or len(parts) == 2 and parts[1] in _NO_TENSOR_FUNCS


# ... less those some of whose calls do return tensors (``torch.utils.checkpoint.checkpoint``,
# ``torch.autograd.grad``, ``torch.cond``)
_NO_TENSOR_SUBMODULES = TORCH_NON_TENSOR_SUBMODULES - {"utils", "autograd", "distributed", "amp", "export", "ao",
                                                       "quantization", "_inductor", "optim", "_C"}
_NO_TENSOR_FUNCS = (TORCH_NON_TENSOR_FUNCS | TORCH_HOST_FUNCS) - {"cond", "while_loop", "vmap"}


def module_call(node: cst.Call, modules: frozenset[str] = frozenset()) -> bool:
    """Is ``node`` a call of a submodule? ``self.proj(x)`` (any attribute of self but the
    few known non-tensor helpers), ``self.layers[i](x)``, or ``layer(x)`` with ``layer`` one
    of ``modules`` (``FunctionFacts.module_names``: bound by ``for layer in self.layers``).
    Its result counts as a tensor: what an ``nn.Module`` returns in model code. A module that
    returns a tuple or a number where a tensor was taken for granted makes the rewritten
    program raise or differ, which verification reports, so the guess is never trusted alone."""
    f = node.func
    fn = full_name(f) or ""
    if fn.startswith("self.") and fn.count(".") == 1 and fn[5:] not in _SELF_NON_TENSOR:
        return True
    if isinstance(f, cst.Subscript):
        held = full_name(f.value) or ""
        return held.startswith("self.") and held.count(".") == 1
    return isinstance(f, cst.Name) and f.value in modules


def tensorish(node: cst.BaseExpression, tensor_names: frozenset[str] = frozenset(),
              modules: frozenset[str] = frozenset()) -> bool:
    """Does ``node`` (probably) evaluate to a tensor? Conservative guesses, never imports.
    ``modules``: local names that hold submodules (``module_call``)."""
    if isinstance(node, cst.Call) and module_call(node, modules):
        return True  # a submodule call: ``self.proj(x)``, ``self.layers[i](x)``, ``layer(x)``
    if isinstance(node, cst.Call):
        fn = full_name(node.func) or ""
        if fn.startswith("torch.") and fn not in ("torch.equal", "torch.is_tensor", "torch.numel") \
                and fn not in COMPILE_FLAGS and not _torch_non_tensor(fn):
            return True
        if fn.startswith(("F.", "nn.functional.")):
            return True
        if isinstance(node.func, cst.Attribute):
            m = node.func.attr.value
            if m == "item" or m == "tolist" or m == "size" or m == "dim" or m == "numel":
                return False
            if m in PURE_METHODS or m in REDUCTIONS:
                return tensorish(node.func.value, tensor_names, modules) or m in REDUCTIONS or m in BOOL_METHODS
        return False
    if isinstance(node, cst.Name):
        return node.value in tensor_names
    if isinstance(node, cst.Comparison):
        return tensorish(node.left, tensor_names, modules) or any(
            tensorish(c.comparator, tensor_names, modules) for c in node.comparisons)
    if isinstance(node, cst.BinaryOperation):
        return tensorish(node.left, tensor_names, modules) or tensorish(node.right, tensor_names, modules)
    if isinstance(node, cst.UnaryOperation):
        return tensorish(node.expression, tensor_names, modules)
    if isinstance(node, cst.BooleanOperation):
        return tensorish(node.left, tensor_names, modules) and tensorish(node.right, tensor_names, modules)
    if isinstance(node, cst.Subscript):
        return tensorish(node.value, tensor_names, modules)
    if isinstance(node, cst.Attribute):
        return False
    return False


def has_item(node: cst.CSTNode) -> bool:
    found = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if isinstance(n.func, cst.Attribute) and n.func.attr.value == "item" and not n.args:
                found.append(n)

    node.visit(V())
    return bool(found)


def exact_in_half(node: cst.BaseExpression) -> bool:
    """Is ``node`` a number literal that float16 and bfloat16 (hence float32) hold exactly?
    A tensor compared with such a constant decides as Python's float comparison does; with
    another one (``0.3``) the constant is rounded to the tensor's dtype first, and the
    comparison flips at the values between (a bf16 ``h.max()`` of 0.30078125 vs 0.3)."""
    import struct

    n, sign = node, 1.0
    while isinstance(n, cst.UnaryOperation) and isinstance(n.operator, (cst.Minus, cst.Plus)):
        sign = -sign if isinstance(n.operator, cst.Minus) else sign
        n = n.expression
    if not isinstance(n, (cst.Integer, cst.Float)):
        return False
    try:
        v = sign * float(n.evaluated_value)
        half = struct.unpack("<e", struct.pack("<e", v))[0]
        f32 = struct.unpack("<f", struct.pack("<f", v))[0]
    except (OverflowError, ValueError, struct.error):
        return False
    bf16_bits = struct.unpack("<I", struct.pack("<f", v))[0]
    return half == v and f32 == v and bf16_bits & 0xFFFF == 0


def is_string_literal(node: Optional[cst.BaseExpression]) -> bool:
    """A string literal, concatenated or not, with no f-string part: a constant, read when the
    code is written, never when it runs."""
    if isinstance(node, cst.ConcatenatedString):
        return is_string_literal(node.left) and is_string_literal(node.right)
    return isinstance(node, cst.SimpleString)


def is_number_literal(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


def compare_in_double(test: cst.Comparison, is_scalar) -> cst.Comparison:
    """``s > 0.3`` with ``s`` (``is_scalar(s)``) a tensor that replaced a Python number:
    ``s.double() > 0.3``, so the constant is not rounded to a half-precision dtype first
    (Python compared two doubles). Constants every float dtype holds exactly stay as written."""
    if len(test.comparisons) != 1:
        return test
    left, right = test.left, test.comparisons[0].comparator

    def dbl(e):
        return cst.Call(func=cst.Attribute(value=paren(e), attr=cst.Name("double")), args=[])

    if is_scalar(left) and is_number_literal(right) and not exact_in_half(right):
        return test.with_changes(left=dbl(left))
    if is_scalar(right) and is_number_literal(left) and not exact_in_half(left):
        return test.with_changes(comparisons=[test.comparisons[0].with_changes(comparator=dbl(right))])
    return test


class _StripItem(cst.CSTTransformer):
    """In a condition: the comparison stays on the tensor (no ``.detach()`` needed: a
    comparison has no gradient), in float64 against an inexact float constant."""

    def __init__(self):
        super().__init__()
        self.stripped: set[int] = set()

    def leave_Call(self, original_node, updated_node):
        f = updated_node.func
        out = updated_node
        if isinstance(f, cst.Attribute) and f.attr.value == "item" and not updated_node.args:
            out = f.value
        else:
            fn = full_name(f)
            if fn in ("float", "bool") and len(updated_node.args) == 1 and tensorish(updated_node.args[0].value):
                out = updated_node.args[0].value
            elif fn == "int" and len(updated_node.args) == 1 and tensorish(updated_node.args[0].value):
                # int() truncates toward zero, as a cast to int64 does
                out = cst.Call(func=cst.Attribute(value=paren(updated_node.args[0].value), attr=cst.Name("long")),
                               args=[])
        if out is not updated_node:
            self.stripped.add(id(out))
        return out

    def leave_Comparison(self, original_node, updated_node):
        return compare_in_double(updated_node, lambda e: id(e) in self.stripped)


def strip_item(node: cst.BaseExpression) -> cst.BaseExpression:
    """``t.sum().item() > 0`` -> ``t.sum() > 0``: the comparison stays on the tensor;
    ``t.max().item() > 0.3`` -> ``t.max().double() > 0.3`` (``compare_in_double``)."""
    return node.visit(_StripItem())  # type: ignore[return-value]


# calls that draw from the RNG: evaluated speculatively (torch.where runs both arms) or
# re-run (torch.cond recomputes its branch in backward) they shift the random stream
RNG_CALLS = frozenset("""
dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout rand rand_like randn randn_like
randint randint_like randperm bernoulli multinomial normal poisson rrelu gumbel_softmax
""".split())
# module classes whose call changes state or draws random numbers
STATEFUL_MODULES = frozenset("""
BatchNorm1d BatchNorm2d BatchNorm3d SyncBatchNorm LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d InstanceNorm1d
InstanceNorm2d InstanceNorm3d Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout RReLU
""".split())


def rng_call(node: cst.Call) -> Optional[str]:
    """``F.dropout(...)``, ``torch.rand_like(x)``, ``x.bernoulli()``: the call's text, else None."""
    fn = full_name(node.func) or ""
    name = node.func.attr.value if isinstance(node.func, cst.Attribute) else fn
    if name.rstrip("_") in RNG_CALLS and (fn.startswith(TORCH_PREFIXES) or isinstance(node.func, cst.Attribute)
                                          and not fn.startswith("self.")):
        return code(node.func)
    return None


def impurity(node: cst.CSTNode) -> Optional[str]:
    """Why evaluating ``node`` twice or speculatively is not safe (None: pure enough).
    Calls to non-torch functions are reported separately by ``calls_outside_torch``."""
    why: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            fn = full_name(n.func) or ""
            kw = {a.keyword.value: a.value for a in n.args if a.keyword is not None}
            if fn == "print" or fn.startswith(SIDE_EFFECT_CALLS) and not fn.startswith("torch."):
                why.append(f"calls {fn}() (a side effect)")
            elif "inplace" in kw and not (isinstance(kw["inplace"], cst.Name) and kw["inplace"].value == "False"):
                why.append(f"mutates its input in place ({code(n.func)}(..., inplace={code(kw['inplace'])}))")
            elif "out" in kw and not (isinstance(kw["out"], cst.Name) and kw["out"].value == "None"):
                why.append(f"writes into an existing tensor ({code(n.func)}(..., out=...))")
            elif rng_call(n):
                why.append(f"draws random numbers ({rng_call(n)}): torch.where would run it on both paths and "
                           "torch.cond re-runs it in backward, either shifts the RNG stream")
            elif isinstance(n.func, cst.Attribute):
                m = n.func.attr.value
                if m.endswith("_") and not m.endswith("__") and m not in ("size_",):
                    why.append(f"mutates in place ({code(n.func)})")
                elif m in LOG_METHODS and fn.split(".")[0] in ("logger", "log", "logging", "_logger", "self"):
                    why.append(f"logs ({fn})")
                elif m in ("item", "tolist", "numpy", "cpu") and m != "cpu":
                    why.append(f"reads a host value ({m}())")

        def visit_NamedExpr(self, n) -> None:
            why.append("assigns with :=")

        def visit_Yield(self, n) -> None:
            why.append("yields")

        def visit_Await(self, n) -> None:
            why.append("awaits")

    node.visit(V())
    return why[0] if why else None


INPLACE_MODULE = "(inplace=True)"  # suffix module_attrs gives a module built with inplace=True


def module_attrs(an: "Analysis", node: cst.CSTNode) -> dict[str, str]:
    """``{attr: class name}`` for ``self.attr = nn.X(...)`` (or a class of this module) in the
    class enclosing ``node``: those attributes are modules, their calls module calls."""
    p = an.parent(node)
    while p is not None and not isinstance(p, cst.ClassDef):
        p = an.parent(p)
    if p is None:
        return {}
    local_classes = {c.name.value for c in an.module.body if isinstance(c, cst.ClassDef)}
    out: dict[str, str] = {}

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            if not isinstance(n.value, cst.Call):
                return
            ctor = full_name(n.value.func) or ""
            short = ctor.rsplit(".", 1)[-1]
            is_module = (ctor.startswith(("nn.", "torch.nn.")) and not ctor.startswith(("nn.functional", "torch.nn.functional"))
                         and short not in ("Parameter", "Buffer", "ParameterList", "ParameterDict")) or ctor in local_classes
            inplace = next((a.value for a in n.value.args if a.keyword is not None and a.keyword.value == "inplace"),
                           None)
            if inplace is not None and not (isinstance(inplace, cst.Name) and inplace.value == "False"):
                short += INPLACE_MODULE  # ``nn.ReLU(inplace=True)``: its call writes its input
            for t in n.targets:
                tgt = t.target
                if is_module and isinstance(tgt, cst.Attribute) and isinstance(tgt.value, cst.Name) \
                        and tgt.value.value == "self":
                    out[tgt.attr.value] = short

    p.visit(V())
    return out


def number_attrs(an: "Analysis", node: cst.CSTNode) -> frozenset[str]:
    """``self.x`` for the attributes of the class enclosing ``node`` that hold a Python number:
    bound once in the class, in ``__init__``, to a number built from literals, ``__init__``'s
    number parameters (``penalty: float = 1.3``), ``int()`` / ``float()`` / ``math.*`` calls
    and arithmetic on those (``self.scale = head_dim ** -0.5``)."""
    p = an.parent(node)
    while p is not None and not isinstance(p, cst.ClassDef):
        p = an.parent(p)
    if p is None:
        return frozenset()
    init = next((f for f in p.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"), None)
    if init is None:
        return frozenset()
    params = FunctionFacts(an, init).number_params

    def number(e: cst.BaseExpression) -> bool:
        e = strip_parens(e)
        if is_number_literal(e) or isinstance(e, cst.Name) and e.value in params:
            return True
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
            return number(e.expression)
        if isinstance(e, cst.BinaryOperation) and not isinstance(e.operator, cst.MatrixMultiply):
            return number(e.left) and number(e.right)
        if isinstance(e, cst.Call):
            fn = full_name(e.func) or ""
            return fn in ("int", "float") or fn.startswith("math.") and all(number(a.value) for a in e.args)
        return False

    bound: dict[str, list[Optional[cst.BaseExpression]]] = {}

    class V(cst.CSTVisitor):
        def __init__(self, in_init: bool) -> None:
            self.in_init = in_init

        def _bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
            for t in [target, *(e.value for e in getattr(target, "elements", []))]:
                if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                    bound.setdefault(t.attr.value, []).append(value if self.in_init and t is target else None)

        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                self._bind(t.target, n.value)

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            self._bind(n.target, n.value)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            self._bind(n.target, None)

    for f in p.body.body:
        if isinstance(f, cst.FunctionDef):
            f.visit(V(f is init))
    return frozenset(f"self.{a}" for a, vs in bound.items() if len(vs) == 1 and vs[0] is not None and number(vs[0]))


def stateful_module_call(node: cst.CSTNode, modules: dict[str, str]) -> Optional[str]:
    """Why a call in ``node`` to a module attribute of self changes state or draws random
    numbers (``self.norm(h)`` with ``self.norm = nn.BatchNorm1d(...)``), else None."""
    found: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            fn = full_name(n.func) or ""
            if not fn.startswith("self.") or fn.count(".") != 1:
                return
            attr = fn[5:]
            cls = modules.get(attr)
            if cls is not None and cls.endswith(INPLACE_MODULE):
                found.append(f"`{fn}` is an nn.{cls}: it writes its input, so torch.where would run that write "
                             "on both paths, and torch.cond refuses the mutation")
            elif cls in STATEFUL_MODULES:
                what = ("draws random numbers in training" if "Dropout" in cls or cls == "RReLU" else
                        "updates its running statistics (buffers) in training")
                found.append(f"`{fn}` is an nn.{cls}, which {what}: torch.where would run it on both paths, "
                             "and torch.cond refuses the buffer mutation or re-runs it in backward")
            elif cls is None and "drop" in attr.lower():
                found.append(f"`{fn}` looks like a dropout module (random numbers in training): torch.where would "
                             "run it on both paths, and torch.cond re-runs it in backward")

    node.visit(V())
    return found[0] if found else None


def pure_self_methods(an: "Analysis", node: cst.CSTNode,
                      total: Optional[Callable[[cst.BaseExpression], bool]] = None) -> frozenset[str]:
    """``self.m`` for the methods ``m`` of the class enclosing ``node`` whose body is pure
    arithmetic (local assignments and a return of pure tensor expressions, calling only
    torch and other such methods): calling one twice or speculatively, as torch.where
    does, is safe. Undecorated methods of that class only; inherited ones are not seen.
    ``total``: also require each value to pass it (torch.where's arms must be total, and a
    method's insides cannot be fed a safe value at the call site)."""
    p = an.parent(node)
    while p is not None and not isinstance(p, cst.ClassDef):
        p = an.parent(p)
    if p is None or not isinstance(p.body, cst.IndentedBlock):
        return frozenset()
    methods = {f.name.value: f for f in p.body.body if isinstance(f, cst.FunctionDef) and not f.decorators}
    values: dict[str, list[cst.BaseExpression]] = {}
    for name, f in methods.items():
        exprs: list[cst.BaseExpression] = []
        ok = isinstance(f.body, cst.IndentedBlock)
        for i, st in enumerate(f.body.body if ok else []):
            if not (ok and isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1):
                ok = False
                break
            small = st.body[0]
            if isinstance(small, cst.Expr) and i == 0 and isinstance(small.value, cst.SimpleString):
                continue  # docstring
            if isinstance(small, cst.Assign) and all(isinstance(t.target, cst.Name) for t in small.targets):
                exprs.append(small.value)
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                exprs.append(small.value)
            elif isinstance(small, cst.Return) and small.value is not None:
                exprs.append(small.value)
            else:
                ok = False
                break
        if ok and exprs and not any(impurity(e) for e in exprs) and (total is None or all(total(e) for e in exprs)):
            values[name] = exprs
    pure = set(values)
    changed = True
    while changed:  # drop methods that call a non-pure one, until nothing changes
        changed = False
        for name in list(pure):
            calls = {c for e in values[name] for c in calls_outside_torch(e)}
            if any(not (c.startswith("self.") and c[5:] in pure) for c in calls):
                pure.discard(name)
                changed = True
    return frozenset(f"self.{m}" for m in pure)


def calls_outside_torch(node: cst.CSTNode) -> list[str]:
    """Names of calls that are not torch / tensor-method calls (modules, user functions)."""
    out: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            fn = full_name(n.func) or code(n.func)
            if fn.startswith(TORCH_PREFIXES):
                return
            # ``self.norm(h)`` is a module (or method) call, whatever its name spells; a
            # tensor method has a tensor receiver, never ``self`` itself
            if isinstance(n.func, cst.Attribute) and n.func.attr.value in PURE_METHODS \
                    and not (isinstance(n.func.value, cst.Name) and n.func.value.value == "self"):
                return
            if fn in ("float", "int", "min", "max", "abs", "len", "tuple", "list", "range", "isinstance", "getattr"):
                return
            out.append(fn)

    node.visit(V())
    return out


# the dense forms of the unsafe fixes hold every row: a reduction over rows would take in
# the rows the sparse program never computed
_ACROSS_ROWS = {"sum", "mean", "max", "min", "amax", "amin", "prod", "std", "var", "norm", "cumsum",
                "logsumexp", "softmax", "log_softmax", "sort", "argsort", "topk", "unique", "nonzero", "median"}


def reduction_over(node: cst.CSTNode, tainted) -> Optional[str]:
    """A method reduction (``v.sum(...)``) or ``torch.<reduction>(v, ...)`` of a value
    ``tainted(v)`` says came from the rows being densified; its code, or None."""
    found: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            f = n.func
            if isinstance(f, cst.Attribute) and f.attr.value in _ACROSS_ROWS:
                recv = f.value if full_name(f) != f"torch.{f.attr.value}" else (n.args[0].value if n.args else None)
                if recv is not None and tainted(recv):
                    found.append(code(n))

    node.visit(V())
    return found[0] if found else None


def offer_unsafe(ctx: Context, result: Plan, rule: str, line: int, cost: str, what: str) -> bool:
    """True when the run asked for unsafe fixes; otherwise the finding says the fix exists,
    what it costs, and the flag that offers it."""
    if ctx.unsafe:
        return True
    result.refusals.append(Refusal(rule, line, f"{what} removes this break, but it is an unsafe fix: {cost}",
                                   advice="mend fix --unsafe-fixes offers it (verified like every fix)"))
    return False


def names_in(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False  # ``x.attr``: attr is not a variable

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False  # keyword names are not variables

    node.visit(V())
    return out


class FunctionFacts:
    """Names bound in a function before a line, used after a line, and guessed tensors."""

    def __init__(self, analysis: Analysis, fn: Optional[cst.FunctionDef]):
        self.analysis = analysis
        self.fn = fn
        self.bindings: list[tuple[str, int, Optional[cst.BaseExpression]]] = []  # (name, line, value)
        self.uses: list[tuple[str, int]] = []
        self.params: set[str] = set()
        self.tensor_params: set[str] = set()
        # parameters annotated, or defaulted to, a Python number / string / bool (``min_len: int
        # = 2``, ``beta=0.5``): a condition reading only them and ``self`` is a Python value
        self.python_params: set[str] = set()
        # of those, the numbers (``int`` / ``float``, or a number default): a divisor among them
        # is a Python number, the same on both paths of a torch.where
        self.number_params: set[str] = set()
        # names bound only by ``for layer in self.layers`` (or ``enumerate(self.layers)``):
        # submodules, whose calls give tensors (``module_call``)
        self.module_names: frozenset[str] = frozenset()
        if fn is None:
            return
        for p in [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]:
            self.params.add(p.name.value)
            ann = full_name(p.annotation.annotation) if p.annotation else ""
            if ann and ann.split(".")[-1] in ("Tensor", "FloatTensor", "LongTensor", "BoolTensor"):
                self.tensor_params.add(p.name.value)
            elif not ann and p.name.value in TENSOR_PARAM_NAMES:
                self.tensor_params.add(p.name.value)
            elif ann in ("int", "float", "bool", "str") or not ann and p.default is not None and (
                    is_number_literal(p.default) or isinstance(p.default, cst.SimpleString)
                    or isinstance(p.default, cst.Name) and p.default.value in ("True", "False")):
                self.python_params.add(p.name.value)
                if ann in ("int", "float") or not ann and p.default is not None and is_number_literal(p.default):
                    self.number_params.add(p.name.value)
        for p in (fn.params.star_arg, fn.params.star_kwarg):
            if isinstance(p, cst.Param):
                self.params.add(p.name.value)
        facts = self

        class V(cst.CSTVisitor):
            def visit_Assign(self, n: cst.Assign) -> None:
                line = analysis.span(n)[0]
                for t in n.targets:
                    for name in _target_names(t.target):
                        facts.bindings.append((name, line, n.value if isinstance(t.target, cst.Name) else None))

            def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
                if n.value is not None:
                    for name in _target_names(n.target):
                        facts.bindings.append((name, analysis.span(n)[0], n.value))

            def visit_AugAssign(self, n: cst.AugAssign) -> None:
                for name in _target_names(n.target):
                    facts.bindings.append((name, analysis.span(n)[0], None))

            def visit_For(self, n: cst.For) -> None:
                for name in _target_names(n.target):
                    facts.bindings.append((name, analysis.span(n)[0], None))
                loop_modules.extend(_submodule_loop_names(n))

            def visit_WithItem(self, n: cst.WithItem) -> None:
                if n.asname is not None:
                    for name in _target_names(n.asname.name):
                        facts.bindings.append((name, analysis.span(n)[0], None))

            def visit_Name(self, n: cst.Name) -> None:
                facts.uses.append((n.value, analysis.span(n)[0]))

        loop_modules: list[str] = []
        fn.body.visit(V())
        bound = [n for n, _, _ in self.bindings]
        self.python_params -= set(bound)  # rebound in the body: it may hold anything later
        self.number_params -= set(bound)
        self.module_names = frozenset(n for n in loop_modules if bound.count(n) == loop_modules.count(n))

    def defined_before(self, name: str, line: int) -> bool:
        return name in self.params or any(n == name and l < line for n, l, _ in self.bindings)

    def used_after(self, name: str, line: int) -> bool:
        return any(n == name and l > line for n, l in self.uses)

    def tensor_names(self, before: int) -> frozenset[str]:
        """Parameters annotated as tensors, and names last bound before ``before`` to a
        tensor-looking value (iterated so ``a = t * 2; b = a + 1`` marks both)."""
        known = set(self.tensor_params)
        for _ in range(3):
            for name, line, value in self.bindings:
                if line < before and value is not None and tensorish(value, frozenset(known), self.module_names):
                    known.add(name)
        return frozenset(known)


def _submodule_loop_names(n: cst.For) -> list[str]:
    """``for layer in self.layers`` / ``for i, layer in enumerate(self.layers)`` -> [layer]:
    iterating an attribute of self (an ``nn.ModuleList`` / ``nn.Sequential`` in model code)."""
    it, target = n.iter, n.target
    if isinstance(it, cst.Call) and full_name(it.func) == "enumerate" and it.args \
            and isinstance(target, cst.Tuple) and len(target.elements) == 2:
        it, target = it.args[0].value, target.elements[1].value
    name = full_name(it) or ""
    if name.startswith("self.") and name.count(".") == 1 and isinstance(target, cst.Name):
        return [target.value]
    return []


def _target_names(t: cst.CSTNode) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        out = []
        for el in t.elements:
            out.extend(_target_names(el.value))
        return out
    if isinstance(t, cst.StarredElement):
        return _target_names(t.value)
    return []


def call(func: str, *args: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.parse_expression(func), args=[cst.Arg(a) for a in args])


def paren(node: cst.BaseExpression) -> cst.BaseExpression:
    """Wrap in parentheses unless atomic (so it can be an operand)."""
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float,
                         cst.SimpleString, cst.List, cst.ListComp, cst.Dict, cst.DictComp, cst.Set,
                         cst.SetComp)) or node.lpar:  # displays are atoms too
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def strip_parens(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, cst.Tuple) and not node.elements:
        return node  # ``()`` is only valid with its parentheses
    if getattr(node, "lpar", None):
        return node.with_changes(lpar=[], rpar=[])
    return node
