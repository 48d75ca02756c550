"""GM4xx: validation guards on tensor values ([Trap]).

Every rewrite splits the statement on ``torch.compiler.is_compiling()``: compiled code gets an
in-graph check, eager code runs the ORIGINAL statement verbatim::

    if torch.compiler.is_compiling():
        torch._assert_async(torch.logical_not((x < 0).any()), 'negative')
    elif (x < 0).any():
        raise ValueError('negative')

* ``assert <tensor cond>, msg`` (GM401)             -> ``torch._assert_async(<cond>, msg)`` / ``else:`` the assert
* ``if <tensor cond>: raise E(msg)`` (GM402)         -> ``torch._assert_async(torch.logical_not(<cond>), msg)`` /
  ``elif <cond>:`` the raise; where the condition is one tensor as written and ``msg`` a string
  literal, the one line ``_mend_raise_if(<cond>, E, msg)`` instead (rewrites/fixes/runtime/guard.py,
  defined once in the file: the same split inside it, eager raising ``E(msg)`` from the helper)
* ``if not torch.equal(a, b): raise E(msg)`` (GM402) -> ``torch._check(a.shape == b.shape)`` +
  ``torch._assert_async((a == b).all(), msg)`` / ``elif not torch.equal(a, b):`` the raise
* ``assert list(t.size()) == [a, b]`` where Dynamo broke (GM401) -> one ``_mend_check`` per
  dimension (``torch._check(cond)``, or ``_assert_async`` for a 0-dim tensor item) / ``else:`` the assert
* ``torch._check_tensor_all(t[, msg])`` where Dynamo broke (GM301: it reads ``.item()`` of
  ``t.all()``; transformers' ``torch_compilable_check`` calls it while compiling, a break in
  every model that validates its image tokens) -> ``torch._assert_async(t.all(), msg)`` /
  ``else:`` the call

Dynamo resolves ``is_compiling()`` to a constant while tracing, so the compiled graph holds
only the check (no break) and eager code is the program as written: the same exception
type and message (a bare ``AssertionError()`` for an assert without message), the same
``python -O`` stripping. What changes under ``torch.compile`` only: a failing check raises
``RuntimeError`` (on CUDA asynchronously, at the next synchronisation), with the message when
it is a string literal, else ``"assertion failed: <condition>"`` (a computed message cannot be
built inside the graph); ``python -O`` does not strip the compiled check. ``torch._check``
gets no message under compile: a message closure is itself a graph break on some torch
versions (2.11: "Can't extract message from torch._check()").
``torch._assert_async(t, msg)`` and ``torch._check`` exist from torch 2.1,
``torch.compiler.is_compiling`` from 2.3.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Helper, Plan, Refusal, STATEMENT, Site
from rewrites.fixes.conditions import Refuse, convert_condition
from rewrites.fixes.facts import FunctionFacts
from rewrites.fixes.judgements import (IS_COMPILING, call, code, full_name, impurity, in_compile_split,
                                       is_string_literal, paren, strip_parens)
from rewrites.fixes.runtime import helper

RULES = ("GM401", "GM402", "GM301")
ORDER = 10

# A size list may hold a 0-dim tensor (Longformer's ``max_num_global_attn_indices`` is a
# ``.max()``): ``size(i) == t`` is then a tensor, which torch._check refuses; it is checked
# in the graph with _assert_async. Only compiled code calls the helper (eager runs the
# assert as written), and torch._check gets no message: a message closure is a graph
# break on torch 2.11.
CHECK_HELPER = Helper('''def _mend_check(cond, text):
    # mend GM401: one dimension of an assert on a size list, checked in compiled code
    if isinstance(cond, torch.Tensor):
        torch._assert_async(cond, text)
    else:
        torch._check(cond)
''')


def _condition_text(test: cst.BaseExpression, prefix: str = "assertion failed") -> cst.SimpleString:
    """``"assertion failed: <condition>"`` on one line, without quotes or backslashes:
    Inductor pastes an _assert_async message into generated C++ as a string literal, and a
    condition spanning lines (Longformer's size asserts) broke that literal."""
    text = " ".join(code(test).split()).replace('"', "'").replace("\\", "/")
    return cst.SimpleString(f'"{prefix}: {text}"')  # double quotes, as the formatters write them


def _compiled_message(msg: Optional[cst.BaseExpression], test: cst.BaseExpression,
                      prefix: str = "assertion failed") -> cst.BaseExpression:
    """The message of the compiled check: the original's when it is a string literal, else
    the condition's text (an f-string or a call cannot be built inside the graph)."""
    return msg if msg is not None and is_string_literal(msg) else _condition_text(test, prefix)


def _raise_message(exc: Optional[cst.BaseExpression], test: cst.BaseExpression) -> cst.BaseExpression:
    """``raise E('text')`` -> ``'text'``; otherwise the condition's text."""
    first = exc.args[0].value if isinstance(exc, cst.Call) and exc.args and exc.args[0].keyword is None else None
    return _compiled_message(first, test, "check failed")


def _split(compiled: list, eager_test: Optional[cst.BaseExpression], eager_body: cst.BaseSuite,
           leading, eager_orelse=None) -> cst.If:
    """``if torch.compiler.is_compiling(): <compiled>`` + the original statement for eager:
    ``elif <test>: <body>`` (a raise) or ``else: <body>`` (an assert)."""
    orelse = cst.Else(body=eager_body) if eager_test is None else cst.If(test=eager_test, body=eager_body,
                                                                          orelse=eager_orelse)
    return cst.If(test=cst.parse_expression(IS_COMPILING), body=cst.IndentedBlock(body=compiled), orelse=orelse,
                  leading_lines=list(leading))


def _own_line(stmt: cst.SimpleStatementLine) -> cst.IndentedBlock:
    return cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])])


