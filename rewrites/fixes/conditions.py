"""Tensor conditions as torch expressions: what the test of an ``if`` becomes in a
``torch.where`` (gm1_where), in front of hoisted arms (gm1_hoist) and in an in-graph check
(gm4_guards); ``Refuse`` is how a planner says it will not rewrite, and why."""

from __future__ import annotations

import libcst as cst

from rewrites.fixes.judgements import (call, calls_outside_torch, code, full_name, impurity, is_number_literal, paren,
                                       strip_item, strip_parens, tensorish)


class Refuse(Exception):
    """A planner will not rewrite this site; the message says why."""


def convert_condition(test: cst.BaseExpression, tnames: frozenset[str], forced: bool = False) -> cst.BaseExpression:
    """A bool tensor equivalent to Python's truth value of ``test`` (raise Refuse if unsure)."""
    test = strip_parens(strip_item(test))
    if isinstance(test, cst.BooleanOperation):
        left = convert_condition(test.left, tnames, False)
        right = convert_condition(test.right, tnames, False)
        op = "torch.logical_and" if isinstance(test.operator, cst.And) else "torch.logical_or"
        return call(op, left, right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return call("torch.logical_not", convert_condition(test.expression, tnames, forced))
    if isinstance(test, cst.Comparison):
        if len(test.comparisons) > 1:
            return call("torch.logical_and", *unchain(test, tnames, forced))
        op = test.comparisons[0].operator
        if isinstance(op, (cst.Is, cst.IsNot, cst.In, cst.NotIn)):
            raise Refuse(f"`{code(op).strip()}` comparison is not a tensor operation")
        if tensorish(test, tnames) or forced:
            return test
        raise Refuse(f"condition `{code(test)}` is not a tensor expression")
    if isinstance(test, cst.Call):
        fn = full_name(test.func) or ""
        if fn == "torch.equal":
            raise Refuse("torch.equal returns a Python bool (see GM402 for the guard form)")
        m = test.func.attr.value if isinstance(test.func, cst.Attribute) else ""
        if m in ("any", "all", "isnan", "isinf", "bool", "logical_and", "logical_or", "logical_not") or fn in (
                "torch.any", "torch.all", "torch.isnan", "torch.isinf", "torch.logical_and", "torch.logical_or",
                "torch.logical_not", "torch.isclose", "torch.is_nonzero"):
            if tensorish(test, tnames) or forced:
                return test
    if tensorish(test, tnames) or forced:
        # a bare name on Dynamo's word too (``if done:``, ``done`` a helper's tensor): a Python
        # value there would raise on ``.bool()``, which verification reports
        return cst.Call(func=cst.Attribute(value=paren(test), attr=cst.Name("bool")), args=[])
    raise Refuse(f"condition `{code(test)}` is not a tensor expression")


_ORDERING = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)


def unchain(test: cst.Comparison, tnames: frozenset[str], forced: bool) -> list[cst.BaseExpression]:
    """``lo <= t <= hi`` -> [``lo <= t``, ``t <= hi``] (``torch.logical_and`` of them, or
    ``&``): Python's ``lo <= t and t <= hi`` on tensors, whose ``and`` asks the first
    comparison's truth value (the break). Each middle operand is then evaluated twice and
    the second comparison even where Python short-circuited it, so those operands must be
    pure and call nothing outside torch. Refuse otherwise, or when no operand is a tensor."""
    if not all(isinstance(c.operator, _ORDERING) for c in test.comparisons):
        raise Refuse("chained comparison with `is` / `in`: not a tensor operation")
    if not (tensorish(test, tnames) or forced):
        raise Refuse(f"condition `{code(test)}` is not a tensor expression")
    operands = [test.left, *(c.comparator for c in test.comparisons)]
    for mid in operands[1:-1]:
        if impurity(mid) or calls_outside_torch(mid):
            raise Refuse(f"chained comparison: `{code(mid)}` would be evaluated twice and may not be pure")
    pairs = [cst.Comparison(left=a, comparisons=[c]) for a, c in zip(operands, test.comparisons)]
    if not forced and not all(tensorish(p, tnames) for p in pairs):
        raise Refuse(f"chained comparison `{code(test)}`: a comparison in it is not on a tensor")
    return pairs


def scalar_operands(test: cst.Comparison) -> None:
    """Refuse unless every operand of the chain is a number or a full reduction
    (``h.max()``, ``torch.mean(h)``): 0-dim, so Python's ``and`` of the comparisons ran
    (on more elements it raises) and ``&`` gives its value."""
    for o in [test.left, *(c.comparator for c in test.comparisons)]:
        o = strip_parens(o)
        full = isinstance(o, cst.Call) and isinstance(o.func, cst.Attribute) and o.func.attr.value in \
            ("sum", "mean", "max", "min", "amax", "amin", "prod", "norm", "any", "all") and \
            len(o.args) == (0 if not (full_name(o.func) or "").startswith("torch.") else 1)
        if not (is_number_literal(o) or full):
            raise Refuse(f"chained comparison as a value: `{code(o)}` is not a number or a full reduction, "
                         "so the comparisons may not be 0-dim")


def chained_and(test: cst.Comparison, tnames: frozenset[str], forced: bool) -> cst.BaseExpression:
    """``lo <= t <= hi`` as a value -> ``(lo <= t) & (t <= hi)`` (see ``unchain``): on 0-dim
    boolean tensors Python's ``and`` returns the first when it is false, else the second,
    which is what ``&`` computes."""
    parts = [paren(p) for p in unchain(test, tnames, forced)]
    out = parts[0]
    for p in parts[1:]:
        out = cst.BinaryOperation(left=out, operator=cst.BitAnd(), right=p)
    return out


def bool_valued(test: cst.BaseExpression, tnames: frozenset[str], forced: bool) -> None:
    """Refuse unless ``test`` is a boolean tensor as written (comparison, ``.any()``, ...):
    then Python's ``a and b`` returns a bool tensor equal to ``torch.logical_and(a, b)``."""
    t = strip_parens(test)
    if isinstance(t, (cst.BooleanOperation,)):
        bool_valued(t.left, tnames, forced)
        bool_valued(t.right, tnames, forced)
        return
    conv = convert_condition(t, tnames, forced)
    if isinstance(conv, cst.Call) and isinstance(conv.func, cst.Attribute) and conv.func.attr.value == "bool" \
            and not (isinstance(t, cst.Call) and isinstance(t.func, cst.Attribute) and t.func.attr.value == "bool"):
        raise Refuse(f"`{code(t)}` is not a boolean tensor: `and`/`or` would return its value, not a bool")
    if has_item_call(t):
        raise Refuse(f"`{code(t)}` is a Python number (`.item()`): `and`/`or` of it is not a tensor")


def has_item_call(node: cst.CSTNode) -> bool:
    from rewrites.fixes.judgements import has_item

    return has_item(node)
