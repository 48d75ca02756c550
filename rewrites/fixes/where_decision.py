"""What a tensor ``if`` becomes (gm1_where): the decision (the names kept, an early return
folded in, ``torch.where`` or ``torch.cond``) with the checks it rests on, the statement built
from it, and LayerDrop recognised among the ``if``s refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst
from libcst import matchers

from rewrites.fixes import total
from rewrites.fixes.base import Analysis
from rewrites.fixes.conditions import Refuse, convert_condition
from rewrites.fixes.facts import FunctionFacts, name_nodes, number_attrs
from rewrites.fixes.judgements import (calls_outside_torch, code, module_attrs, pure_self_methods, rng_call,
                                       stateful_module_call)
from rewrites.fixes.where_arms import (Arm, assign_stmt, block_stmts, chain, escapes, is_constant, read_arm, ref,
                                       refs_in, refuse_alias, select)


# LayerDrop (M2M-100, wav2vec2, BART: ``if torch.rand([]) < p: continue``), measured by
# benchmarks/layerdrop_cond.py: as a torch.cond per layer the forward matches, but the
# backward re-runs the layer and draws its dropout again
_LAYERDROP = ("LayerDrop: the condition is a random draw (`{draw}`) and the arm skips the rest of the loop body "
              "(`continue`, or a flag such as `to_drop = True` that the loop reads). "
              "torch.where would run the skipped layer on every step (another algorithm, with its dropout "
              "draws); torch.cond re-runs its branch in backward and draws the layer's dropout again, so "
              "gradients and the RNG state after the step differ from eager code (M2M-100, "
              "benchmarks/layerdrop_cond.py). No safe rewrite; the break is in training only")

_LAYERDROP_ADVICE = ("keep the `if` (one break per layer, in training only); where the step must be one graph, "
                     "turn LayerDrop off for it (`layerdrop = 0.0`), a change to training you choose")


def _skips_on_draw(node: cst.If, an: Analysis, facts: FunctionFacts) -> Optional[str]:
    """LayerDrop's shape: an ``if`` without ``else`` in a loop, on a random draw, whose arm
    is ``continue`` / ``break`` or sets a flag (``to_drop = True``, M2M-100's encoder) that
    later skips the layer. The draw's text, else None."""
    if node.orelse is not None or not an.in_loop(node):
        return None
    stmts = [sm for line in block_stmts(node.body) if isinstance(line, cst.SimpleStatementLine) for sm in line.body]
    skip = len(stmts) == 1 and (isinstance(stmts[0], (cst.Continue, cst.Break)) or isinstance(stmts[0], cst.Assign)
                                and isinstance(stmts[0].value, cst.Name) and stmts[0].value.value in ("True", "False"))
    return _random_draw(node.test, facts) if skip else None


def _random_draw(test: cst.BaseExpression, facts: FunctionFacts) -> Optional[str]:
    """The random call ``test`` reads, directly or through a name the function binds to
    one (``p = torch.rand([])``; ``if p < self.layerdrop``), else None."""
    names: set[str] = set()
    for n in matchers.findall(test, matchers.Call() | matchers.Name()):
        if isinstance(n, cst.Call) and rng_call(n):
            return code(n).strip()
        if isinstance(n, cst.Name):
            names.add(n.value)
    for name, _, value in facts.bindings:
        if name in names and isinstance(value, cst.Call) and rng_call(value):
            return code(value).strip()
    return None


@dataclass
class IfDecision:
    keep: list[str]  # names assigned by the rewrite, in order
    fallback: set[str]  # names whose missing-arm value is the name itself (bound before)
    returns: bool
    use_cond: bool
    absorb_next: Optional[list]  # the statements after the ``if`` up to ``return B``, folded in
    pure: frozenset[str] = frozenset()  # ``self.m`` methods torch.where may call (pure and total)
    numbers: frozenset[str] = frozenset()  # names and ``self.x`` holding Python numbers (total.guard)


def decide_if(node: cst.If, an: Analysis, facts: FunctionFacts, tnames: frozenset[str], forced: bool,
              tail: Optional[list], span: Optional[tuple[int, int]] = None,
              else_arm: Optional[Arm] = None) -> IfDecision:
    """``else_arm``: the fall-through path, read elsewhere (a Python ``elif`` chain)."""
    start, end = span or an.span(node)
    branches, final = chain(node)
    for t, _ in branches:  # raises Refuse for a condition that cannot become a tensor expression
        convert_condition(t, tnames, forced)
    arms = [read_arm(stmts) for _, stmts in branches]
    final_arm = else_arm if else_arm is not None else read_arm(final) if final is not None else None
    pure = arm_calls(an, node, [*arms, *([final_arm] if final_arm else [])], tnames)
    absorb = None
    if any(a.returns for a in arms) or (final_arm and final_arm.returns):
        if final_arm is None:
            # early return: ``if c: return A`` followed by pure assignments and ``return B``
            # (the rest of the block): the fall-through path becomes the other arm
            if not tail or not _ends_in_return(tail[-1]):
                raise Refuse("early return not followed by a `return` at the end of the block")
            try:
                final_arm = read_arm(tail)
            except Refuse as exc:
                raise Refuse(f"early return; the code after it cannot become an arm: {exc}")
            _check_reuse(tail, final_arm)
            absorb = tail
        if not all(a.returns for a in arms) or not final_arm.returns:
            raise Refuse("one arm returns and another falls through")
        for a in [*arms, final_arm]:
            if is_constant(a.ret):
                raise Refuse(f"an arm returns the Python constant `{code(a.ret)}`; torch.where would make it a tensor")
        _same_slices("the returned value", [a.ret for a in [*arms, final_arm]])
        use_cond = any(a.outside_calls for a in [*arms, final_arm])
        if not use_cond:
            for a in [*arms, final_arm]:
                _total(a.ret, tnames, pure)
        for a in [*arms, final_arm]:
            refuse_alias(a.ret, facts, start, "is returned")
        return IfDecision([], set(), True, use_cond, absorb, pure, _numbers(an, node, facts))
    all_arms = [*arms, *([final_arm] if final_arm else [])]
    names: list[str] = []
    for a in all_arms:
        for n in a.order:
            if n not in names:
                names.append(n)
    if not names:
        raise Refuse("the arms assign nothing")
    keep, fallback = [], set()
    n_paths = len(arms) + 1
    for n in names:
        everywhere = sum(n in a.env for a in all_arms) == n_paths
        if everywhere:
            keep.append(n)
        elif "." in n:
            # a torch.where would re-bind it on the paths that leave it alone (a new
            # object where eager code kept the old one)
            raise Refuse(f"`{n}` is re-bound on some paths only")
        elif facts.defined_before(n, start):
            keep.append(n)
            fallback.add(n)
        elif facts.used_after(n, end):
            raise Refuse(f"`{n}` is bound on one path only and read afterwards")
        # else: a temporary of one arm, already inlined into the kept values
    if not keep:
        raise Refuse("the arms only bind temporaries")
    for a in all_arms:
        for n in keep:
            if n in a.env and is_constant(a.env[n]):
                raise Refuse(f"`{n}` is the Python constant `{code(a.env[n])}` on one path; torch.where would make it a tensor")
    for n in keep:
        _same_slices(f"`{n}`", [a.env.get(n, ref(n)) for a in all_arms] + ([ref(n)] if n in fallback else []))
    use_cond = any(a.outside_calls for a in all_arms)
    if not use_cond:
        for a in all_arms:
            for n in keep:
                if n in a.env:
                    _total(a.env[n], tnames, pure)
    for n in keep:
        why = escapes(n, an, facts, end)
        if why:
            for v in [a.env.get(n, ref(n)) for a in all_arms] + ([ref(n)] if n in fallback else []):
                refuse_alias(v, facts, start, why)
    return IfDecision(keep, fallback, False, use_cond, None, pure, _numbers(an, node, facts))


# methods and attributes whose result may share the receiver's storage (a view of it)
def _numbers(an: Analysis, node: cst.CSTNode, facts: FunctionFacts) -> frozenset[str]:
    return frozenset(facts.number_params) | number_attrs(an, node)


def _slices(e: cst.BaseExpression) -> set[str]:
    """The bounded slices ``x[:, :n]`` in ``e``, as source text."""
    return {code(s) for s in matchers.findall(e, matchers.Subscript()) if any(
        isinstance(el.slice, cst.Slice) and (el.slice.lower or el.slice.upper or el.slice.step)
        for el in s.slice)}


def _same_slices(what: str, values: list[cst.BaseExpression]) -> None:
    """torch.where and torch.cond choose between values of one shape: paths that slice
    differently (Reformer's ``out = out[:, :n]`` on padding) may not have one."""
    seen = [_slices(v) for v in values]
    if any(s != seen[0] for s in seen):
        example = sorted(set().union(*seen) - set.intersection(*seen))[0]
        raise Refuse(f"{what} is sliced on one path only (`{example}`): the paths may differ in shape, and "
                     "torch.where cannot choose between shapes")


def _total(value: cst.BaseExpression, tnames: frozenset[str], pure: frozenset[str]) -> None:
    try:
        total.check(value, tnames, pure)
    except total.Partial as exc:
        raise Refuse(f"an arm is not total: {exc}; torch.where would also run it where eager code does not")


def arm_calls(an: Analysis, node: cst.CSTNode, arms: list, tnames: frozenset[str]) -> frozenset[str]:
    """Settle, for the arms of the statement ``node``, which calls are module calls: refuse a
    stateful module (BatchNorm, Dropout), count a call on a module attribute of self
    (``self.encoder.norm(h)``) as a call outside torch, drop from ``outside_calls`` the pure
    and total methods of the class (torch.where may run those). Returns those methods."""
    modules = module_attrs(an, node)
    for a in arms:
        for v in [*a.env.values(), *([a.ret] if a.ret is not None else [])]:
            why = stateful_module_call(v, modules)
            if why:
                raise Refuse(f"an arm calls a module with state: {why}")
            a.outside_calls.extend(_module_method_calls(v, modules))
    pure = pure_self_methods(an, node, total=lambda e: total.is_total(e, tnames) is None)
    for a in arms:
        a.outside_calls = [c for c in a.outside_calls if c not in pure]
    return pure


def _module_method_calls(node: cst.CSTNode, modules: dict[str, str]) -> list[str]:
    """``self.encoder.norm(h)`` where ``self.encoder`` is a module: a module's method, not a tensor's."""
    out: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            f = n.func
            if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Attribute) \
                    and isinstance(f.value.value, cst.Name) and f.value.value.value == "self" \
                    and f.value.attr.value in modules:
                out.append(code(f))

    node.visit(V())
    return out