def _line(small: cst.BaseSmallStatement, leading=()) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(body=[small], leading_lines=list(leading))


RAISE_IF = helper("guard")


def _one_call(node: cst.If, raise_node: cst.Raise, names, forced: bool, eq):
    """``if <tensor>: raise E("literal")`` -> a builder of the one line
    ``_mend_raise_if(<tensor>, E, "literal")``; None where the statement needs both arms
    written out: a condition that must be converted to be one tensor (eager code must evaluate
    the original), ``torch.equal`` (two checks), ``raise ... from``, an exception made with other
    arguments, or a message that is not a string literal (evaluated on every call, not only on a
    failure)."""
    if eq is not None or raise_node.cause is not None or not isinstance(raise_node.exc, cst.Call):
        return None
    exc = raise_node.exc
    if not isinstance(exc.func, (cst.Name, cst.Attribute)) or len(exc.args) != 1 or exc.args[0].keyword is not None \
            or exc.args[0].star or not is_string_literal(exc.args[0].value):
        return None
    try:
        if not convert_condition(node.test, names, forced).deep_equals(node.test):
            return None
    except Refuse:
        return None

    def build(updated: cst.If) -> cst.SimpleStatementLine:
        r: cst.Raise = updated.body.body[0].body[0]
        c = r.exc  # type: ignore[assignment]
        line = cst.Call(cst.Name("_mend_raise_if"), [cst.Arg(strip_parens(updated.test)), cst.Arg(c.func),  # type: ignore[union-attr]
                                                      cst.Arg(c.args[0].value)])  # type: ignore[union-attr]
        return _line(cst.Expr(line), updated.leading_lines)

    return build


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


