"""Layout of the code a fix writes: what black or ruff format would print, so that formatting a
fixed file leaves the fix's lines as they are.

A statement a fix built (``y = torch.where(c, a, b)``, ``torch.cond(...)``) is written on one
line when it fits in ``WIDTH`` columns, moved-in expressions joined onto it; one that does not
fit is split the way the formatters split it:

* a call: one argument per line with a trailing comma (the "magic trailing comma", which both
  formatters keep as it is at any line length);
* a lambda: a call body split as a call, any other body in parentheses;
* an operator chain or a ternary: split before its operators (a ternary's ``if`` and
  ``else``) inside parentheses (added where the formatters add them), or, in a statement whose
  last operand ends in a call with arguments, its first call split instead (the formatters'
  "right-hand split").

A statement a fix only moved (the call under a new guard) or changed in part (``.item()`` ->
``.detach()``) keeps its layout unless a line of it no longer fits. Expressions holding a
comment are left as they are: joining them would lose it.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import libcst as cst

WIDTH = 88  # black's and ruff's default line length

_PLACEHOLDER = "_mend_layout_placeholder_"
_SPACED = (cst.Comma, cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.Not, cst.IfExp, cst.Colon,
           cst.Lambda, cst.AssignEqual, cst.ConcatenatedString)
_PRECEDENCE = {cst.Power: 7, cst.Multiply: 6, cst.Divide: 6, cst.FloorDivide: 6, cst.Modulo: 6,
               cst.MatrixMultiply: 6, cst.Add: 5, cst.Subtract: 5, cst.LeftShift: 4, cst.RightShift: 4,
               cst.BitAnd: 3, cst.BitXor: 2, cst.BitOr: 1}
_EMPTY = cst.Module(body=[])


def code(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def _rank(op: cst.CSTNode) -> object:
    """What two operators share when they form one chain: a binary operator's precedence,
    a boolean operator's own kind (``and`` and ``or`` never share one)."""
    return type(op) if isinstance(op, cst.BaseBooleanOp) else _PRECEDENCE.get(type(op), 0)


def _newline(extra: int) -> cst.ParenthesizedWhitespace:
    """A line break inside brackets, the next line ``extra`` columns past the block's indent."""
    return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                                       last_line=cst.SimpleWhitespace(" " * extra))


class _Finder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.comment = False
        self.magic = False

    def visit_Comment(self, node: cst.Comment) -> None:
        self.comment = True

    def visit_Call(self, node: cst.Call) -> None:
        if node.args and isinstance(node.args[-1].comma, cst.Comma):
            self.magic = True

    def _elements(self, node) -> None:
        els = node.elements
        one_tuple = isinstance(node, cst.Tuple) and len(els) == 1
        if els and isinstance(els[-1].comma, cst.Comma) and not one_tuple:
            self.magic = True

    visit_List = visit_Tuple = visit_Set = visit_Dict = _elements

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        return False  # the formatters leave what is inside an f-string's braces


def _scan(node: cst.CSTNode) -> _Finder:
    f = _Finder()
    node.visit(f)
    return f


class _Join(cst.CSTTransformer):
    """Every line break inside brackets becomes a space or nothing, as the formatter writes it."""

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        if not dataclasses.is_dataclass(updated_node):
            return updated_node
        changes = {}
        for f in dataclasses.fields(updated_node):
            v = getattr(updated_node, f.name)
            if isinstance(v, cst.ParenthesizedWhitespace):
                spaced = isinstance(updated_node, _SPACED) and not (
                    isinstance(updated_node, cst.Colon) and f.name == "whitespace_before")
                changes[f.name] = cst.SimpleWhitespace(" " if spaced else "")
        if isinstance(updated_node, cst.Call) and updated_node.args:
            last = updated_node.args[-1]
            if isinstance(last.comma, cst.Comma):  # a kept magic comma: nothing between it and ")"
                changes["args"] = [*updated_node.args[:-1],
                                   last.with_changes(comma=last.comma.with_changes(
                                       whitespace_after=cst.SimpleWhitespace("")))]
        return updated_node.with_changes(**changes) if changes else updated_node