def build_if(updated: cst.If, d: IfDecision, tnames: frozenset[str], forced: bool, absorbed: Optional[list],
             else_arm: Optional[Arm] = None):
    branches, final = chain(updated)
    tests = [convert_condition(t, tnames, forced) for t, _ in branches]
    arms = [read_arm(stmts) for _, stmts in branches]
    if d.returns:
        final_arm = read_arm(final if final is not None else list(absorbed or []))
        value = select(tests, [a.ret for a in [*arms, final_arm]], d.use_cond, tnames, d.pure, d.numbers)
        return assign_stmt(None, value, updated.leading_lines)
    final_arm = else_arm if else_arm is not None else read_arm(final) if final is not None else Arm()
    values = [select(tests, [a.env.get(n, ref(n)) for a in [*arms, final_arm]], d.use_cond, tnames, d.pure,
                      d.numbers)
              for n in d.keep]
    if any(refs_in(v) & set(d.keep[:i]) for i, v in enumerate(values)):
        # a later value (or the condition) reads a name an earlier line would already have
        # rebound: one tuple assignment evaluates every value before binding any
        return assign_stmt(", ".join(d.keep), cst.Tuple(elements=[cst.Element(v) for v in values]), updated.leading_lines)
    out = [assign_stmt(n, v, updated.leading_lines if i == 0 else ()) for i, (n, v) in enumerate(zip(d.keep, values))]
    return cst.FlattenSentinel(out) if len(out) > 1 else out[0]


def _ends_in_return(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[-1], cst.Return)
            and stmt.body[-1].value is not None)


def _check_reuse(stmts: list, arm: "Arm") -> None:
    """Inlining a temporary read twice would run its module call twice: refuse that."""
    reads: dict[tuple[str, int], int] = {}  # (name, binding number) -> reads of that binding
    version: dict[str, int] = {}
    costly: set[tuple[str, int]] = set()
    for st in stmts:
        for sm in getattr(st, "body", []):
            val = getattr(sm, "value", None)
            if val is not None:
                for n in (x.value for x in name_nodes(val)):
                    if n in version:
                        reads[(n, version[n])] = reads.get((n, version[n]), 0) + 1
            if isinstance(sm, (cst.Assign, cst.AnnAssign)) and val is not None:
                tgt = sm.targets[0].target if isinstance(sm, cst.Assign) else sm.target
                if isinstance(tgt, cst.Name):
                    version[tgt.value] = version.get(tgt.value, 0) + 1
                    if calls_outside_torch(val):
                        costly.add((tgt.value, version[tgt.value]))
    for key in costly:
        if reads.get(key, 0) > 1:
            raise Refuse(f"`{key[0]}` is computed by a call and read twice after the early return")


