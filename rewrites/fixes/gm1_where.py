"""GM1xx: control flow on tensor values -> ``torch.where`` ([Where]) or ``torch.cond``.

What it rewrites (when the condition is a tensor expression):

* ``if c: x = A`` / ``else: x = B``      -> ``x = torch.where(c, A, B)`` (several names: one line each)
* ``if c: x = f(x)`` (one arm)            -> ``x = torch.where(c, f(x), x)`` (``x`` bound before)
* ``if/elif/else`` chains                 -> nested ``torch.where``
* ``A if c else B``                       -> ``torch.where(c, A, B)``
* ``if c: return A`` + ``return B``       -> ``return torch.where(c, A, B)`` (early return, both arms);
  the code between them (pure assignments) becomes part of the fall-through arm
* ``if <python> and <tensor>: ...``         -> ``if <python>:`` around the rewritten tensor part
  (``self.training``, ``mask is not None``: Dynamo specialises on those); an ``elif``/``else``
  stays as it was for the Python-false path, and is the ``torch.where``'s other arm (Python
  ternaries over the ``elif`` tests, which must be Python values) when the Python part holds
* ``m = a and b`` (``or``) on boolean tensors -> ``m = torch.logical_and(a, b)``
* conditions: ``and``/``or``/``not`` -> ``torch.logical_and/or/not``; ``t.item() > 0`` -> ``t > 0``;
  ``.any()``/``.all()`` and comparisons of reductions stay tensors; a bare tensor ``c`` -> ``(c).bool()``;
  a chained comparison ``lo <= t <= hi`` (Python's ``lo <= t and t <= hi``) ->
  ``torch.logical_and(lo <= t, t <= hi)``, and as a value (``ok = lo < t.mean() < hi``, every
  operand a number or a full reduction, so 0-dim) -> ``(lo < t.mean()) & (t.mean() < hi)``; the
  middle operands are evaluated twice, so they must be pure and call nothing outside torch.
* Dynamo's word (``Context.tensor_lines``: it reported a data-dependent branch at the line)
  makes a condition a tensor where the source cannot show it (the value came through a
  parameter or a call), unless the condition reads only ``self`` and Python-typed parameters
  (a ternary's is then refused, naming them: diffusers calls ``_get_variance(self, timestep:
  int, prev_timestep: int)`` with tensors); in ``<python> and <tensor>`` those operands are then the Python part (``n_iter > 1 and err < tol``
  with ``n_iter: int``). A wrong guess leaves the break, or raises, in verification.
* an arm that calls a module or a non-torch function (pure as far as the source shows)
  -> ``torch.cond(c, lambda: A, lambda: B)`` instead, as an UNSAFE fix (``--unsafe-fixes``): only the
  taken arm runs, but a second derivative through torch.cond fails and a forward hook that
  records anything on a module in an arm makes it raise (``_COND_LIMITS``). A call to a
  method of the same class whose body is pure arithmetic (``self._ntk_base(n)``) is no
  reason for ``cond``: ``torch.where`` evaluates it safely, and unlike ``cond`` it promotes
  arms of different dtypes (float32 math beside a float16 buffer) as eager code does.

Temporaries an arm binds and nothing reads afterwards are inlined into the values.

Refused (with the reason): an arm that is the caller's tensor (a parameter not bound again,
or a view of it: ``x``, ``x[:, 0]``, ``x.view(...)``) when the result is returned, written in
place or stored on an attribute afterwards: eager code keeps that very tensor, and
``torch.where`` (``torch.cond`` too) always returns a new one, so the caller's in-place step no
longer reaches it; an arm with side effects (print, logging, I/O, ``x.add_``,
``x[...] =``, ``obj.attr =``, ``+=``), an arm that raises or holds a nested block (gm1_hoist.py
takes the arms that are a lazy cache and a device move around one ``register_buffer``), a name
bound on one path only and read later, an arm that is a Python constant (``torch.where``
would turn it into a tensor), an arm that is ``continue`` / ``break`` (LayerDrop, a random draw
deciding it, gets its own reason: torch.cond's backward re-runs the layer and draws its dropout
again, see ``benchmarks/layerdrop_cond.py``), an early return whose following code is not
pure assignments ending in ``return``, a condition that is not a tensor expression or mixes
Python values into ``and``/``or``.

Purity is resolved, not spelled: ``self.norm(h)`` is a module call (torch.cond), never the
tensor method ``norm``, and so is a method call on a module attribute of self
(``self.encoder.norm(h)``, ``self.encoder = nn.X(...)`` in the class); ``inplace=True`` and
``out=`` make a call impure. Refused as well: an arm that draws random numbers
(``F.dropout``, ``torch.rand_like``, ``bernoulli``, ...) or calls a stateful module
(``nn.BatchNorm*``, ``nn.Dropout*``, an attribute named like ``self.dropout``): torch.where
would run it on both paths, and torch.cond re-runs its branch in backward (another draw)
and refuses a buffer mutation, so neither keeps the RNG stream and the running statistics.

Non-total arms (``torch.sqrt(h)``, ``s / m.sum()``, ``p.log()``, ``x.exp()``, indexing):
``torch.where`` evaluates both arms, and the unselected arm's derivative, when not finite,
turns the zero gradient ``where`` gives it into NaN (``0 * inf``); an out-of-range index
even raises. Each such operation gets the double-where form (``rewrites/fixes/total.py``):
its dangerous operand is fed a safe value where the arm is not selected, so the value and
gradient of the selected arm are unchanged and the other arm's gradient is exactly zero::

    if (h > 0).all(): y = torch.sqrt(h)       ->  y = torch.where((h > 0).all(),
    else: y = h * 0.5                                   torch.sqrt(torch.where((h > 0).all(), h, 1)), h * 0.5)

The ``else`` arm is fed under ``torch.logical_not(c)``; an ``elif`` arm under
``torch.logical_and(torch.logical_not(c0), c1)``. A pure method of the class is called by
torch.where only when its body is total (its insides cannot be fed a safe value at the
call site); otherwise the arm becomes torch.cond. An operation whose totality mend does not
know (``torch.tan``, ``std``) is refused, naming it.

Semantics: ``torch.where`` evaluates BOTH arms; that is why arms must be pure and total. Shapes of
the two arms are broadcast by ``torch.where``; a shape that differs between the arms is
caught by verification (outputs compared shape by shape), never assumed.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Plan, Refusal, STATEMENT, Site, offer_unsafe
from rewrites.fixes.conditions import Refuse, bool_valued, chained_and, convert_condition, scalar_operands, unchain
from rewrites.fixes.facts import FunctionFacts, names_in
from rewrites.fixes.judgements import code, strip_parens, tensorish
from rewrites.fixes.python_parts import and_of, python_chain_arm, python_elifs, python_only, split_and
from rewrites.fixes.where_arms import Arm, chain, check_value, escapes, is_constant, refuse_alias, select
from rewrites.fixes.where_decision import (_LAYERDROP, _LAYERDROP_ADVICE, _numbers, _skips_on_draw, _total, arm_calls,
                                           build_if, decide_if)

RULES = ("GM101", "GM102", "GM103")
ORDER = 80


# torch.cond's limits, measured on torch 2.13 (tests/adversarial/cond_*.py): eager code has
# neither, and neither can be ruled out from the source: an arm that calls code beyond torch
# (why it is a cond) may reach a module, and users register hooks at any time
_COND_LIMITS = ("torch.cond has limits the `if` has not: a second derivative through it fails (`create_graph=True`: "
                "\"element 0 of tensors does not require grad\"; a gradient penalty, a physics-informed loss), and a "
                "forward hook that records anything on a module an arm runs (a calibration or activation-statistics "
                "hook, which can be registered at any time) makes it raise UncapturedHigherOrderOpError, eager or "
                "compiled")


# -- planning ------------------------------------------------------------------------------

def _plan_split(an: Analysis, ctx: Context, node: cst.If, facts: FunctionFacts, tnames, forced, split, rule,
                result: Plan) -> None:
    """``if P and T: A [elif Q: B] [else: C]`` -> ``if P:`` around ``x = torch.where(T, A, …)``,
    the else/elif kept as it was: when P is false the same arm runs as before, and when P
    holds the fall-through value is the elif chain's (a Python ternary over Q). With no P
    (``python_elifs``) the ``torch.where`` replaces the whole chain."""
    start, end = an.span(node)
    py, tn = split
    inner = cst.If(test=and_of(tn), body=node.body)
    def bound_before(name: str) -> bool:
        return facts.defined_before(name, start)

    try:
        else_arm = python_chain_arm(node.orelse, tnames, bound_before)
        d = decide_if(inner, an, facts, tnames, forced, [], span=(start, end), else_arm=else_arm)
        if d.returns:
            raise Refuse("an arm returns: the Python part of the condition cannot stay an `if` around it")
    except Refuse as exc:
        how = "after splitting the Python part off" if py else "with the Python elif chain as the other arm"
        result.refusals.append(Refusal(rule, start, f"{how}: {exc}"))
        return
    if d.use_cond and not offer_unsafe(ctx, result, rule, start, _COND_LIMITS, "torch.cond"):
        return
    strategy = "cond" if d.use_cond else "where"
    what = (f"`if <tensor>` with Python `elif`s -> torch.{strategy} over their ternary" if not py else
            f"`if <python> and <tensor>` -> `if <python>:` + torch.{strategy}")
    # the instrumented conditions are the tensor ones (with no Python part, the `if`'s whole
    # test: each arm runs when it goes one way): a Python elif test keeps the original's
    # choice in the ternary, and Dynamo specialises on it as it did on the elif
    conds = [an.rng(o) for o in tn] if py else [an.rng(node.test)]
    site = Site(rule, start, end, f"{what} ({', '.join(d.keep)})", conds, strategy, claims=STATEMENT)

    def build(updated: cst.If, d=d):
        got = split_and(updated.test, tnames, forced, facts.python_params) if py else \
            python_elifs(updated, tnames, forced)
        if got is None:  # an inner edit changed the test: keep the statement as it was
            return updated
        upy, utn = got
        new = build_if(cst.If(test=and_of(utn), body=updated.body), d, tnames, forced, None,
                       python_chain_arm(updated.orelse, tnames, bound_before))
        stmts = list(new.nodes) if isinstance(new, cst.FlattenSentinel) else [new]
        if not upy:  # the whole chain replaced: its comments lead the first statement
            stmts[0] = stmts[0].with_changes(leading_lines=updated.leading_lines)
            return cst.FlattenSentinel(stmts) if len(stmts) > 1 else stmts[0]
        return cst.If(test=and_of(upy), body=cst.IndentedBlock(body=stmts), orelse=updated.orelse,
                      leading_lines=updated.leading_lines)

    result.edits.append(Edit(node, build, site))


def _rule_for(test: cst.BaseExpression) -> str:
    t = strip_parens(test)
    if isinstance(t, cst.BooleanOperation) or (isinstance(t, cst.UnaryOperation) and isinstance(t.operator, cst.Not)):
        return "GM103"
    return "GM101"


def _siblings_after(an: Analysis, node: cst.CSTNode) -> list:
    parent = an.parent(node)
    body = getattr(parent, "body", None)
    if isinstance(body, (list, tuple)):
        seq = list(body)
        for i, s in enumerate(seq):
            if s is node:
                return seq[i + 1:]
    return []


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    ifs: list[cst.If] = []
    ifexps: list[cst.IfExp] = []
    elifs: set[int] = set()
    boolvals: list[tuple[cst.SimpleStatementLine, cst.BooleanOperation]] = []
    chains: list[tuple[cst.SimpleStatementLine, cst.Comparison]] = []  # ``m = lo <= t <= hi``

    class V(cst.CSTVisitor):
        def visit_If(self, n: cst.If) -> None:
            ifs.append(n)
            if isinstance(n.orelse, cst.If):
                elifs.add(id(n.orelse))

        def visit_IfExp(self, n: cst.IfExp) -> None:
            ifexps.append(n)

        def visit_SimpleStatementLine(self, n: cst.SimpleStatementLine) -> None:
            # ``m = a and b`` / ``return a or b`` on tensor booleans (conditions are the ifs')
            for sm in n.body:
                v = getattr(sm, "value", None) if isinstance(sm, (cst.Assign, cst.AnnAssign, cst.Return)) else None
                if isinstance(v, cst.BooleanOperation):
                    boolvals.append((n, v))
                elif isinstance(v, cst.Comparison) and len(v.comparisons) > 1:
                    chains.append((n, v))

    an.visit_covering(V(), ctx)
    facts_cache: dict[int, FunctionFacts] = {}
    absorbed_ids: set[int] = set()

    def facts_for(node) -> Optional[FunctionFacts]:
        fn = an.enclosing_function(node)
        if fn is None:
            return None
        if id(fn) not in facts_cache:
            facts_cache[id(fn)] = FunctionFacts(an, fn)
        return facts_cache[id(fn)]

    for node in ifs:
        if id(node) in elifs:
            continue
        branches, _ = chain(node)
        test_lines = set()
        for t, _ in branches:
            a, b = an.span(t)
            test_lines.update(range(a, b + 1))
        start, end = an.span(node)
        if ctx.lines is not None and not (test_lines & ctx.lines):
            continue
        rule = _rule_for(node.test)
        if not ctx.wants(rule):
            continue
        facts = facts_for(node)
        if facts is None:
            continue
        tnames = facts.tensor_names(start)
        # Dynamo's word is per line: not for a condition that reads only Python-typed names
        forced = bool(ctx.tensor_lines and test_lines & ctx.tensor_lines) \
            and not python_only(node.test, frozenset(facts.python_params))
        try:
            # a Python-valued condition is not a break: say nothing about it
            for t, _ in branches:
                convert_condition(t, tnames, forced)
        except Refuse as exc:
            split = split_and(node.test, tnames, forced, facts.python_params) or python_elifs(node, tnames, forced)
            if split is not None:
                _plan_split(an, ctx, node, facts, tnames, forced, split, rule, result)
            elif ctx.lines is not None:
                result.refusals.append(Refusal(rule, start, str(exc)))
            continue
        try:
            d = decide_if(node, an, facts, tnames, forced, _siblings_after(an, node))
        except Refuse as exc:
            draw = _skips_on_draw(node, an, facts)
            result.refusals.append(Refusal(rule, start, _LAYERDROP.format(draw=draw), _LAYERDROP_ADVICE) if draw
                                   else Refusal(rule, start, str(exc)))
            continue
        if d.absorb_next:
            if any(id(x) in absorbed_ids for x in d.absorb_next):
                continue
            absorbed_ids.update(id(x) for x in d.absorb_next)
            end = an.span(d.absorb_next[-1])[1]
        if d.use_cond and not offer_unsafe(ctx, result, rule, start, _COND_LIMITS, "torch.cond"):
            continue
        conds = [an.rng(t) for t, _ in branches]
        strategy = "cond" if d.use_cond else "where"
        what = "return" if d.returns else ", ".join(d.keep)
        site = Site(rule, start, end, f"`if` on a tensor -> torch.{strategy} ({what})", conds, strategy, claims=STATEMENT)

        def build(updated, d=d, tnames=tnames, forced=forced):
            return build_if(updated, d, tnames, forced, d.absorb_next)

        result.edits.append(Edit(node, build, site))
        for absorbed in d.absorb_next or []:
            # the absorbed statements come after the ``if``: libcst leaves them later, so the
            # If's build reads the original nodes; an inner edit inside them would be lost
            # (verification would catch it).
            result.edits.append(Edit(absorbed, lambda updated: cst.RemovalSentinel.REMOVE, None))

    def gm103_site(stmt):
        """(start, end, tensor names, forced) of a GM103 value statement the run covers, or None."""
        start, end = an.span(stmt)
        if not ctx.covers(start, end) or not ctx.wants("GM103"):
            return None
        facts = facts_for(stmt)
        if facts is None:
            return None
        return start, end, facts.tensor_names(start), bool(ctx.tensor_lines and set(range(start, end + 1))
                                                           & ctx.tensor_lines)

    for stmt, node in boolvals:
        if (at := gm103_site(stmt)) is None:
            continue
        start, end, tnames, forced = at
        try:
            for operand in (node.left, node.right):
                bool_valued(operand, tnames, forced)
            convert_condition(node, tnames, forced)
        except Refuse as exc:
            if forced:
                result.refusals.append(Refusal("GM103", start, str(exc)))
            continue
        op = "and" if isinstance(node.operator, cst.And) else "or"
        site = Site("GM103", start, end, f"`{op}` of tensor booleans -> torch.logical_{op}",
                    [an.rng(node.left)], "logical")
        result.edits.append(Edit(node, lambda updated, tnames=tnames, forced=forced:
                                 convert_condition(updated, tnames, forced), site))

    for stmt, node in chains:
        if (at := gm103_site(stmt)) is None:
            continue
        start, end, tnames, forced = at
        try:
            unchain(node, tnames, forced)
            scalar_operands(node)
        except Refuse as exc:
            if forced or tensorish(node, tnames):
                result.refusals.append(Refusal("GM103", start, str(exc)))
            continue
        site = Site("GM103", start, end, "chained comparison on a tensor -> `&` of its comparisons",
                    [], "logical")
        result.edits.append(Edit(node, lambda updated, tnames=tnames, forced=forced:
                                 chained_and(updated, tnames, forced), site))

    for node in ifexps:
        start, end = an.span(node)
        tl = an.span(node.test)
        test_lines = set(range(tl[0], tl[1] + 1))
        if ctx.lines is not None and not (set(range(start, end + 1)) & ctx.lines):
            continue
        if not ctx.wants("GM102"):
            continue
        facts = facts_for(node)
        if facts is None:
            continue
        tnames = facts.tensor_names(start)
        reported = bool(ctx.tensor_lines and test_lines & ctx.tensor_lines)
        typed = python_only(node.test, frozenset(facts.python_params))
        forced = reported and not typed
        try:
            convert_condition(node.test, tnames, forced)
        except Refuse as exc:
            if ctx.lines is not None and forced:
                result.refusals.append(Refusal("GM102", start, str(exc)))
            elif ctx.lines is not None and reported:
                # Dynamo saw a tensor where the annotation says a Python value: say why it stays
                params = ", ".join(f"`{n}`" for n in sorted(names_in(node.test) & set(facts.python_params)))
                result.refusals.append(Refusal(
                    "GM102", start, f"the condition reads only parameters typed as Python values ({params}), "
                    "yet Dynamo saw a tensor there: a caller passes a tensor despite the annotation"))
            continue
        try:
            arms = []
            for v in (node.body, node.orelse):
                arm = Arm(ret=v, returns=True)
                check_value(v, arm)
                if is_constant(v):
                    raise Refuse(f"an arm is the Python constant `{code(v)}`; torch.where would make it a tensor")
                arms.append(arm)
            holder = an.parent(node)
            how = "is returned" if isinstance(holder, cst.Return) else None
            if isinstance(holder, cst.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0].target, cst.Name):
                how = escapes(holder.targets[0].target.value, an, facts, end)
            if how:
                for v in (node.body, node.orelse):
                    refuse_alias(v, facts, start, how)
            pure = arm_calls(an, node, arms, tnames)
            use_cond = any(a.outside_calls for a in arms)
            if not use_cond:
                for a in arms:
                    _total(a.ret, tnames, pure)
        except Refuse as exc:
            result.refusals.append(Refusal("GM102", start, str(exc)))
            continue
        if use_cond and not offer_unsafe(ctx, result, "GM102", start, _COND_LIMITS, "torch.cond"):
            continue
        site = Site("GM102", start, end, f"ternary on a tensor -> torch.{'cond' if use_cond else 'where'}",
                    [an.rng(node.test)], "cond" if use_cond else "where", claims=STATEMENT)

        def build_exp(updated, tnames=tnames, forced=forced, use_cond=use_cond, pure=pure,
                      numbers=_numbers(an, node, facts)):
            test = convert_condition(updated.test, tnames, forced)
            return select([test], [updated.body, updated.orelse], use_cond, tnames, pure, numbers)

        result.edits.append(Edit(node, build_exp, site))
    return result


CASES = [
    Case(
        "def f(x):\n    if x.sum() > 0:\n        y = x * 2\n    else:\n        y = x - 1\n    return y\n",
        "import torch\n\ndef f(x):\n    y = torch.where(x.sum() > 0, x * 2, x - 1)\n    return y\n",
    ),
    Case(
        "import torch\n\ndef f(x):\n    # keep me\n    if x.mean().item() > 0.5:\n        y = x + 1\n        z = x * 3\n    "
        "else:\n        y = x\n        z = x\n    return y + z\n",
        "import torch\n\ndef f(x):\n    # keep me\n    y = torch.where(x.mean() > 0.5, x + 1, x)\n    "
        "z = torch.where(x.mean() > 0.5, x * 3, x)\n    return y + z\n",
    ),
    Case(  # both paths slice alike: one shape
        "import torch\ndef f(x, n):\n    if x.sum() > 0:\n        y = x[:, :n] * 2\n    else:\n        y = x[:, :n]\n    return y * 2\n",
        "import torch\ndef f(x, n):\n    y = torch.where(x.sum() > 0, x[:, :n] * 2, x[:, :n])\n    return y * 2\n",
    ),
    Case(
        "import torch\ndef f(x):\n    x = x + 1\n    if x.max() > 3:\n        x = x / 2\n    return x\n",
        "import torch\ndef f(x):\n    x = x + 1\n    x = torch.where(x.max() > 3, x / 2, x)\n    return x\n",
    ),
    Case(
        "import torch\ndef f(x):\n    if (x > 1).any():\n        y = x * 2\n    elif (x < -1).all():\n        y = -x\n"
        "    else:\n        y = x\n    return y * 2\n",
        "import torch\ndef f(x):\n    y = torch.where((x > 1).any(), x * 2, torch.where((x < -1).all(), -x, x))\n    return y * 2\n",
    ),
    Case(
        "import torch\ndef f(x):\n    return x * 2 if x.sum() > 0 else x - 1\n",
        "import torch\ndef f(x):\n    return torch.where(x.sum() > 0, x * 2, x - 1)\n",
    ),
    Case(
        "import torch\ndef f(x):\n    if x.sum() > 0 and not (x.max() > 5):\n        return x * 2\n    return x + 1\n",
        "import torch\ndef f(x):\n    return torch.where(\n"
        "        torch.logical_and(x.sum() > 0, torch.logical_not(x.max() > 5)),\n"
        "        x * 2,\n        x + 1,\n    )\n",
    ),
    Case(
        "import torch\ndef f(self, x):\n    h = x * 2\n    if h.sum() > 0:\n        return self.proj(h)\n    else:\n        return h\n",
        "import torch\ndef f(self, x):\n    h = x * 2\n    return torch.cond(h.sum() > 0, lambda: self.proj(h), lambda: h.clone())\n",
        unsafe=True,  # torch.cond: no second derivative, no recording hook on self.proj
    ),
    Case(  # without --unsafe-fixes: left alone, saying why
        "import torch\ndef f(self, x):\n    h = x * 2\n    if h.sum() > 0:\n        return self.proj(h)\n    else:\n        return h\n",
        reason="second derivative",
    ),
    Case(
        "import torch\ndef f(h):\n    if torch.isinf(h).any() or torch.isnan(h).any():\n        c = torch.finfo(h.dtype).max - 10\n"
        "        h = torch.clamp(h, min=-c, max=c)\n    return h * 2\n",
        "import torch\ndef f(h):\n    h = torch.where(\n"
        "        torch.logical_or(torch.isinf(h).any(), torch.isnan(h).any()),\n"
        "        torch.clamp(\n            h,\n"
        "            min=-(torch.finfo(h.dtype).max - 10),\n"
        "            max=(torch.finfo(h.dtype).max - 10),\n        ),\n        h,\n    )\n"
        "    return h * 2\n",
    ),
]

CASES += [
    Case(  # ``and`` mixing a Python value and a tensor: the Python part stays an ``if``
        "import torch\ndef f(x):\n    flag = x.dim() == 2\n    if flag and x.sum() > 0:\n        x = x * 2\n    return x * 2\n",
        "import torch\ndef f(x):\n    flag = x.dim() == 2\n    if flag:\n        x = torch.where(x.sum() > 0, x * 2, x)\n    return x * 2\n",
    ),
    Case(  # early return; the rest of the block (pure assignments, then return) is the other arm
        "import torch\ndef f(x):\n    y = x * 2\n    if y.sum() > 0:\n        return y\n    z = y - 1\n    return z * 3\n",
        "import torch\ndef f(x):\n    y = x * 2\n    return torch.where(y.sum() > 0, y, (y - 1) * 3)\n",
    ),
    Case(  # ``and`` of tensor booleans outside a condition
        "import torch\ndef f(x):\n    m = (x > 0).any() and x.max() < 5\n    return x * m\n",
        "import torch\ndef f(x):\n    m = torch.logical_and((x > 0).any(), x.max() < 5)\n    return x * m\n",
    ),
    Case(  # a later value reads a name the rewrite rebinds first: one tuple assignment
        "import torch\ndef f(x, y):\n    if x.sum() > 0:\n        x = x + 1\n        y = x * 2\n    return x + y\n",
        "import torch\ndef f(x, y):\n    x, y = (\n"
        "        torch.where(x.sum() > 0, x + 1, x),\n"
        "        torch.where(x.sum() > 0, (x + 1) * 2, y),\n    )\n    return x + y\n",
    ),
    Case(  # Reformer's padding bucket: ``if <python> and <tensor>`` with a Python ``elif``, which
       # stays for the Python-false path and is the where's other arm otherwise
        "import torch\ndef f(x, mask, grow):\n    n = 4\n    if mask is not None and (mask.sum().item() < 1):\n"
        "        n = n + 1\n        x = torch.where(mask > 0, x, x - n)\n    elif grow is not None:\n"
        "        n = n + 2\n    return x * n\n",
        "import torch\ndef f(x, mask, grow):\n    n = 4\n    if mask is not None:\n"
        "        n, x = (\n"
        "            torch.where(mask.sum() < 1, n + 1, (n + 2 if grow is not None else n)),\n"
        "            torch.where(mask.sum() < 1, torch.where(mask > 0, x, x - (n + 1)), x),\n"
        "        )\n    elif grow is not None:\n        n = n + 2\n    return x * n\n",
    ),
]

CASES += [
    Case(  # a tensor ``if`` whose ``elif`` tests a Python value: the chain is the where's other arm
        "import torch\ndef f(x):\n    if x.sum() > 0:\n        y = x * 2\n    elif x.shape[0] == 4:\n        y = -x\n"
        "    else:\n        y = x - 1\n    return y\n",
        "import torch\ndef f(x):\n    y = torch.where(x.sum() > 0, x * 2, (-x if x.shape[0] == 4 else x - 1))\n"
        "    return y\n",
    ),
    Case(  # an attribute every path re-binds (I-BERT's x_min / x_max): selected like a name
        "import torch\ndef f(self, x):\n    if x.sum() > 0:\n        self.acc = x * 2\n    else:\n"
        "        self.acc = x - 1\n    return self.acc + 1\n",
        "import torch\ndef f(self, x):\n    self.acc = torch.where(x.sum() > 0, x * 2, x - 1)\n    return self.acc + 1\n",
    ),
]

# the ``if`` sits in a method of class ``R``: tests/rewrites/test_fix_cases.py runs ``R().f``
CASES += [
    Case(  # a pure, total method of the same class is arithmetic, not a reason for torch.cond
        # (the division by its value still gets a safe divisor where the arm is not selected)
        "import torch\nclass R:\n    def _base(self, n):\n        r = n * 2.0 - 1\n        return r.abs() + 0.5\n\n"
        "    def f(self, n: torch.Tensor, inv: torch.Tensor):\n        if n.max() > 0:\n"
        "            inv = 1.0 / self._base(n)\n        return inv * 2\n",
        "import torch\nclass R:\n    def _base(self, n):\n        r = n * 2.0 - 1\n        return r.abs() + 0.5\n\n"
        "    def f(self, n: torch.Tensor, inv: torch.Tensor):\n"
        "        inv = torch.where(\n            n.max() > 0,\n"
        "            1.0 / torch.where(n.max() > 0, self._base(n), 1),\n            inv,\n        )\n"
        "        return inv * 2\n",
    ),
    Case(  # a pure method that is not total (``** 0.5``: infinite derivative at 0) cannot be fed a
       # safe value from outside: torch.cond runs it only where eager code did
        "import torch\nclass R:\n    def _base(self, n):\n        r = n * 2.0 - 1\n        return r.abs() ** 0.5\n\n"
        "    def f(self, n: torch.Tensor, inv: torch.Tensor):\n        if n.max() > 0:\n"
        "            inv = 1.0 / self._base(n)\n        return inv * 2\n",
        "import torch\nclass R:\n    def _base(self, n):\n        r = n * 2.0 - 1\n        return r.abs() ** 0.5\n\n"
        "    def f(self, n: torch.Tensor, inv: torch.Tensor):\n"
        "        inv = torch.cond(n.max() > 0, lambda: 1.0 / self._base(n), lambda: inv.clone())\n        return inv * 2\n",
        unsafe=True,
    ),
    Case(  # one that calls code the rewrite cannot see is not: torch.cond runs only the taken arm
        "import torch\ndef scale(n):\n    return n * 2.0\nclass R:\n    def _base(self, n):\n        return scale(n)\n\n"
        "    def f(self, n: torch.Tensor, inv: torch.Tensor):\n        if n.max() > 0:\n"
        "            inv = 1.0 / self._base(n)\n        return inv * 2\n",
        "import torch\ndef scale(n):\n    return n * 2.0\nclass R:\n    def _base(self, n):\n        return scale(n)\n\n"
        "    def f(self, n: torch.Tensor, inv: torch.Tensor):\n"
        "        inv = torch.cond(n.max() > 0, lambda: 1.0 / self._base(n), lambda: inv.clone())\n        return inv * 2\n",
        unsafe=True,
    ),
]

# non-total arms: the double-where form (the dangerous operand fed a safe value where the
# arm is not selected; tests/rewrites/test_fix_soundness.py checks the gradients)
CASES += [
    Case(
        "import torch\ndef f(h):\n    if (h > 0).all():\n        y = torch.sqrt(h)\n    else:\n        y = h * 0.5\n    return y\n",
        "import torch\ndef f(h):\n    y = torch.where(\n        (h > 0).all(),\n"
        "        torch.sqrt(torch.where((h > 0).all(), h, 1)),\n        h * 0.5,\n    )\n"
        "    return y\n",
    ),
    Case(  # masked mean: the divisor of an empty mask is 0 on the path eager code skips
        "import torch\ndef f(s, m):\n    if (m > 0).any():\n        y = s / (m > 0).sum()\n    else:\n        y = s\n    return y * 2\n",
        "import torch\ndef f(s, m):\n    y = torch.where((m > 0).any(), s / torch.where((m > 0).any(), (m > 0).sum(), 1), s)\n"
        "    return y * 2\n",
    ),
    Case(  # a divisor holding a Python number (a float of __init__, a number parameter) is fed 1 only when
        # it is zero: a nonzero number divides as written, in the tensor's dtype (not as a float32 tensor)
        "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self, t: float = 1.3):\n"
        "        super().__init__()\n        self.t = t\n\n    def forward(self, x, k: int):\n"
        "        if x.max() > 0:\n            x = x / self.t + x / k\n        return x * 2\n",
        "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self, t: float = 1.3):\n"
        "        super().__init__()\n        self.t = t\n\n    def forward(self, x, k: int):\n"
        "        x = torch.where(\n            x.max() > 0,\n"
        "            (\n                x / (self.t or torch.where(x.max() > 0, self.t, 1))\n"
        "                + x / (k or torch.where(x.max() > 0, k, 1))\n            ),\n            x,\n        )\n"
        "        return x * 2\n",
    ),
    Case(  # re-bound outside __init__: what it holds is not known, the divisor is fed as a tensor
        "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self, t: float = 1.3):\n"
        "        super().__init__()\n        self.t = t\n\n    def set(self, t):\n        self.t = t\n\n"
        "    def forward(self, x):\n        if x.max() > 0:\n            x = x / self.t\n        return x * 2\n",
        "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self, t: float = 1.3):\n"
        "        super().__init__()\n        self.t = t\n\n    def set(self, t):\n        self.t = t\n\n"
        "    def forward(self, x):\n        x = torch.where(x.max() > 0, x / torch.where(x.max() > 0, self.t, 1), x)\n"
        "        return x * 2\n",
    ),
    Case(  # the else arm is fed under logical_not(c); exp overflows, so it is guarded too
        "import torch\ndef f(h):\n    if h.max() > 80:\n        return h * 0.5\n    return h.exp()\n",
        "import torch\ndef f(h):\n    return torch.where(\n        h.max() > 80,\n        h * 0.5,\n"
        "        torch.where(torch.logical_not(h.max() > 80), h, 0).exp(),\n    )\n",
    ),
    Case(  # elif chains compose: an elif arm is selected under not c0 and c1
        "import torch\ndef f(x, y):\n    if (x > 1).all():\n        z = x * 2\n    elif (y > 0).all():\n        z = y.log()\n"
        "    else:\n        z = y\n    return z * 2\n",
        "import torch\ndef f(x, y):\n    z = torch.where(\n        (x > 1).all(),\n"
        "        x * 2,\n        torch.where(\n            (y > 0).all(),\n"
        "            torch.where(\n"
        "                torch.logical_and(torch.logical_not((x > 1).all()), (y > 0).all()),\n"
        "                y,\n                1,\n            ).log(),\n            y,\n"
        "        ),\n    )\n    return z * 2\n",
    ),
    Case(  # a boolean-mask index is total (no index out of range): left as it is, not fed a safe value
        "import torch\ndef f(x):\n    if x.sum() > 0:\n        y = x * x[torch.greater(x, 1)].sum()\n    else:\n"
        "        y = x\n    return y * 2\n",
        "import torch\ndef f(x):\n    y = torch.where(x.sum() > 0, x * torch.where(torch.greater(x, 1), x, 0).sum(), x)\n"
        "    return y * 2\n",
    ),
    Case(  # a Python-number divisor and an integer power are total: nothing to feed
        "import torch\ndef f(x):\n    if x.sum() > 0:\n        x = x / 2 + x ** 2\n    return x * 2\n",
        "import torch\ndef f(x):\n    x = torch.where(x.sum() > 0, x / 2 + x ** 2, x)\n    return x * 2\n",
    ),
]

# left alone, the refusal naming why
CASES += [
    Case("import torch\ndef f(x):\n    if (x > 0).all():\n        y = torch.tan(x)\n    else:\n        y = x\n    return y\n",
         reason="`torch.tan` is not known to be total"),
    Case("import torch\ndef f(x):\n    if (x > 0).all():\n        y = x.std()\n    else:\n        y = x\n    return y\n",
         reason="`std`"),
    Case("import torch\nimport torch.nn.functional as F\ndef f(x):\n    if x.sum() > 0:\n        x = F.relu(x, inplace=True)\n"
         "    return x\n", reason="inplace=True"),
    Case("import torch\ndef f(x, o):\n    if x.sum() > 0:\n        x = torch.add(x, 1, out=o)\n    return x\n", reason="out="),
    Case(  # Reformer's padding: one path slices, so the two may differ in shape
        "import torch\ndef f(x, pad, n):\n    if pad:\n        x = x[:, :n]\n    return x\n",
        lines=frozenset({3}), hints=("tensor",), reason="sliced on one path only (`x[:, :n]`)"),
    Case("import torch\ndef f(x, n):\n    if x.sum() > 0:\n        return x[:n] * 2\n    return x\n",
         reason="sliced on one path only (`x[:n]`)"),
    Case("import torch\nimport torch.nn.functional as F\ndef f(x):\n    if x.sum() > 0:\n        x = F.dropout(x, 0.1)\n"
         "    return x\n", reason="draws random numbers (F.dropout)"),
    Case("import torch\ndef f(x):\n    if x.sum() > 0:\n        x = x + torch.randn_like(x)\n    return x\n",
         reason="draws random numbers (torch.randn_like)"),
    Case("import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.norm = nn.BatchNorm1d(4)\n\n    def forward(self, h):\n        if h.sum() > 0:\n"
         "            h = self.norm(h)\n        return h\n", reason="nn.BatchNorm1d"),
    Case("import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.drop = nn.Dropout(0.1)\n\n    def forward(self, h):\n        if h.sum() > 0:\n"
         "            h = self.drop(h)\n        return h\n", reason="nn.Dropout"),
    Case("import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.act = nn.ReLU(inplace=True)\n\n    def forward(self, h):\n        if h.mean() > 0:\n"
         "            h = self.act(h)\n        return h\n", reason="nn.ReLU(inplace=True): it writes its input"),
    Case("def f(x):\n    y = x * 2\n    if y.sum() > 0:\n        return y\n    print(y)\n    return y\n",
         reason="cannot become an arm"),
    Case("def f(self, x):\n    if x.sum() > 0:\n        return x\n    h = self.proj(x)\n    return h + h\n",
         reason="read twice"),
    Case("import torch\ndef f(x):\n    m = x.sum() and x.max() > 0\n    return m\n"),
    Case("def f(x):\n    if x.sum() > 0:\n        return ()\n    return ()\n", reason="constant"),
    Case("def f(x):\n    if x.sum() > 0:\n        print('pos')\n        y = x\n    else:\n        y = -x\n    return y\n",
         reason="side effects"),
    Case("def f(x):\n    if x.sum() > 0:\n        x.add_(1)\n    return x\n", reason="side effects"),
    Case("def f(x):\n    if x.sum() > 0:\n        x[0] = 1\n    return x\n", reason="subscript"),
    Case("def f(x):\n    if x.sum() > 0:\n        y = x * 2\n    return y\n", reason="one path only"),
    Case("def f(x):\n    if x.sum() > 0:\n        raise ValueError('bad')\n    return x\n", reason="raises"),
    Case("def f(x, n):\n    if n > 0:\n        y = x * 2\n    else:\n        y = x\n    return y\n"),
    Case("def f(x):\n    if x.sum() > 0:\n        y = 1.0\n    else:\n        y = x\n    return y\n", reason="constant"),
    # loop control: nothing to select; LayerDrop (a draw decides) says why neither form is safe
    Case("def f(x, layers):\n    for layer in layers:\n        if x.sum() > 0:\n            continue\n"
         "        x = layer(x)\n    return x\n", reason="loop control (`continue`)"),
    Case("import torch\ndef f(self, x):\n    for layer in self.layers:\n        p = torch.rand([])\n"
         "        if p < self.layerdrop:\n            continue\n        x = layer(x)\n    return x\n",
         reason="LayerDrop: the condition is a random draw (`torch.rand([])`)"),
    Case("import torch\ndef f(self, x):\n    for layer in self.layers:\n        to_drop = False\n"
         "        if torch.rand([]) < self.layerdrop:\n            to_drop = True\n        if not to_drop:\n"
         "            x = layer(x)\n    return x\n", lines={5}, reason="gradients and the RNG state"),
    # an attribute only some paths re-bind: a torch.where would give the others a new object
    Case("def f(self, x):\n    if x.sum() > 0:\n        self.count = x\n    return x\n", reason="re-bound on some paths only"),
    # ``if <python> and <tensor>`` whose ``elif`` is a tensor, or binds a name no other path had
    Case("def f(x, m):\n    if m is not None and x.sum() > 0:\n        x = x * 2\n    elif x.max() > 1:\n"
         "        x = x - 1\n    return x\n", reason="not a plain Python value"),
    Case("def f(x, m, g):\n    if m is not None and x.sum() > 0:\n        y = x * 2\n    elif g:\n"
         "        y = x - 1\n    return y\n", reason="one path only"),
]

# chained comparisons on tensors: `lo <= t <= hi` is `lo <= t and t <= hi`, whose `and` breaks
CASES += [
    Case(
        "import torch\ndef f(h):\n    if 0.0 <= h.max() <= 1.0:\n        h = h * 2.0\n    return h * 2\n",
        "import torch\ndef f(h):\n    h = torch.where(torch.logical_and(0.0 <= h.max(), h.max() <= 1.0), h * 2.0, h)\n"
        "    return h * 2\n",
    ),
    Case(  # as a value: `&` of the comparisons, what `and` returns on 0-dim boolean tensors
        "import torch\ndef f(h):\n    ok = -0.5 < h.mean() < 0.5\n    return h * ok\n",
        "import torch\ndef f(h):\n    ok = (-0.5 < h.mean()) & (h.mean() < 0.5)\n    return h * ok\n",
    ),
    # the middle operand is evaluated twice: not when it calls something outside torch
    Case("import torch\ndef f(h):\n    if 0 <= helper(h) <= 1:\n        h = h * 2\n    return h\n",
         lines={3}, hints=("tensor",), reason="evaluated twice"),
]

# Dynamo's word that a tensor decided the branch: `<python> and <tensor>` where the tensor came
# through a parameter the inference does not know (`err`), split at the Python-typed operand
CASES += [
    Case(
        "import torch\ndef f(self, h, err, tol: float = 1e-3, n_iter: int = 3):\n"
        "    if n_iter > 1 and err < tol:\n        h = h * 0.5\n    return h * 2\n",
        "import torch\ndef f(self, h, err, tol: float = 1e-3, n_iter: int = 3):\n"
        "    if n_iter > 1:\n        h = torch.where(err < tol, h * 0.5, h)\n    return h * 2\n",
        lines={3}, hints=("tensor",),
    ),
    Case(  # a name whose tensor came from a call the inference cannot follow
        "import torch\ndef f(h, stop):\n    done = stop(h)\n    if done:\n        h = h * 0\n    return h * 2\n",
        "import torch\ndef f(h, stop):\n    done = stop(h)\n    h = torch.where(done.bool(), h * 0, h)\n    return h * 2\n",
        lines={4}, hints=("tensor",),
    ),
]
