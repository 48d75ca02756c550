"""GM4xx: validation guards on tensor values ([Trap]).

* ``assert <tensor cond>, msg`` (GM401)            -> ``torch._assert_async(<cond>, msg)``
* ``if <tensor cond>: raise E(msg)`` (GM402)        -> ``torch._assert_async(torch.logical_not(<cond>), msg)``
* ``if not torch.equal(a, b): raise E(msg)`` (GM402) ->
  ``torch._check(a.shape == b.shape, lambda: msg)`` + ``torch._assert_async((a == b).all(), msg)``

The check stays in the graph: no break, and a failing check still stops the program
with the message kept. Differences a user sees: the error is a ``RuntimeError`` (not
``AssertionError`` / ``E``); on CUDA ``_assert_async`` reports asynchronously (at the
next synchronisation); ``python -O`` no longer strips the former ``assert``.
``torch._assert_async(t, msg)`` exists from torch 2.1, ``torch._check`` from 2.1.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import (HELPERS, Analysis, Context, Edit, FunctionFacts, Plan, Refusal, Site, call,
                                 code, full_name, impurity, strip_parens)
from rewrites.fixes.gm1_where import Refuse, convert_condition

RULES = ("GM401", "GM402")

CHECK_HELPER = "_mend_check"
# A size list may hold a 0-dim tensor (Longformer's ``max_num_global_attn_indices`` is a
# ``.max()``): ``size(i) == t`` is then a tensor, which torch._check refuses; it is checked
# in the graph with _assert_async. Dynamo cannot convert a message closure that formats
# values, so under compile the message is the condition's text; eager keeps the assert's own.
HELPERS[CHECK_HELPER] = '''def _mend_check(cond, message, text):
    # mend GM401: one dimension of an assert on a size list
    if isinstance(cond, torch.Tensor):
        torch._assert_async(cond, text)
    elif torch.compiler.is_compiling():
        torch._check(cond, lambda: text)
    else:
        torch._check(cond, message)
'''


def _condition_text(test: cst.BaseExpression) -> cst.SimpleString:
    """``'assertion failed: <condition>'`` on one line, without quotes or backslashes:
    Inductor pastes an _assert_async message into generated C++ as a string literal, and a
    condition spanning lines (Longformer's size asserts) broke that literal."""
    text = " ".join(code(test).split()).replace('"', "'").replace("\\", "/")
    return cst.SimpleString(repr(f"assertion failed: {text}"))


def _assert_message(a: cst.Assert) -> cst.BaseExpression:
    """The assert's own message, or the one Python would have shown (its condition)."""
    return a.msg if a.msg is not None else _condition_text(a.test)


def _message(exc: Optional[cst.BaseExpression], fallback: str) -> cst.BaseExpression:
    if exc is None:
        return cst.SimpleString(repr(fallback))
    if isinstance(exc, cst.Call):
        if exc.args and exc.args[0].keyword is None:
            return exc.args[0].value
        return cst.SimpleString(repr(full_name(exc.func) or fallback))
    return cst.SimpleString(repr(fallback))


def _line(small: cst.BaseSmallStatement, leading=()) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(body=[small], leading_lines=list(leading))


def _equal_args(test: cst.BaseExpression) -> Optional[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """``not torch.equal(a, b)`` -> (a, b)."""
    t = strip_parens(test)
    if isinstance(t, cst.UnaryOperation) and isinstance(t.operator, cst.Not):
        inner = strip_parens(t.expression)
        if isinstance(inner, cst.Call) and full_name(inner.func) == "torch.equal" and len(inner.args) == 2:
            return inner.args[0].value, inner.args[1].value
    return None


def call_method(obj: cst.BaseExpression, name: str, *args: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=obj, attr=cst.Name(name)), args=[cst.Arg(a) for a in args])


def _size_list_compare(test: cst.BaseExpression):
    """``list(t.size()) == [a, b, c]`` -> (t, [a, b, c]); else None. Dynamo cannot compare a
    list holding symbolic sizes (a break); ``torch._check(t.dim() == 3)``, then
    ``torch._check(t.size(0) == a)``... is the same condition (equal lists: equal lengths,
    equal items; the checks stop at the first failure) and traces even on sizes that come
    from data (unbacked). Differences: a failure raises RuntimeError (not AssertionError),
    and ``python -O`` keeps the checks."""
    t = strip_parens(test)
    if not (isinstance(t, cst.Comparison) and len(t.comparisons) == 1
            and isinstance(t.comparisons[0].operator, cst.Equal)):
        return None
    left, right = strip_parens(t.left), strip_parens(t.comparisons[0].comparator)
    if isinstance(left, (cst.List, cst.Tuple)) and not isinstance(right, (cst.List, cst.Tuple)):
        left, right = right, left
    if not isinstance(right, cst.List) or any(not isinstance(e, cst.Element) for e in right.elements):
        return None
    if not (isinstance(left, cst.Call) and full_name(left.func) == "list" and len(left.args) == 1):
        return None
    inner = strip_parens(left.args[0].value)
    if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "size" \
            and not inner.args:
        obj = inner.func.value
    elif isinstance(inner, cst.Attribute) and inner.attr.value == "shape":
        obj = inner.value
    else:
        return None
    if impurity(obj) or any(impurity(e.value) for e in right.elements):
        return None
    return obj, [e.value for e in right.elements]


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    asserts: list[cst.SimpleStatementLine] = []
    raises: list[cst.If] = []

    size_asserts: list = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, n) -> None:
            if len(n.body) == 1 and isinstance(n.body[0], cst.Assert):
                got = _size_list_compare(n.body[0].test)
                if got is not None:
                    size_asserts.append((n, got[0], got[1]))
                else:
                    asserts.append(n)

        def visit_If(self, n: cst.If) -> None:
            body = n.body.body if isinstance(n.body, cst.IndentedBlock) else []
            if (n.orelse is None and len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine)
                    and len(body[0].body) == 1 and isinstance(body[0].body[0], cst.Raise)):
                raises.append(n)

    an.module.visit(V())
    facts: dict[int, FunctionFacts] = {}

    def tnames(node):
        fn = an.enclosing_function(node)
        if fn is None:
            return None
        if id(fn) not in facts:
            facts[id(fn)] = FunctionFacts(an, fn)
        return facts[id(fn)].tensor_names(an.span(node)[0])

    for stmt in asserts if ctx.wants("GM401") else []:
        start, end = an.span(stmt)
        names = tnames(stmt)
        if names is None or not ctx.covers(start, end):
            continue
        node: cst.Assert = stmt.body[0]
        forced = bool(set(range(start, end + 1)) & ctx.tensor_lines)
        try:
            convert_condition(node.test, names, forced)
        except Refuse as exc:
            if ctx.lines is not None:
                result.refusals.append(Refusal("GM401", start, str(exc)))
            continue
        if node.msg is not None and impurity(node.msg):
            result.refusals.append(Refusal("GM401", start, f"the message {impurity(node.msg)}"))
            continue
        site = Site("GM401", start, end, "assert on a tensor -> torch._assert_async (message kept)",
                    strategy="assert_async")

        def build(updated, names=names, forced=forced):
            a: cst.Assert = updated.body[0]
            cond = convert_condition(a.test, names, forced)
            msg = _assert_message(a)
            return _line(cst.Expr(call("torch._assert_async", cond, msg)), updated.leading_lines).with_changes(
                trailing_whitespace=updated.trailing_whitespace)

        result.edits.append(Edit(stmt, build, site))

    for stmt, sized, elems in size_asserts if ctx.wants("GM401") else []:
        start, end = an.span(stmt)
        # only where Dynamo broke on it: elsewhere the list comparison traces fine
        if ctx.lines is None or not ctx.covers(start, end):
            continue
        site = Site("GM401", start, end, "assert on a size list -> torch._check per dimension (message kept)",
                    strategy="check")

        def build_size(updated, n=len(elems)):
            a: cst.Assert = updated.body[0]
            got = _size_list_compare(a.test)
            if got is None:
                return updated
            t, items = got
            msg = _assert_message(a)
            parts = [cst.Comparison(left=call_method(t, "dim"), comparisons=[
                cst.ComparisonTarget(cst.Equal(), cst.Integer(str(n)))])]
            for i, e in enumerate(items):
                parts.append(cst.Comparison(left=call_method(t, "size", cst.Integer(str(i))), comparisons=[
                    cst.ComparisonTarget(cst.Equal(), e)]))
            # one check per dimension, in order (the dim check first, so size(i) exists);
            # the message is built only on failure, as the assert's was
            lam = cst.Lambda(params=cst.Parameters(), body=msg)
            text = _condition_text(a.test)
            lines = [_line(cst.Expr(call(CHECK_HELPER, p_, lam, text)), updated.leading_lines if i == 0 else ())
                     for i, p_ in enumerate(parts)]
            return cst.FlattenSentinel(lines)

        result.edits.append(Edit(stmt, build_size, site, helpers=(CHECK_HELPER,)))

    for node in raises if ctx.wants("GM402") else []:
        start, end = an.span(node)
        names = tnames(node)
        if names is None:
            continue
        tl = an.span(node.test)
        if ctx.lines is not None and not (set(range(tl[0], end + 1)) & ctx.lines):
            continue
        raise_node: cst.Raise = node.body.body[0].body[0]
        eq = _equal_args(node.test)
        forced = bool(set(range(tl[0], tl[1] + 1)) & ctx.tensor_lines)
        if eq is None:
            try:
                convert_condition(node.test, names, forced)
            except Refuse as exc:
                if ctx.lines is not None and forced:
                    result.refusals.append(Refusal("GM402", start, str(exc)))
                continue
        if raise_node.exc is not None and impurity(raise_node.exc):
            result.refusals.append(Refusal("GM402", start, f"the exception {impurity(raise_node.exc)}"))
            continue
        site = Site("GM402", start, end, "`if ...: raise` on a tensor -> torch._assert_async (message kept)",
                    strategy="assert_async")

        def build_raise(updated, names=names, forced=forced):
            r: cst.Raise = updated.body.body[0].body[0]
            msg = _message(r.exc, "check failed")
            eqa = _equal_args(updated.test)
            if eqa is not None:
                a, b = eqa
                shape_ok = cst.Comparison(left=cst.Attribute(value=a, attr=cst.Name("shape")), comparisons=[
                    cst.ComparisonTarget(cst.Equal(), cst.Attribute(value=b, attr=cst.Name("shape")))])
                check = call("torch._check", shape_ok, cst.Lambda(params=cst.Parameters(), body=msg))
                eq_all = cst.Call(func=cst.Attribute(value=cst.Comparison(
                    left=a, comparisons=[cst.ComparisonTarget(cst.Equal(), b)],
                    lpar=[cst.LeftParen()], rpar=[cst.RightParen()]), attr=cst.Name("all")), args=[])
                return cst.FlattenSentinel([_line(cst.Expr(check), updated.leading_lines),
                                            _line(cst.Expr(call("torch._assert_async", eq_all, msg)))])
            cond = convert_condition(updated.test, names, forced)
            return _line(cst.Expr(call("torch._assert_async", call("torch.logical_not", cond), msg)),
                         updated.leading_lines)

        result.edits.append(Edit(node, build_raise, site))
    return result


