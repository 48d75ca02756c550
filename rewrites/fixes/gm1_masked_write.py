"""GM101: a data-dependent guard around a masked write that changes nothing when the guard is false.

HuBERT's pre-training loss (torchaudio) masks the negatives that equal the positive::

    neg_is_pos = (pos == negs).all(-1)
    ...
    if neg_is_pos.any():
        logits[1:][neg_is_pos] = float("-inf")

The branch reads the mask on the host: a graph break. A write through a boolean mask with no
element set writes nothing, so the guard can go and the write stays, in the graph:

    logits[1:][neg_is_pos] = float("-inf")

Rewritten only where the guard is ``M.any()`` / ``torch.any(M)`` with no ``else``, ``M`` a
name bound once in the function, before the ``if``, to a boolean tensor (a comparison, a
method that returns one such as ``.all()`` / ``.isnan()``, ``~`` / ``&`` / ``|`` of those), and
every statement of the body one of ``X[M] = v``, ``X[M] += v`` (and the other augmented
operators) or ``X.masked_fill_(M, v)``: the mask is the whole index, ``X`` a name, attribute
or subscript with no call in it, ``v`` a number, a name, an attribute or ``float("...")``,
so that running the write on an empty mask evaluates nothing that could raise or draw. What
stays observable and is left to verification: autograd sees one more in-place op on ``X``
(the values and gradients are the same; an input saved for backward that the original left
untouched now has a new version, which train mode checks), and the condition goes both ways
on verification's inputs as for every rewritten condition.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Plan, Refusal, Site
from rewrites.fixes.facts import FunctionFacts
from rewrites.fixes.judgements import code, full_name, strip_parens
from rewrites.tensors import BOOL_RESULTS

RULES = ("GM101",)
ORDER = 78  # before gm1_hoist (79) and gm1_where (80), which refuse an arm that writes a subscript


def _mask_of(test: cst.BaseExpression) -> Optional[str]:
    """``M.any()`` / ``torch.any(M)`` -> "M"."""
    t = strip_parens(test)
    if not isinstance(t, cst.Call):
        return None
    if isinstance(t.func, cst.Attribute) and t.func.attr.value == "any" and not t.args:
        inner = strip_parens(t.func.value)
    elif full_name(t.func) == "torch.any" and len(t.args) == 1 and t.args[0].keyword is None:
        inner = strip_parens(t.args[0].value)
    else:
        return None
    return inner.value if isinstance(inner, cst.Name) else None


def _boolean(value: Optional[cst.BaseExpression]) -> bool:
    """Whether ``value`` is a boolean tensor by how it is computed."""
    v = strip_parens(value) if value is not None else None
    if isinstance(v, cst.Comparison):
        return True
    if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.BitInvert):
        return _boolean(v.expression)
    if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return _boolean(v.left) and _boolean(v.right)
    if isinstance(v, cst.Call):
        if isinstance(v.func, cst.Attribute) and v.func.attr.value in BOOL_RESULTS:
            return True
        name = full_name(v.func) or ""
        return name.startswith("torch.") and name.rsplit(".", 1)[1] in BOOL_RESULTS
    return False


def _plain(node: cst.BaseExpression) -> bool:
    """A name, attribute or subscript (with slices and literal indices) and no call in it."""
    n = strip_parens(node)
    if isinstance(n, cst.Name):
        return True
    if isinstance(n, cst.Attribute):
        return _plain(n.value)
    if isinstance(n, cst.Subscript):
        for el in n.slice:
            s = el.slice
            if isinstance(s, cst.Index) and not isinstance(strip_parens(s.value), (cst.Integer, cst.Name, cst.Ellipsis)):
                return False
            if isinstance(s, cst.Slice) and any(p is not None and not isinstance(strip_parens(p), (cst.Integer, cst.Name))
                                                and not (isinstance(p, cst.UnaryOperation) and isinstance(p.expression, cst.Integer))
                                                for p in (s.lower, s.upper, s.step)):
                return False
        return _plain(n.value)
    return False


def _fill(node: cst.BaseExpression) -> bool:
    """A value whose evaluation cannot raise or draw: a number, a name, an attribute, ``float("...")``."""
    n = strip_parens(node)
    if isinstance(n, cst.UnaryOperation) and isinstance(n.operator, (cst.Minus, cst.Plus)):
        n = strip_parens(n.expression)
    if isinstance(n, (cst.Integer, cst.Float, cst.Name)):
        return True
    if isinstance(n, cst.Attribute):
        return _fill(n.value)
    return isinstance(n, cst.Call) and full_name(n.func) == "float" and len(n.args) == 1 \
        and isinstance(n.args[0].value, cst.SimpleString)


def _masked_write(stmt: cst.BaseStatement, mask: str) -> Optional[str]:
    """None when ``stmt`` is a write through ``mask`` alone, else why not."""
    shown = code(stmt).strip()
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return f"`{shown}` is not one masked write"
    s = stmt.body[0]
    if isinstance(s, (cst.Assign, cst.AugAssign)):
        target = s.targets[0].target if isinstance(s, cst.Assign) and len(s.targets) == 1 else \
            s.target if isinstance(s, cst.AugAssign) else None
        if not isinstance(target, cst.Subscript) or len(target.slice) != 1 \
                or not isinstance(target.slice[0].slice, cst.Index) or code(target.slice[0].slice.value) != mask:
            return f"`{shown}` writes through an index other than `{mask}`"
        if not _plain(target.value):
            return f"`{shown}` writes into an expression with a call in it"
        return None if _fill(s.value) else f"`{shown}` computes the value it writes"
    if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and isinstance(s.value.func, cst.Attribute) \
            and s.value.func.attr.value == "masked_fill_" and len(s.value.args) == 2:
        a, b = s.value.args
        if a.keyword is not None or code(a.value) != mask:
            return f"`{shown}` fills through a mask other than `{mask}`"
        if not _plain(s.value.func.value):
            return f"`{shown}` writes into an expression with a call in it"
        return None if _fill(b.value) else f"`{shown}` computes the value it writes"
    return f"`{shown}` is not a masked write"


def _through(stmt: cst.BaseStatement, mask: str) -> bool:
    """Whether ``stmt`` writes through ``mask`` (``X[mask] = ...``, ``X.masked_fill_(mask, ...)``)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    s = stmt.body[0]
    targets = [t.target for t in s.targets] if isinstance(s, cst.Assign) else \
        [s.target] if isinstance(s, cst.AugAssign) else []
    if any(isinstance(t, cst.Subscript) and any(isinstance(e.slice, cst.Index) and code(e.slice.value) == mask
                                                 for e in t.slice) for t in targets):
        return True
    return isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and isinstance(s.value.func, cst.Attribute) \
        and s.value.func.attr.value == "masked_fill_" and bool(s.value.args) and code(s.value.args[0].value) == mask


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not ctx.wants("GM101"):
        return result
    ifs: list[cst.If] = []

    class V(cst.CSTVisitor):
        def visit_If(self, n: cst.If) -> None:
            ifs.append(n)

    an.visit_covering(V(), ctx)
    facts: dict[int, FunctionFacts] = {}
    for node in ifs:
        mask = _mask_of(node.test)
        start, end = an.span(node)
        t0, t1 = an.span(node.test)
        if mask is None or node.orelse is not None or isinstance(an.parent(node), cst.If) \
                or ctx.lines is not None and not set(range(t0, t1 + 1)) & ctx.lines:
            continue
        fn = an.enclosing_function(node)
        if fn is None:
            continue
        f = facts.setdefault(id(fn), FunctionFacts(an, fn))
        bound = [(line, value) for name, line, value in f.bindings if name == mask]
        why = None
        if len(bound) != 1 or bound[0][0] >= start:
            why = f"`{mask}` is not bound once, before the `if`" if mask not in f.params else None
            if why is None:
                continue  # a parameter: what it holds is the caller's (gm1_where says why it refuses)
        elif not _boolean(bound[0][1]):
            why = f"`{mask}` is not a boolean tensor by how it is computed (line {bound[0][0]})"
        else:
            why = next((w for w in map(lambda s: _masked_write(s, mask), node.body.body) if w), None)
        if why:
            if any(_through(s, mask) for s in node.body.body):  # the pattern, short of a condition
                result.refusals.append(Refusal("GM101", start, f"the guard of a masked write kept: {why}"))
            continue
        site = Site("GM101", start, end, f"`if {code(node.test)}:` dropped: a write through a mask with no "
                    "element set writes nothing", conditions=[an.rng(node.test)], strategy="masked_write")

        def build(updated: cst.If) -> cst.FlattenSentinel:
            body = list(updated.body.body)
            body[0] = body[0].with_changes(leading_lines=updated.leading_lines)
            return cst.FlattenSentinel(body)

        result.edits.append(Edit(node, build, site))
    return result


