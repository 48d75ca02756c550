"""The arms of a tensor ``if`` read as values: which names each assigns, the substitution
of earlier assignments into later ones, the chain of ``elif`` tests and the nested
selection ``torch.where`` makes of them (gm1_where)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from rewrites.fixes import total
from rewrites.fixes.base import Analysis
from rewrites.fixes.conditions import Refuse
from rewrites.fixes.facts import FunctionFacts, names_in
from rewrites.fixes.judgements import call, calls_outside_torch, code, impurity, is_number_literal, paren, strip_parens


class _Subst(cst.CSTTransformer):
    def __init__(self, env: dict[str, cst.BaseExpression]):
        super().__init__()
        self.env = env

    def leave_Name(self, original_node, updated_node):
        v = self.env.get(updated_node.value)
        return paren(v) if v is not None else updated_node

    def visit_Attribute(self, node) -> bool:
        node.value.visit(self)
        return True

    def leave_Attribute(self, original_node, updated_node):
        v = self.env.get(_attr_key(original_node) or "")
        if v is not None:  # an attribute an earlier statement of the arm re-bound
            return paren(v)
        # only the object side is a variable; keep ``.attr`` as written
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node, updated_node):
        return updated_node.with_changes(keyword=original_node.keyword)


def _attr_key(node: cst.CSTNode) -> Optional[str]:
    """``self.x_min`` -> "self.x_min": an attribute of a plain name, which an arm may re-bind
    like a variable (held in the arm's env under this key)."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return f"{node.value.value}.{node.attr.value}"
    return None


def ref(key: str) -> cst.BaseExpression:
    """The expression reading an env key: a name, or ``obj.attr``."""
    return cst.parse_expression(key) if "." in key else cst.Name(key)


def refs_in(node: cst.CSTNode) -> set[str]:
    """The names ``node`` reads, and the ``obj.attr`` keys it reads."""
    out = set(names_in(node))

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> None:
            key = _attr_key(n)
            if key:
                out.add(key)

    node.visit(V())
    return out


def subst(node: cst.BaseExpression, env: dict[str, cst.BaseExpression]) -> cst.BaseExpression:
    if not env or not (refs_in(node) & set(env)):
        return node
    return node.visit(_Subst(env))  # type: ignore[return-value]


@dataclass
class Arm:
    env: dict[str, cst.BaseExpression] = field(default_factory=dict)  # final value per bound name
    order: list[str] = field(default_factory=list)
    ret: Optional[cst.BaseExpression] = None
    returns: bool = False
    outside_calls: list[str] = field(default_factory=list)


def is_constant(e: cst.BaseExpression) -> bool:
    e = strip_parens(e)
    if isinstance(e, cst.UnaryOperation):
        return is_constant(e.expression)
    if isinstance(e, cst.Tuple):  # ``()`` / ``(None, 1)``: a Python value, not a tensor
        return all(is_constant(el.value) for el in e.elements)
    return isinstance(e, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)) or (
        isinstance(e, cst.Name) and e.value in ("None", "True", "False"))


def check_value(e: cst.BaseExpression, arm: Arm) -> None:
    why = impurity(e)
    if why:
        raise Refuse(f"an arm {why}")
    arm.outside_calls.extend(calls_outside_torch(e))