def _tensor_all_check(node: cst.BaseExpression) -> bool:
    """``torch._check_tensor_all(cond)`` / ``(cond, message)``, positional (the message is a
    callable: compiled code names the condition instead, as for a computed message)."""
    return isinstance(node, cst.Call) and full_name(node.func) == "torch._check_tensor_all" \
        and len(node.args) in (1, 2) and all(a.keyword is None and not a.star for a in node.args) \
        and not impurity(node.args[-1].value)


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    asserts: list[cst.SimpleStatementLine] = []
    raises: list[cst.If] = []

    size_asserts: list = []
    tensor_checks: list[cst.SimpleStatementLine] = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, n) -> None:
            if len(n.body) == 1 and isinstance(n.body[0], cst.Expr) and _tensor_all_check(n.body[0].value) \
                    and not in_compile_split(an, n):
                tensor_checks.append(n)
            if len(n.body) == 1 and isinstance(n.body[0], cst.Assert):
                got = _size_list_compare(n.body[0].test)
                if in_compile_split(an, n):
                    return  # already split (the eager side of a fix): idempotent
                if got is not None:
                    size_asserts.append((n, got[0], got[1]))
                else:
                    asserts.append(n)

        def visit_If(self, n: cst.If) -> None:
            body = n.body.body if isinstance(n.body, cst.IndentedBlock) else []
            if (n.orelse is None and not in_compile_split(an, n) and len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine)
                    and len(body[0].body) == 1 and isinstance(body[0].body[0], cst.Raise)):
                raises.append(n)

    an.visit_covering(V(), ctx)
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
        site = Site("GM401", start, end, "assert on a tensor -> torch._assert_async under compile; eager "
                    "keeps the assert", strategy="assert_async", claims=STATEMENT)

        def build(updated, names=names, forced=forced):
            a: cst.Assert = updated.body[0]
            cond = convert_condition(a.test, names, forced)
            check = _line(cst.Expr(call("torch._assert_async", cond, _compiled_message(a.msg, a.test))))
            return _split([check], None, _own_line(updated), updated.leading_lines)

        result.edits.append(Edit(stmt, build, site))

    for stmt, sized, elems in size_asserts if ctx.wants("GM401") else []:
        start, end = an.span(stmt)
        # only where Dynamo broke on it: elsewhere the list comparison traces fine
        if ctx.lines is None or not ctx.covers(start, end):
            continue
        site = Site("GM401", start, end, "assert on a size list -> torch._check per dimension under compile; "
                    "eager keeps the assert", strategy="check", claims=STATEMENT)

        def build_size(updated, n=len(elems)):
            a: cst.Assert = updated.body[0]
            got = _size_list_compare(a.test)
            if got is None:
                return updated
            t, items = got
            parts = [cst.Comparison(left=call_method(t, "dim"), comparisons=[
                cst.ComparisonTarget(cst.Equal(), cst.Integer(str(n)))])]
            for i, e in enumerate(items):
                parts.append(cst.Comparison(left=call_method(t, "size", cst.Integer(str(i))), comparisons=[
                    cst.ComparisonTarget(cst.Equal(), e)]))
            # one check per dimension, in order (the dim check first, so size(i) exists)
            text = _condition_text(a.test)
            checks = [_line(cst.Expr(call(CHECK_HELPER.name, p_, text))) for p_ in parts]
            return _split(checks, None, _own_line(updated), updated.leading_lines)

        result.edits.append(Edit(stmt, build_size, site, helpers=(CHECK_HELPER,)))

    for stmt in tensor_checks if ctx.wants("GM301") else []:
        start, end = an.span(stmt)
        # only where Dynamo broke on it: eager code and a frame Dynamo never traces need nothing
        if ctx.lines is None or not ctx.covers(start, end):
            continue
        site = Site("GM301", start, end, "torch._check_tensor_all -> torch._assert_async under compile; eager "
                    "keeps the call", strategy="assert_async", claims=STATEMENT)

        def build_all(updated):
            c: cst.Call = updated.body[0].value
            cond = c.args[0].value
            check = call("torch._assert_async", call_method(paren(cond), "all"), _condition_text(cond, "check failed"))
            return _split([_line(cst.Expr(check))], None, _own_line(updated), updated.leading_lines)

        result.edits.append(Edit(stmt, build_all, site))

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
        one = _one_call(node, raise_node, names, forced, eq)
        if one is not None:
            site = Site("GM402", start, end, "`if ...: raise` on a tensor -> one _mend_raise_if call: eager raises as "
                        "before, compiled code checks with torch._assert_async", strategy="assert_async", claims=STATEMENT)
            result.edits.append(Edit(node, one, site, helpers=(RAISE_IF,)))
            continue
        site = Site("GM402", start, end, "`if ...: raise` on a tensor -> torch._assert_async under compile; "
                    "eager keeps the raise", strategy="assert_async", claims=STATEMENT)

        def build_raise(updated, names=names, forced=forced):
            r: cst.Raise = updated.body.body[0].body[0]
            msg = _raise_message(r.exc, updated.test)
            eager = dict(eager_test=updated.test, eager_body=updated.body, leading=updated.leading_lines)
            eqa = _equal_args(updated.test)
            if eqa is not None:
                a, b = eqa
                shape_ok = cst.Comparison(left=cst.Attribute(value=a, attr=cst.Name("shape")), comparisons=[
                    cst.ComparisonTarget(cst.Equal(), cst.Attribute(value=b, attr=cst.Name("shape")))])
                eq_all = cst.Call(func=cst.Attribute(value=cst.Comparison(
                    left=a, comparisons=[cst.ComparisonTarget(cst.Equal(), b)],
                    lpar=[cst.LeftParen()], rpar=[cst.RightParen()]), attr=cst.Name("all")), args=[])
                return _split([_line(cst.Expr(call("torch._check", shape_ok))),
                               _line(cst.Expr(call("torch._assert_async", eq_all, msg)))], **eager)
            cond = convert_condition(updated.test, names, forced)
            return _split([_line(cst.Expr(call("torch._assert_async", call("torch.logical_not", cond), msg)))], **eager)

        result.edits.append(Edit(node, build_raise, site))
    return result