FIXED = [
    (
        "import torch\ndef f(x):\n    assert (x >= 0).all(), 'negative input'\n    return x.sqrt()\n",
        "import torch\ndef f(x):\n    torch._assert_async((x >= 0).all(), 'negative input')\n    return x.sqrt()\n",
    ),
    (
        "import torch\ndef f(x):\n    if (x < 0).any():\n        raise ValueError('negative input')\n    return x.sqrt()\n",
        "import torch\ndef f(x):\n    torch._assert_async(torch.logical_not((x < 0).any()), 'negative input')\n    return x.sqrt()\n",
    ),
    (
        "import torch\ndef f(a, b):\n    if not torch.equal(a, b):\n        raise RuntimeError('tied weights differ')\n    return a + b\n",
        "import torch\ndef f(a, b):\n    torch._check(a.shape == b.shape, lambda: 'tied weights differ')\n"
        "    torch._assert_async((a == b).all(), 'tied weights differ')\n    return a + b\n",
    ),
]

# what every size-list rewrite puts above the function (the helper's exact text)
_CHECKED_PRELUDE = (
    "import torch\n\n\ndef _mend_check(cond, message, text):\n"
    "    # mend GM401: one dimension of an assert on a size list\n"
    "    if isinstance(cond, torch.Tensor):\n        torch._assert_async(cond, text)\n"
    "    elif torch.compiler.is_compiling():\n        torch._check(cond, lambda: text)\n"
    "    else:\n        torch._check(cond, message)\n\n\n"
)