def read_arm(stmts) -> Arm:
    """The effect of a block of statements as name -> expression (substituted in order)."""
    arm = Arm()
    for i, stmt in enumerate(stmts):
        if arm.returns:
            raise Refuse("code after a return in an arm")
        if isinstance(stmt, cst.SimpleStatementLine):
            smalls = stmt.body
        else:
            kind = type(stmt).__name__.lower()
            raise Refuse(f"an arm holds a nested `{kind}` block")
        for s in smalls:
            if isinstance(s, cst.Pass):
                continue
            if isinstance(s, cst.Assign):
                t = s.targets[0].target
                if len(s.targets) != 1 or not (isinstance(t, cst.Name) or _attr_key(t)):
                    what = "a subscript (in-place mutation)" if isinstance(t, cst.Subscript) else (
                        "an attribute (state mutation)" if isinstance(t, cst.Attribute) else "several targets")
                    raise Refuse(f"an arm assigns to {what}: `{code(s).strip()}`")
                check_value(s.value, arm)
                # ``self.x_min = ...`` (I-BERT's calibration): the attribute re-bound, as a name is
                name = t.value if isinstance(t, cst.Name) else _attr_key(t)
                arm.env[name] = subst(s.value, arm.env)
                if name not in arm.order:
                    arm.order.append(name)
                continue
            if isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name) and s.value is not None:
                check_value(s.value, arm)
                arm.env[s.target.value] = subst(s.value, arm.env)
                if s.target.value not in arm.order:
                    arm.order.append(s.target.value)
                continue
            if isinstance(s, cst.AugAssign):
                raise Refuse(f"an arm updates in place: `{code(s).strip()}`")
            if isinstance(s, cst.Return):
                if s.value is None:
                    raise Refuse("an arm returns None")
                check_value(s.value, arm)
                arm.ret = subst(s.value, arm.env)
                arm.returns = True
                continue
            if isinstance(s, cst.Raise):
                raise Refuse("an arm raises (see GM402 for guards)")
            if isinstance(s, cst.Expr):
                raise Refuse(f"an arm has a statement with side effects: `{code(s).strip()}`")
            if isinstance(s, (cst.Continue, cst.Break)):
                raise Refuse(f"an arm is loop control (`{code(s).strip()}`): torch.where and torch.cond "
                             "select values, they cannot skip the rest of the loop")
            raise Refuse(f"an arm holds a `{type(s).__name__}` statement")
    return arm


def block_stmts(block) -> list:
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    if isinstance(block, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=list(block.body))]
    return []


def chain(node: cst.If) -> tuple[list[tuple[cst.BaseExpression, list]], Optional[list]]:
    """``if/elif/else`` as [(test, stmts), ...] and the final else's stmts (None: no else)."""
    branches = [(node.test, block_stmts(node.body))]
    orelse = node.orelse
    while isinstance(orelse, cst.If):
        branches.append((orelse.test, block_stmts(orelse.body)))
        orelse = orelse.orelse
    final = block_stmts(orelse.body) if isinstance(orelse, cst.Else) else None
    return branches, final


def selected_when(tests: list[cst.BaseExpression]) -> list[cst.BaseExpression]:
    """The condition under which each arm of an ``if/elif/else`` chain runs (one per test,
    then the fall-through): ``t0``, ``not t0 and t1``, ..., ``not t0 and ... not tn``."""
    out, before = [], None
    for t in tests:
        out.append(total.both(before, t))
        before = total.both(before, total.negate(t))
    return out + [before]


def select(tests: list[cst.BaseExpression], values: list[cst.BaseExpression], use_cond: bool,
            tnames: frozenset[str] = frozenset(), pure: frozenset[str] = frozenset(),
            numbers: frozenset[str] = frozenset()) -> cst.BaseExpression:
    """Nested where/cond: values has len(tests) + 1 entries (the last is the fallthrough).
    With torch.where each arm's non-total operations get the double-where form (total.py):
    they compute on a safe value where eager code would not have run them."""
    if all(isinstance(strip_parens(v), cst.Tuple) for v in values):
        ns = {len(strip_parens(v).elements) for v in values}
        if len(ns) == 1 and not use_cond and min(ns) > 0:
            n = ns.pop()
            parts = [select(tests, [strip_parens(v).elements[i].value for v in values], use_cond, tnames, pure,
                             numbers)
                     for i in range(n)]
            return cst.Tuple(elements=[cst.Element(p) for p in parts])
    if not use_cond:
        values = [total.guard(v, c, tnames, pure, numbers) for v, c in zip(values, selected_when(tests))]
    if use_cond:
        # torch.cond refuses a branch that returns one of its inputs unchanged (aliasing)
        values = [cst.Call(func=cst.Attribute(value=v, attr=cst.Name("clone")), args=[])
                  if isinstance(strip_parens(v), (cst.Name, cst.Attribute)) else v for v in values]
    out = values[-1]
    for test, val in zip(reversed(tests), reversed(values[:-1])):
        if use_cond:
            out = call("torch.cond", test, cst.Lambda(params=cst.Parameters(), body=val),
                       cst.Lambda(params=cst.Parameters(), body=out))
        else:
            out = call("torch.where", test, val, out)
    return out