CASES = [
    Case(
        "import torch\ndef f(x):\n    assert (x >= 0).all(), 'negative input'\n    return x.sqrt()\n",
        "import torch\ndef f(x):\n    if torch.compiler.is_compiling():\n"
        "        torch._assert_async((x >= 0).all(), 'negative input')\n"
        "    else:\n        assert (x >= 0).all(), 'negative input'\n    return x.sqrt()\n",
    ),
    Case(  # one line: eager raises the same ValueError a caller's ``except ValueError`` catches
        "import torch\ndef f(x):\n    if (x < 0).any():\n        raise ValueError('negative input')\n    return x.sqrt()\n",
        "import torch\n\n\n" + RAISE_IF.source + "\n\ndef f(x):\n"
        "    _mend_raise_if((x < 0).any(), ValueError, 'negative input')\n    return x.sqrt()\n",
    ),
    Case(  # a condition that must be made one tensor: eager keeps the original, in its own arm
        "import torch\ndef f(x):\n    if x.min() < 0 or x.max() > 1:\n        raise ValueError('out of range')\n"
        "    return x.sqrt()\n",
        "import torch\ndef f(x):\n    if torch.compiler.is_compiling():\n"
        "        torch._assert_async(\n            torch.logical_not(torch.logical_or(x.min() < 0, x.max() > 1)),\n"
        "            'out of range',\n        )\n"
        "    elif x.min() < 0 or x.max() > 1:\n        raise ValueError('out of range')\n    return x.sqrt()\n",
    ),
    Case(
        "import torch\ndef f(a, b):\n    if not torch.equal(a, b):\n        raise RuntimeError('tied weights differ')\n    return a + b\n",
        "import torch\ndef f(a, b):\n    if torch.compiler.is_compiling():\n        torch._check(a.shape == b.shape)\n"
        "        torch._assert_async((a == b).all(), 'tied weights differ')\n"
        "    elif not torch.equal(a, b):\n        raise RuntimeError('tied weights differ')\n    return a + b\n",
    ),
    Case(  # a computed message cannot be built in the graph: compiled code names the condition
        "import torch\ndef f(x):\n    assert (x >= 0).all(), f'min {x.min()}'  # inputs\n    return x\n",
        "import torch\ndef f(x):\n    if torch.compiler.is_compiling():\n"
        "        torch._assert_async((x >= 0).all(), \"assertion failed: (x >= 0).all()\")\n"
        "    else:\n        assert (x >= 0).all(), f'min {x.min()}'  # inputs\n    return x\n",
    ),
]

