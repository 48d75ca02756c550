"""GM3xx: host scalars that only feed tensor arithmetic (or a ternary) stay tensors.

* ``x * t.item()`` / ``x + float(t)`` / ``x * int(t)`` -> ``x * t.detach()`` / ``x + t.detach().double()`` /
  ``x * t.long()``
* ``s = t.item()`` (or ``float(t)``, ``int(t)``) where every later read of ``s`` is an
  operand of arithmetic whose other side is a tensor -> ``s = t.detach()``
* ``.item()`` that decides a ternary (``y = A if s > c else B``, ``y`` only feeding tensor
  arithmetic) -> ``s = t.detach()`` and ``y = torch.where(s > c, A, B)`` (non-total arms fed a
  safe value, as GM1 does: ``30.0 / torch.where(s > c, s, 1)``)

What the user keeps: the values, the dtypes (below) and the gradients -- ``.item()`` cut the
scalar off autograd, so the tensor that replaces it is ``.detach()``-ed (``x / scale``
with ``scale = h.abs().max().item()`` gets no gradient through ``scale``, before and after).
A comparison of the scalar with a float constant (``s > 0.3`` in a ternary, and in the GM1
conditions that strip ``.item()``) is made in float64, ``s.double() > 0.3``, as Python
compared two doubles: in the tensor's own dtype the constant is rounded first (0.3 is
0.30078125 in bfloat16) and the result flips at the values in between. A constant that
float16 and bfloat16 hold exactly (``0.5``, ``30.0``, ``0``) is compared as written.

A 0-dim tensor in arithmetic with a tensor of more dimensions follows the same type
promotion as a Python scalar of its kind, so results keep their dtype: ``float(t)``
becomes a float64 0-dim tensor (an int tensor times it is float, as with a Python float),
``int(t)`` an int64 one (the cast truncates toward zero, as ``int()`` does). Refused: a
scalar that reaches a Python API (shapes, ``range``, a comparison outside a ternary, a
format string, a call) or is rebound, and a ternary whose arms hold an operation of unknown
totality.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes import total
from rewrites.fixes.gm3_host_math import host_rounded
from rewrites.fixes.base import Analysis, Case, Context, Edit, Plan, Refusal, Site
from rewrites.fixes.facts import FunctionFacts, names_in
from rewrites.fixes.judgements import (call, code, compare_in_double, full_name, is_number_literal, paren, strip_parens,
                                       tensorish)

RULES = ("GM301", "GM303")
ORDER = 30


def scalar_source(node: cst.BaseExpression, tnames: frozenset[str]) -> Optional[tuple[str, cst.BaseExpression]]:
    """``t.item()`` / ``float(t)`` -> (rule, t); else None."""
    if not isinstance(node, cst.Call) or host_rounded(node) is not None:
        return None  # (torch arithmetic on a host number: gm3_host_math computes it on the host)
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "item" and not node.args:
        return "GM301", node.func.value
    if full_name(node.func) in ("float", "int") and len(node.args) == 1 and not node.args[0].keyword \
            and tensorish(node.args[0].value, tnames):
        inner = node.args[0].value
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "item" \
                and not inner.args:
            return "GM303", inner.func.value  # int(t.item()) is int(t) (torchaudio's lengths-to-mask)
        return "GM303", inner
    return None


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    calls: list[cst.Call] = []
    assigns: list[cst.Assign] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            calls.append(n)

        def visit_Assign(self, n: cst.Assign) -> None:
            if len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
                assigns.append(n)

    an.module.visit(V())
    facts: dict[int, FunctionFacts] = {}

    def facts_for(node):
        fn = an.enclosing_function(node)
        if fn is None:
            return None
        if id(fn) not in facts:
            facts[id(fn)] = FunctionFacts(an, fn)
        return facts[id(fn)]

    def arithmetic_with_tensor(use: cst.CSTNode, names: frozenset[str]) -> bool:
        p = an.parent(use)
        if isinstance(p, cst.BinaryOperation) and not isinstance(p.operator, (cst.MatrixMultiply,)):
            other = p.right if p.left is use else p.left
            f = facts_for(use)
            return tensorish(other, names, f.module_names if f is not None else frozenset())
        return False

    def unknown_operand(use: cst.CSTNode) -> Optional[cst.BaseExpression]:
        """The other operand of arithmetic ``use`` is in, when that is what failed."""
        p = an.parent(use)
        if isinstance(p, cst.BinaryOperation) and not isinstance(p.operator, cst.MatrixMultiply):
            other = p.right if p.left is use else p.left
            return None if is_number_literal(other) else other  # a number: Python arithmetic
        return None

    handled: set[int] = set()
    for node in assigns:
        f = facts_for(node)
        if f is None:
            continue
        start, end = an.span(node)
        names = f.tensor_names(start)
        src = scalar_source(node.value, names)
        if src is None or not ctx.wants(src[0]) or not ctx.covers(start, end):
            continue
        rule, tensor = src
        var = node.targets[0].target.value
        handled.add(id(node.value))
        if sum(1 for n, _, _ in f.bindings if n == var) != 1:
            result.refusals.append(Refusal(rule, start, f"`{var}` is rebound elsewhere in the function"))
            continue
        uses: list[cst.Name] = []

        class U(cst.CSTVisitor):
            def visit_Name(self, n: cst.Name) -> None:
                if n.value == var and an.span(n)[0] > end:
                    uses.append(n)

        f.fn.body.visit(U())
        bad = [u for u in uses if not arithmetic_with_tensor(u, names | {var})]
        ternaries: list[cst.IfExp] = []
        if uses and bad:
            ternaries = _ternaries_for(an, f, var, bad, names)
            if ternaries:
                bad = []
        if not uses or bad:
            other = unknown_operand(bad[0]) if uses else None
            if not uses:
                why = "it is never read"
            elif other is not None:
                why = (f"`{var}` meets `{code(other)}` in arithmetic at line {an.span(bad[0])[0]}, which is not "
                       "known to be a tensor (kept a tensor, the result would change type)")
            else:
                why = f"`{var}` reaches Python code at line {an.span(bad[0])[0]} (not only tensor arithmetic)"
            result.refusals.append(Refusal(rule, start, why))
            continue
        if ternaries:
            try:
                for t in ternaries:
                    total.check(t.body)
                    total.check(t.orelse)
            except total.Partial as exc:
                result.refusals.append(Refusal(rule, start, f"the ternary `{var}` decides is not total: {exc}"))
                continue
            last = max(an.span(t)[1] for t in ternaries)
            site = Site(rule, start, last, f"`{var}` stays a tensor; the ternary it decides -> torch.where",
                        [an.rng(t.test) for t in ternaries], strategy="scalar")
            result.edits.append(Edit(node.value, lambda updated: _unwrap(updated), site, needs_torch=False))
            for t in ternaries:
                result.edits.append(Edit(t, lambda u, var=var: _ternary(u, var), None))
            continue
        site = Site(rule, start, end, f"`{var}` stays a tensor (no {code(node.value.func) if rule == 'GM303' else '.item()'})",
                    strategy="scalar")
        result.edits.append(Edit(node.value, lambda updated: _unwrap(updated), site, needs_torch=False))

    for node in calls:
        if id(node) in handled:
            continue
        f = facts_for(node)
        if f is None:
            continue
        start, end = an.span(node)
        if not ctx.covers(start, end):
            continue
        names = f.tensor_names(start)
        src = scalar_source(node, names)
        if src is None or not ctx.wants(src[0]):
            continue
        p = an.parent(node)
        if not isinstance(p, cst.BinaryOperation):
            continue  # conditions are GM1's; other uses are refused by not matching
        if not arithmetic_with_tensor(node, names):
            continue
        site = Site(src[0], start, end, "host scalar in tensor arithmetic stays a tensor", strategy="scalar")
        result.edits.append(Edit(node, lambda updated: _unwrap(updated), site, needs_torch=False))
    return result


def _ternaries_for(an: Analysis, f: FunctionFacts, var: str, bad: list, names: frozenset[str]) -> list:
    """``.item()`` that decides a ternary: ``y = A if var > c else B`` where ``y`` (bound once)
    only feeds tensor arithmetic. With ``var`` a tensor the ternary becomes
    ``torch.where(var > c, A, B)`` (a constant arm stays a Python scalar operand of where,
    and ``y`` a 0-dim tensor, which promotes like the Python number it replaces). Every
    other read of ``var`` must sit inside such a ternary, as an operand of arithmetic or
    of the comparison. [] when the pattern does not hold."""
    from rewrites.fixes.judgements import impurity

    out: list[cst.IfExp] = []
    for u in bad:
        p = an.parent(u)
        if not isinstance(p, (cst.Comparison, cst.BinaryOperation)):
            return []
        n, exp = p, None
        while n is not None and not isinstance(n, cst.BaseStatement):
            if isinstance(n, cst.IfExp):
                exp = n
                break
            n = an.parent(n)
        if exp is None:
            return []
        if exp not in out:
            out.append(exp)
    for exp in out:
        test = strip_parens(exp.test)
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or isinstance(
                test.comparisons[0].operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)):
            return []
        if var not in names_in(test) or impurity(exp.body) or impurity(exp.orelse):
            return []
        asg = an.parent(exp)
        if not (isinstance(asg, cst.Assign) and len(asg.targets) == 1 and isinstance(asg.targets[0].target, cst.Name)):
            return []
        y = asg.targets[0].target.value
        if sum(1 for n_, _, _ in f.bindings if n_ == y) != 1:
            return []
        after = an.span(asg)[1]
        reads: list[cst.Name] = []

        class U(cst.CSTVisitor):
            def visit_Name(self, n: cst.Name) -> None:
                if n.value == y and an.span(n)[0] > after:
                    reads.append(n)

        f.fn.body.visit(U())
        for r in reads:
            p = an.parent(r)
            if not isinstance(p, cst.BinaryOperation) or isinstance(p.operator, cst.MatrixMultiply):
                return []
            other = p.right if p.left is r else p.left
            if not tensorish(other, names | {var, y}):
                return []
        if not reads:
            return []
    return out


def _unwrap(node: cst.Call) -> cst.BaseExpression:
    """``t.item()`` -> ``t.detach()``; ``float(t)`` -> ``t.detach().double()``; ``int(t)`` ->
    ``t.long()``: a 0-dim tensor of the Python number's kind promotes as that number does (an
    int tensor times a Python float is float; times a 0-dim float64, too), the cast to int64
    truncates toward zero as ``int()`` does, and ``.detach()`` keeps what ``.item()`` did for
    autograd: no gradient flows back through the scalar (an integer has none to detach)."""
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "item":
        return _method(node.func.value, "detach")
    if full_name(node.func) == "int":
        return _method(node.args[0].value, "long")
    return _method(_method(node.args[0].value, "detach"), "double")


def _method(obj: cst.BaseExpression, name: str) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=paren(obj), attr=cst.Name(name)), args=[])


def _ternary(exp: cst.IfExp, var: str) -> cst.BaseExpression:
    """``A if var > c else B`` -> ``torch.where(var > c, A, B)``: the comparison in float64
    against an inexact float constant (as Python compared), and each arm's non-total
    operations fed a safe value where it is not selected (``30.0 / peak`` at ``peak == 0``)."""
    test = strip_parens(exp.test)
    if isinstance(test, cst.Comparison):
        test = compare_in_double(test, lambda e: isinstance(e, cst.Name) and e.value == var)
    body = total.guard(exp.body, test)
    orelse = total.guard(exp.orelse, call("torch.logical_not", test))
    return call("torch.where", test, body, orelse)


CASES = [
    Case(
        "import torch\ndef f(x, t):\n    s = t.sum().item()\n    return x * s + s\n",
        "import torch\ndef f(x, t):\n    s = t.sum().detach()\n    return x * s + s\n",
    ),
    Case(
        "import torch\ndef f(x, t):\n    s = t.sum().item()\n    return x * s, s\n",
        None,  # ``s`` is also returned as a Python number: refused, unchanged
    ),
    Case(  # .item() detached: no gradient reaches t through scale, before and after
        "import torch\ndef f(x: torch.Tensor, t: torch.Tensor):\n    scale = t.max().item()\n    return x * scale\n",
        "import torch\ndef f(x: torch.Tensor, t: torch.Tensor):\n    scale = t.max().detach()\n    return x * scale\n",
    ),
    Case(
        "import torch\ndef f(x: torch.Tensor):\n    return x / x.norm().item()\n",
        "import torch\ndef f(x: torch.Tensor):\n    return x / x.norm().detach()\n",
    ),
]

CASES += [
    Case(  # an integer cast has no gradient to detach
        "import torch\ndef f(x: torch.Tensor, t: torch.Tensor):\n    k = int(t.sum())\n    return x * k\n",
        "import torch\ndef f(x: torch.Tensor, t: torch.Tensor):\n    k = t.sum().long()\n    return x * k\n",
    ),
    Case(
        "import torch\ndef f(x: torch.Tensor):\n    return x + float(x.mean())\n",
        "import torch\ndef f(x: torch.Tensor):\n    return x + x.mean().detach().double()\n",
    ),
    Case(  # the division the ternary guards gets a safe divisor where it is not selected (peak == 0)
        "import torch\ndef f(x: torch.Tensor):\n    peak = x.abs().max().item()\n"
        "    scale = 30.0 / peak if peak > 30.0 else 1.0\n    return x * scale\n",
        "import torch\ndef f(x: torch.Tensor):\n    peak = x.abs().max().detach()\n"
        "    scale = torch.where(peak > 30.0, 30.0 / torch.where(peak > 30.0, peak, 1), 1.0)\n    return x * scale\n",
    ),
    Case(  # 0.3 is not a bfloat16/float16 value: compared in float64, as Python compared
        "import torch\ndef f(x: torch.Tensor):\n    m = x.max().item()\n"
        "    scale = 2.0 if m > 0.3 else 0.5\n    return x * scale\n",
        "import torch\ndef f(x: torch.Tensor):\n    m = x.max().detach()\n"
        "    scale = torch.where(m.double() > 0.3, 2.0, 0.5)\n    return x * scale\n",
    ),
]

_BLOCK = """import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        h = self.norm(x)
        scale = h.abs().mean().item()
        return h + self.mlp(h) * scale


class Stack(nn.Module):
    def forward(self, x):
        for i, layer in enumerate(self.layers):
            s = x.abs().mean().item()
            x = x + layer(x) * s + self.extra[i](x) * s
        return x
"""

CASES += [
    # a submodule's output is a tensor: `self.mlp(h)`, a loop's `layer(x)`, `self.extra[i](x)`
    Case(_BLOCK, _BLOCK.replace(".mean().item()", ".mean().detach()")),
]

# left alone
CASES += [
    Case("import torch\ndef f(x: torch.Tensor, helper):\n    s = x.mean().item()\n    return x + helper(x) * s\n",
         reason="not known to be a tensor"),
    Case("import torch\ndef f(x: torch.Tensor):\n    peak = x.abs().max().item()\n"
         "    scale = 30.0 / peak if peak > 30.0 else 1.0\n    return scale\n", reason="Python code"),
    Case("import torch\ndef f(x: torch.Tensor):\n    n = x.sum().item()\n    return x[: int(n)]\n", reason="Python code"),
    Case("import torch\ndef f(x: torch.Tensor):\n    print(x.sum().item())\n    return x\n"),
]