def joined(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``node`` on one line; None when it holds a comment."""
    if _scan(node).comment:
        return None
    return node.visit(_Join())


def _fits(node: cst.CSTNode, col: int, tail: int, width: int) -> bool:
    text = code(node)
    return "\n" not in text and col + len(text) + tail <= width and not _scan(node).magic


class _Layout:
    def __init__(self, base: int, width: int):
        self.base = base  # the statement's indentation (columns)
        self.width = width

    def expr(self, node: cst.BaseExpression, extra: int, col: int, tail: int, statement: bool = False,
             join_only: bool = False):
        flat = joined(node)
        if flat is None:
            return node
        if _fits(flat, col, tail, self.width):
            return flat
        return node if join_only else self.split(flat, extra, col, tail, statement)

    def split(self, node, extra: int, col: int, tail: int, statement: bool):
        if isinstance(node, cst.Call) and node.args:
            return self.call(node, extra)
        if isinstance(node, cst.Lambda):
            body = node.body
            if isinstance(body, cst.Call) and body.args:
                return node.with_changes(body=self.call(body, extra))
            return node.with_changes(body=self.parenthesized(body, extra))
        if isinstance(node, cst.ConcatenatedString) and not node.lpar:
            return self.parenthesized(node, extra) if statement else self.operators(node, extra)
        if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp)):
            if node.lpar:
                return self.parenthesized(node.with_changes(lpar=[], rpar=[]), extra)
            if statement and _ends_in_arguments(node):
                first = _first_call(node)
                if first is not None:
                    return node.deep_replace(first, self.call(first, extra))
            return self.parenthesized(node, extra)
        if isinstance(node, (cst.Tuple, cst.List)) and node.elements and (node.lpar or isinstance(node, cst.List)):
            return self.elements(node, extra)
        if isinstance(node, (cst.ListComp, cst.SetComp)) and not node.lpar:
            return self.comprehension(node, extra)
        if isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):  # `torch.where(...).sum()`: its call
            first = _first_call(node)
            if first is not None:
                return node.deep_replace(first, self.call(first, extra))
        return node

    def elements(self, node, extra: int):
        """A parenthesised tuple or a list: one element per line, a trailing comma."""
        inner = extra + 4
        els = []
        for i, el in enumerate(node.elements):
            value = self.expr(el.value, inner, self.base + inner + (1 if isinstance(el, cst.StarredElement) else 0), 1)
            last = i == len(node.elements) - 1
            els.append(el.with_changes(value=value, comma=cst.Comma(whitespace_after=_newline(extra if last else inner))))
        if isinstance(node, cst.List):
            return node.with_changes(elements=els, lbracket=cst.LeftSquareBracket(whitespace_after=_newline(inner)),
                                     rbracket=cst.RightSquareBracket())
        return node.with_changes(elements=els, lpar=[cst.LeftParen(whitespace_after=_newline(inner))],
                                 rpar=[cst.RightParen()])

    def comprehension(self, node, extra: int):
        """``[elt for x in xs if c]`` as the formatters split it: the element, then each
        ``for`` and ``if`` clause on a line of its own, one level in."""
        inner = extra + 4
        brackets = ("lbracket", "rbracket") if isinstance(node, cst.ListComp) else ("lbrace", "rbrace")
        opening, closing = getattr(node, brackets[0]), getattr(node, brackets[1])
        return self._clauses(node, inner).with_changes(**{
            brackets[0]: opening.with_changes(whitespace_after=_newline(inner)),
            brackets[1]: closing.with_changes(whitespace_before=_newline(extra))})

    def _clauses(self, node, inner: int):
        """A comprehension's element and its ``for`` / ``if`` clauses each on a line at ``inner``."""
        elt = self.expr(node.elt, inner, self.base + inner, 0)

        def clauses(comp: cst.CompFor) -> cst.CompFor:
            ifs = [i.with_changes(whitespace_before=_newline(inner)) for i in comp.ifs]
            nested = clauses(comp.inner_for_in) if comp.inner_for_in is not None else None
            return comp.with_changes(whitespace_before=_newline(inner), ifs=ifs, inner_for_in=nested)

        return node.with_changes(elt=elt, for_in=clauses(node.for_in))

    def call(self, node: cst.Call, extra: int) -> cst.Call:
        inner = extra + 4
        only = node.args[0] if len(node.args) == 1 else None
        if only is not None and isinstance(only.value, cst.GeneratorExp) and not only.value.lpar:
            # ``any(x for x in xs)``: split as a comprehension; a comma after it is a syntax error
            return node.with_changes(whitespace_before_args=_newline(inner), args=[only.with_changes(
                value=self._clauses(only.value, inner), comma=cst.MaybeSentinel.DEFAULT,
                whitespace_after_arg=_newline(extra))])
        args = []
        for i, a in enumerate(node.args):
            lead = len(code(a.with_changes(value=cst.Name("x"), comma=cst.MaybeSentinel.DEFAULT))) - 1
            value = self.expr(a.value, inner, self.base + inner + lead, 1)
            last = i == len(node.args) - 1
            args.append(a.with_changes(value=value, whitespace_after_arg=cst.SimpleWhitespace(""),
                                       comma=cst.Comma(whitespace_after=_newline(extra if last else inner))))
        return node.with_changes(args=args, whitespace_before_args=_newline(inner))

    def parenthesized(self, node: cst.BaseExpression, extra: int) -> cst.BaseExpression:
        """``(`` + ``node`` on the lines below, one level in + ``)``."""
        inner = extra + 4
        if _fits(node, self.base + inner, 0, self.width):
            body = node
        else:
            body = self.operators(node, inner)
        return body.with_changes(lpar=[cst.LeftParen(whitespace_after=_newline(inner))],
                                 rpar=[cst.RightParen(whitespace_before=_newline(extra))])

    def operators(self, node, extra: int):
        """An operator chain split before each operator of its lowest precedence, at ``extra``."""
        col = self.base + extra
        if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)) and not node.lpar:
            left = node.left
            # the chain goes on through a left operand of the same kind and rank
            if type(left) is type(node) and not left.lpar and _rank(left.operator) == _rank(node.operator):
                left = self.operators(left, extra)
            else:
                left = self.operand(left, extra, col)
            op = node.operator.with_changes(whitespace_before=_newline(extra),
                                            whitespace_after=cst.SimpleWhitespace(" "))
            width = len(code(node.operator).strip()) + 1
            return node.with_changes(left=left, operator=op, right=self.operand(node.right, extra, col + width))
        if isinstance(node, cst.Comparison) and not node.lpar:  # `a == b`: split before each comparison
            comparisons = []
            for target in node.comparisons:
                op = target.operator.with_changes(whitespace_before=_newline(extra),
                                                  whitespace_after=cst.SimpleWhitespace(" "))
                width = len(code(target.operator).strip()) + 1
                comparisons.append(target.with_changes(operator=op,
                                                       comparator=self.operand(target.comparator, extra, col + width)))
            return node.with_changes(left=self.operand(node.left, extra, col), comparisons=comparisons)
        if isinstance(node, cst.IfExp) and not node.lpar:  # `a if c else b`: before `if` and `else`
            space = cst.SimpleWhitespace(" ")
            return node.with_changes(body=self.operand(node.body, extra, col),
                                     whitespace_before_if=_newline(extra), whitespace_after_if=space,
                                     test=self.operand(node.test, extra, col + 3),
                                     whitespace_before_else=_newline(extra), whitespace_after_else=space,
                                     orelse=self.operand(node.orelse, extra, col + 5))
        if isinstance(node, cst.ConcatenatedString) and not node.lpar:  # one string per line
            right = node.right
            right = self.operators(right, extra) if isinstance(right, cst.ConcatenatedString) and not right.lpar \
                else self.operand(right, extra, col)
            return node.with_changes(left=self.operand(node.left, extra, col), right=right,
                                     whitespace_between=_newline(extra))
        return self.operand(node, extra, col)

    def operand(self, node, extra: int, col: int):
        if _fits(node, col, 0, self.width):
            return node
        if node.lpar:
            return self.parenthesized(node.with_changes(lpar=[], rpar=[]), extra)
        return self.split(node, extra, col, 0, statement=False)