FIXED_WITH_LINES = [
    # (before, after, lines): only where Dynamo broke on the list comparison; a condition over
    # several lines becomes a one-line message (it is pasted into Inductor's C++)
    (
        "def f(x, n):\n    assert list(x.size()) == [n, 4], f'bad {x.size()}'\n    return x\n",
        _CHECKED_PRELUDE + "def f(x, n):\n"
        "    _mend_check(x.dim() == 2, lambda: f'bad {x.size()}', 'assertion failed: list(x.size()) == [n, 4]')\n"
        "    _mend_check(x.size(0) == n, lambda: f'bad {x.size()}', 'assertion failed: list(x.size()) == [n, 4]')\n"
        "    _mend_check(x.size(1) == 4, lambda: f'bad {x.size()}', 'assertion failed: list(x.size()) == [n, 4]')\n"
        "    return x\n",
        {2},
    ),
    (
        "def f(x, n):\n    assert list(x.size()) == [\n        n,\n        4,\n    ], 'bad'\n    return x\n",
        _CHECKED_PRELUDE + "def f(x, n):\n"
        "    _mend_check(x.dim() == 2, lambda: 'bad', 'assertion failed: list(x.size()) == [ n, 4, ]')\n"
        "    _mend_check(x.size(0) == n, lambda: 'bad', 'assertion failed: list(x.size()) == [ n, 4, ]')\n"
        "    _mend_check(x.size(1) == 4, lambda: 'bad', 'assertion failed: list(x.size()) == [ n, 4, ]')\n"
        "    return x\n",
        {2},
    ),
]

NEGATIVE = [
    ("def f(x, n):\n    assert list(x.size()) == [n, 4]\n    return x\n", None),  # no break reported there
    ("def f(x, n):\n    assert n > 0, 'n'\n    return x\n", None),
    ("def f(x):\n    assert x.dim() == 2\n    return x\n", None),
]