# what every size-list rewrite puts above the function (the helper's exact text)
_CHECKED_PRELUDE = (
    "import torch\n\n\ndef _mend_check(cond, text):\n"
    "    # mend GM401: one dimension of an assert on a size list, checked in compiled code\n"
    "    if isinstance(cond, torch.Tensor):\n        torch._assert_async(cond, text)\n"
    "    else:\n        torch._check(cond)\n\n\n"
)

CASES += [
    # only where Dynamo broke on the list comparison; a condition over
    # several lines becomes a one-line message (it is pasted into Inductor's C++); eager runs
    # the assert as written (AssertionError, its own message)
    Case(
        "def f(x, n):\n    assert list(x.size()) == [n, 4], f'bad {x.size()}'\n    return x\n",
        _CHECKED_PRELUDE + "def f(x, n):\n    if torch.compiler.is_compiling():\n"
        "        _mend_check(x.dim() == 2, \"assertion failed: list(x.size()) == [n, 4]\")\n"
        "        _mend_check(x.size(0) == n, \"assertion failed: list(x.size()) == [n, 4]\")\n"
        "        _mend_check(x.size(1) == 4, \"assertion failed: list(x.size()) == [n, 4]\")\n"
        "    else:\n        assert list(x.size()) == [n, 4], f'bad {x.size()}'\n"
        "    return x\n",
        lines={2},
    ),
    Case(
        "def f(x, n):\n    assert list(x.size()) == [\n        n,\n        4,\n    ]\n    return x\n",
        _CHECKED_PRELUDE + "def f(x, n):\n    if torch.compiler.is_compiling():\n"
        "        _mend_check(x.dim() == 2, \"assertion failed: list(x.size()) == [ n, 4, ]\")\n"
        "        _mend_check(x.size(0) == n, \"assertion failed: list(x.size()) == [ n, 4, ]\")\n"
        "        _mend_check(x.size(1) == 4, \"assertion failed: list(x.size()) == [ n, 4, ]\")\n"
        "    else:\n        assert list(x.size()) == [\n            n,\n            4,\n        ]\n"
        "    return x\n",
        lines={2},
    ),
]

# transformers' torch_compilable_check, on the path it takes while compiling
CASES += [
    Case(
        "import torch\n\n\ndef check(cond):\n    if is_tracing():\n        if isinstance(cond, torch.Tensor):\n"
        "            torch._check_tensor_all(cond)\n        else:\n            torch._check(cond)\n        return\n",
        "import torch\n\n\ndef check(cond):\n    if is_tracing():\n        if isinstance(cond, torch.Tensor):\n"
        "            if torch.compiler.is_compiling():\n"
        "                torch._assert_async(cond.all(), \"check failed: cond\")\n"
        "            else:\n                torch._check_tensor_all(cond)\n        else:\n            torch._check(cond)\n"
        "        return\n",
        lines={7},
    ),
    Case("import torch\ndef f(x):\n    torch._check_tensor_all(x > 0, lambda: 'positive')\n    return x\n",
         "import torch\ndef f(x):\n    if torch.compiler.is_compiling():\n"
         "        torch._assert_async((x > 0).all(), \"check failed: x > 0\")\n"
         "    else:\n        torch._check_tensor_all(x > 0, lambda: 'positive')\n    return x\n", lines={3}),
    Case("import torch\ndef f(x):\n    torch._check_tensor_all(x > 0)\n    return x\n"),  # no break reported there
]

# left alone
CASES += [
    Case("def f(x, n):\n    assert list(x.size()) == [n, 4]\n    return x\n"),  # no break reported there
    Case("def f(x, n):\n    assert n > 0, 'n'\n    return x\n"),
    Case("def f(x):\n    assert x.dim() == 2\n    return x\n"),
]