def _ends_in_arguments(node: cst.BaseExpression) -> bool:
    """Does the chain's last operand end in a call or subscript with something inside?"""
    while isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)) and not node.lpar:
        node = node.right
    if isinstance(node, cst.Comparison) and not node.lpar:
        node = node.comparisons[-1].comparator
    return isinstance(node, cst.Call) and bool(node.args) and not node.rpar


def _first_call(node: cst.CSTNode) -> Optional[cst.Call]:
    """The first call with arguments, left to right, outside any lambda."""

    class V(cst.CSTVisitor):
        found: Optional[cst.Call] = None

        def visit_Call(self, n: cst.Call) -> bool:
            if self.found is None and n.args:
                self.found = n
            return self.found is None

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            return False

        def visit_FormattedString(self, n: cst.FormattedString) -> bool:
            return False

    v = V()
    node.visit(v)
    return v.found


# -- statements ------------------------------------------------------------------------

def _main(stmt: cst.CSTNode) -> Optional[str]:
    """The field holding the expression a formatter splits in this statement."""
    if isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return, cst.Expr)):
        return "value" if getattr(stmt, "value", None) is not None else None
    if isinstance(stmt, (cst.If, cst.While, cst.Assert)):
        return "test"
    if isinstance(stmt, cst.For):
        return "iter"
    return None