_HUBERT = '''import torch


def logits_of(pos, negs, logits):
    neg_is_pos = (pos == negs).all(-1)
    if neg_is_pos.any():
        logits[1:][neg_is_pos] = float("-inf")
    return logits
'''

CASES = [
    Case(_HUBERT, _HUBERT.replace('    if neg_is_pos.any():\n        logits[1:][neg_is_pos] = float("-inf")\n',
                                  '    logits[1:][neg_is_pos] = float("-inf")\n'), lines={6}),
    Case('''import torch


def clip(x, y, fill):
    bad = ~torch.isfinite(x) | (y > 3)
    if torch.any(bad):
        x.masked_fill_(bad, fill)
        y[bad] += 1
    return x + y
''', '''import torch


def clip(x, y, fill):
    bad = ~torch.isfinite(x) | (y > 3)
    x.masked_fill_(bad, fill)
    y[bad] += 1
    return x + y
''', lines={6}),
]

# left alone, with the reason where the body holds a masked write
CASES += [
    Case(_HUBERT.replace('float("-inf")', "logits.max()"), lines={6}, reason="computes the value it writes"),
    Case(_HUBERT.replace("(pos == negs).all(-1)", "pos.long()"), lines={6}, reason="not a boolean tensor"),
    Case(_HUBERT.replace('        logits[1:][neg_is_pos] = float("-inf")\n',
                         '        logits[1:][neg_is_pos] = float("-inf")\n        print("masked")\n'), lines={6},
         reason="`print(\"masked\")` is not a masked write"),
    Case(_HUBERT.replace("logits[1:][neg_is_pos]", "logits[1:][neg_is_pos, 0]"), lines={6}),
    Case(_HUBERT.replace("    return logits\n", "    else:\n        logits = logits * 2\n    return logits\n"),
         lines={6}),
]