def assign_stmt(text_target: Optional[str], value: cst.BaseExpression, leading=()) -> cst.SimpleStatementLine:
    small = cst.Return(value=value) if text_target is None else cst.Assign(
        targets=[cst.AssignTarget(cst.parse_expression(text_target))], value=value)
    return cst.SimpleStatementLine(body=[small], leading_lines=list(leading))


# -- arms that hand back the caller's tensor ----------------------------------------------

_VIEWS = frozenset("""view view_as reshape reshape_as transpose permute t squeeze unsqueeze expand expand_as narrow
select detach flatten unflatten movedim moveaxis swapaxes swapdims diagonal as_strided T mT H mH data
to type type_as contiguous float double half bfloat16 int long bool""".split())  # the last: itself when nothing changes


def aliased_param(value: cst.BaseExpression, facts: FunctionFacts, line: int) -> Optional[str]:
    """The parameter ``value`` is, or a view of (``x``, ``x.view(...)``, ``x[:, 0]``, ``x.T``),
    while it still holds the caller's tensor at ``line``; else None."""
    e = strip_parens(value)
    while not isinstance(e, cst.Name):
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in _VIEWS:
            e = e.func.value
        elif isinstance(e, cst.Attribute) and e.attr.value in _VIEWS:
            e = e.value
        elif isinstance(e, cst.Subscript) and all(
                isinstance(el.slice, cst.Slice) or is_number_literal(el.slice.value)
                or isinstance(el.slice.value, (cst.Ellipsis, cst.Name)) and code(el.slice.value) in ("None", "...")
                for el in e.slice):
            e = e.value  # basic indexing: a view
        else:
            return None
        e = strip_parens(e)
    n = e.value
    rebound = any(b == n and l < line for b, l, _ in facts.bindings)
    return n if n in facts.params and not rebound else None


def refuse_alias(value: cst.BaseExpression, facts: FunctionFacts, line: int, how: str) -> None:
    """Refuse an arm that hands back the caller's own tensor: torch.where always allocates."""
    p = aliased_param(value, facts, line)
    if p is not None:
        what = "it" if code(strip_parens(value)) == p else "a view of it"
        raise Refuse(f"an arm aliases the caller's tensor `{p}` ({what}, unchanged) and the result {how}: eager code "
                     "keeps that very tensor, so an in-place step on the result reaches the caller's; torch.where "
                     "always returns a new tensor")


def escapes(name: str, an: Analysis, facts: FunctionFacts, end: int) -> Optional[str]:
    """How ``name``, bound by the statement ending at ``end``, leaves the function with its
    identity observable before it is bound again: returned bare, written in place, stored on
    an attribute. None when it does not."""
    if facts.fn is None:
        return None
    found: list[tuple[int, str]] = []

    def named(e) -> bool:
        e = strip_parens(e) if e is not None else None
        return isinstance(e, cst.Name) and e.value == name

    class V(cst.CSTVisitor):
        def visit_Return(self, n: cst.Return) -> None:
            v = strip_parens(n.value) if n.value is not None else None
            if named(v) or isinstance(v, (cst.Tuple, cst.List)) and any(named(el.value) for el in v.elements):
                found.append((an.span(n)[0], "is returned"))

        def visit_Call(self, n: cst.Call) -> None:
            f = n.func
            if isinstance(f, cst.Attribute) and named(f.value) and f.attr.value.endswith("_") \
                    and not f.attr.value.startswith("_"):
                found.append((an.span(n)[0], f"is written in place (`{code(f)}`)"))

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            if named(n.target):
                found.append((an.span(n)[0], f"is written in place (`{code(n.target)} {code(n.operator).strip()}`)"))

        def visit_Assign(self, n: cst.Assign) -> None:
            if any(isinstance(t.target, cst.Subscript) and named(t.target.value) for t in n.targets):
                found.append((an.span(n)[0], "is written in place (an item assignment)"))
            elif named(n.value) and any(isinstance(t.target, cst.Attribute) for t in n.targets):
                found.append((an.span(n)[0], "is stored on an attribute"))

    facts.fn.visit(V())
    for line, how in sorted(found):
        if line <= end:
            continue
        if any(b == name and end < l < line for b, l, _ in facts.bindings):
            return None  # bound again first: a new tensor either way
        return how
    return None
