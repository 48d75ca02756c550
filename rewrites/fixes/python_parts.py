"""The Python part of a tensor ``if``: ``<python> and <tensor>`` split so that the Python
operands stay an ``if`` Dynamo resolves while tracing, and an ``elif`` chain on Python values
kept as a ternary inside the ``torch.where`` (gm1_where)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.conditions import Refuse, convert_condition
from rewrites.fixes.facts import names_in
from rewrites.fixes.judgements import calls_outside_torch, code, impurity, strip_parens, tensorish
from rewrites.fixes.where_arms import Arm, block_stmts, is_constant, read_arm, ref


def and_operands(test: cst.BaseExpression) -> list:
    """The operands as written: parentheses kept (``(a or b) and c`` re-joined stays right)
    and the nodes the original tree's positions know."""
    t = strip_parens(test)
    if isinstance(t, cst.BooleanOperation) and isinstance(t.operator, cst.And):
        return and_operands(t.left) + and_operands(t.right)
    return [test]


def and_of(ops: list) -> cst.BaseExpression:
    out = ops[0]
    for o in ops[1:]:
        out = cst.BooleanOperation(left=out, operator=cst.And(), right=o)
    return out


def python_operand(op: cst.BaseExpression, tnames: frozenset[str]) -> bool:
    """An operand that is a Python value (``self.training``, ``mask is not None``): no
    tensor in sight and not convertible without Dynamo's word."""
    from rewrites.fixes.judgements import has_item

    t = strip_parens(op)
    if isinstance(t, cst.Comparison) and all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in t.comparisons) \
            and not has_item(t):
        return True  # ``mask is not None``: identity, never a tensor operation
    if has_item(op) or tensorish(op, tnames):
        return False
    if impurity(op) is not None or any(c not in ("isinstance", "hasattr", "len", "getattr", "callable")
                                       for c in calls_outside_torch(op)):
        return False  # a call could have effects: moving it before the tensor part is not safe
    try:
        convert_condition(op, tnames, False)
    except Refuse:
        return True
    return False


def python_only(op: cst.BaseExpression, python_names: frozenset[str]) -> bool:
    """Every name ``op`` reads is ``self`` (an attribute of the module: a config value) or
    one of ``python_names`` (parameters typed or defaulted as Python numbers, strings or
    bools: ``FunctionFacts.python_params``), and it calls nothing but ``isinstance`` /
    ``hasattr`` / ``len`` / ``getattr`` / ``callable``."""
    names = names_in(op)
    return bool(names) and names <= (python_names | {"self", "None", "True", "False"}) and impurity(op) is None \
        and all(c in ("isinstance", "hasattr", "len", "getattr", "callable") for c in calls_outside_torch(op))


def split_and(test: cst.BaseExpression, tnames: frozenset[str], forced: bool,
              python_names: frozenset[str] = frozenset()):
    """``if P and T:`` (P Python, T tensor, any order) -> (P operands, T operands), or None.
    The Python part stays a Python ``if`` (Dynamo specialises on it), the tensor part
    becomes a ``torch.where`` inside it. Both parts are pure, so evaluating T when Python
    would have short-circuited it (``T and P`` with T false) changes nothing."""
    ops = and_operands(test)
    if len(ops) < 2:
        return None
    py = [o for o in ops if python_operand(o, tnames)]
    tn = [o for o in ops if not any(o is p for p in py)]
    if forced and not tn:
        # Dynamo broke on this condition, so one operand is a tensor, which the inference
        # cannot see (it came through a parameter or a call): the operands that read only
        # Python-typed names are the Python part, the rest the tensor part (a wrong guess
        # leaves the break, or fails, in verification)
        py = [o for o in ops if python_only(o, python_names)]
        tn = [o for o in ops if not any(o is p for p in py)]
    if not py or not tn:
        return None
    try:
        converted = convert_condition(and_of(tn), tnames, forced)
    except Refuse:
        return None
    if impurity(converted):  # (``.item()`` is gone by now: the comparison stays a tensor)
        return None
    return py, tn


def python_chain_arm(orelse, tnames: frozenset[str], bound_before=lambda name: True) -> Optional[Arm]:
    """The ``elif``/``else`` of an ``if`` as ONE arm, when every ``elif`` test is a Python
    value: each name's value is a Python ternary over those tests (``B if q else C``), which
    Dynamo resolves while tracing. None without an else/elif. A name some path leaves
    unassigned keeps its value from before; one not bound before (``bound_before``) is left
    out, so that the caller sees it bound on some paths only."""
    if orelse is None:
        return None
    branches: list[tuple[cst.BaseExpression, Arm]] = []
    while isinstance(orelse, cst.If):
        if not python_operand(orelse.test, tnames):
            raise Refuse(f"the `elif {code(orelse.test).strip()}` condition is not a plain Python value")
        branches.append((orelse.test, read_arm(block_stmts(orelse.body))))
        orelse = orelse.orelse
    final = read_arm(block_stmts(orelse.body)) if isinstance(orelse, cst.Else) else Arm()
    paths = [a for _, a in branches] + [final]
    out = Arm()
    for a in paths:
        if a.returns:
            raise Refuse("an elif/else arm returns")
        out.outside_calls.extend(a.outside_calls)
        for n in a.order:
            if is_constant(a.env[n]):
                raise Refuse(f"`{n}` is the Python constant `{code(a.env[n])}` on one path; torch.where would make "
                             "it a tensor")
            if n not in out.order:
                out.order.append(n)
    for n in list(out.order):
        if not all(n in a.env for a in paths) and not bound_before(n):
            out.order.remove(n)  # no value on every path: only usable as a temporary (decide_if)
            continue
        value = final.env.get(n, ref(n))
        for test, a in reversed(branches):
            value = cst.IfExp(test=test, body=a.env.get(n, ref(n)), orelse=value,
                              lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        out.env[n] = value
    return out


def python_elifs(node: cst.If, tnames: frozenset[str], forced: bool):
    """``if T: A elif Q: B else: C`` with T a tensor condition and every ``elif`` test Q a
    Python value (I-BERT's ``elif self.act_range_momentum == -1``): ([], T's operands), the
    split with no Python part, so the elif chain becomes the fall-through value (a Python
    ternary over Q, which Dynamo resolves while tracing). None otherwise."""
    if not isinstance(node.orelse, cst.If):
        return None
    try:
        convert_condition(node.test, tnames, forced)
    except Refuse:
        return None
    orelse = node.orelse
    while isinstance(orelse, cst.If):
        if not python_operand(orelse.test, tnames):
            return None
        orelse = orelse.orelse
    return [], and_operands(node.test)