def _header(stmt: cst.CSTNode) -> cst.CSTNode:
    """A compound statement's header alone (``if test: pass``); a simple one as it is."""
    if isinstance(stmt, (cst.If, cst.While, cst.For)):
        return stmt.with_changes(body=cst.SimpleStatementSuite(body=[cst.Pass()]), leading_lines=[], orelse=None)
    return stmt


def _line_of(stmt: cst.CSTNode) -> str:
    return code(_header(stmt).with_changes(leading_lines=[])).split("\n", 1)[0]


def too_long(stmt: cst.CSTNode, base: int, width: int = WIDTH) -> bool:
    """Does a line of ``stmt`` (a compound one: of its header) pass ``width`` at indentation ``base``?"""
    if isinstance(stmt, cst.BaseCompoundStatement) and _main(stmt) is None:
        return False
    text = code(_header(stmt).with_changes(leading_lines=[]))
    return any(base + len(line) > width for line in text.splitlines())


def refit(stmt: cst.CSTNode, base: int, width: int = WIDTH):
    """A statement a fix changed in part or moved: split again when a line no longer fits,
    joined when it now fits on one line (a shorter name), else left as written."""
    return lay_out(stmt, base, width, join_only=not too_long(stmt, base, width))


def lay_out(stmt: cst.CSTNode, base: int, width: int = WIDTH, join_only: bool = False):
    """``stmt`` (a small statement's line, or a compound statement's header) laid out at
    indentation ``base``."""
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else stmt
    field = _main(small)
    if field is None:
        return stmt
    value = getattr(small, field)
    probe = small.with_changes(**{field: cst.Name(_PLACEHOLDER)})
    line = _line_of(stmt.with_changes(body=[probe]) if small is not stmt else probe)
    at = line.find(_PLACEHOLDER)
    if at < 0:
        return stmt
    # a compound header ends in ":"; a trailing comment counts, as the formatters count it
    tail = 1 if isinstance(small, cst.BaseCompoundStatement) else len(line) - at - len(_PLACEHOLDER)
    new = _Layout(base, width).expr(value, 0, base + at, tail, statement=True, join_only=join_only)
    if new is value:
        return stmt
    small = small.with_changes(**{field: new})
    return stmt.with_changes(body=[small]) if isinstance(stmt, cst.SimpleStatementLine) else small


def lay_out_built(node, base: int, moved: set[int], indent: int, width: int = WIDTH):
    """Lay out the statements a fix built (``node``: a statement or a FlattenSentinel of them),
    nested blocks included; a statement whose expression is in ``moved`` (ids of the nodes the
    fix was handed) is one it only moved: laid out again only if it no longer fits."""
    if isinstance(node, cst.FlattenSentinel):
        return cst.FlattenSentinel([lay_out_built(n, base, moved, indent, width) for n in node.nodes])
    if not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return node
    small = node.body[0] if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 else node
    field = _main(small)
    if field is not None:
        kept = id(small) in moved or id(getattr(small, field)) in moved
        node = refit(node, base, width) if kept else lay_out(node, base, width)
    if isinstance(node, cst.BaseCompoundStatement):
        node = _lay_out_blocks(node, base, moved, indent, width)
    return node


def _lay_out_blocks(node, base: int, moved: set[int], indent: int, width: int):
    changes = {}
    body = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock):
        inner = base + (len(body.indent) if body.indent is not None else indent)
        changes["body"] = body.with_changes(body=[lay_out_built(s, inner, moved, indent, width) for s in body.body])
    orelse = getattr(node, "orelse", None)
    if isinstance(orelse, cst.If):
        changes["orelse"] = lay_out_built(orelse, base, moved, indent, width)
    elif isinstance(orelse, cst.Else):
        changes["orelse"] = _lay_out_blocks(orelse, base, moved, indent, width)
    return node.with_changes(**changes) if changes else node
