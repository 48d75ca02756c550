"""GM3xx: host scalars that only feed tensor arithmetic (or a ternary) stay tensors.

* ``x * t.item()`` / ``x + float(t)`` / ``x * int(t)`` -> ``x * t`` / ``x + t.double()`` / ``x * t.long()``
* ``s = t.item()`` (or ``float(t)``, ``int(t)``) where every later read of ``s`` is an
  operand of arithmetic whose other side is a tensor -> ``s = t``
* ``.item()`` that decides a ternary (``y = A if s > c else B``, ``y`` only feeding tensor
  arithmetic) -> ``s = t`` and ``y = torch.where(s > c, A, B)``

A 0-dim tensor in arithmetic with a tensor of more dimensions follows the same type
promotion as a Python scalar of its kind, so results keep their dtype: ``float(t)``
becomes a float64 0-dim tensor (an int tensor times it is float, as with a Python float),
``int(t)`` an int64 one (the cast truncates toward zero, as ``int()`` does). Refused: a
scalar that reaches a Python API (shapes, ``range``, a comparison outside a ternary, a
format string, a call) or is rebound.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import (Analysis, Context, Edit, FunctionFacts, Plan, Refusal, Site, call, code,
                                 full_name, names_in, paren, strip_parens, tensorish)

RULES = ("GM301", "GM303")


def scalar_source(node: cst.BaseExpression, tnames: frozenset[str]) -> Optional[tuple[str, cst.BaseExpression]]:
    """``t.item()`` / ``float(t)`` -> (rule, t); else None."""
    if not isinstance(node, cst.Call):
        return None
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "item" and not node.args:
        return "GM301", node.func.value
    if full_name(node.func) in ("float", "int") and len(node.args) == 1 and not node.args[0].keyword \
            and tensorish(node.args[0].value, tnames):
        return "GM303", node.args[0].value
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
            return tensorish(other, names)
        return False

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
            why = ("it is never read" if not uses else
                   f"`{var}` reaches Python code at line {an.span(bad[0])[0]} (not only tensor arithmetic)")
            result.refusals.append(Refusal(rule, start, why,
                                           advice="keep the value a tensor, or set torch._dynamo.config.capture_scalar_outputs"))
            continue
        if ternaries:
            last = max(an.span(t)[1] for t in ternaries)
            site = Site(rule, start, last, f"`{var}` stays a tensor; the ternary it decides -> torch.where",
                        [an.rng(t.test) for t in ternaries], strategy="scalar")
            result.edits.append(Edit(node.value, lambda updated: _unwrap(updated), site, needs_torch=False))
            for t in ternaries:
                result.edits.append(Edit(t, lambda u: call("torch.where", strip_parens(u.test), u.body, u.orelse), None))
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
    from rewrites.fixes.base import impurity

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
    """``t.item()`` -> ``t``; ``float(t)`` -> ``t.double()``; ``int(t)`` -> ``t.long()``: a
    0-dim tensor of the Python number's kind promotes as that number does (an int tensor
    times a Python float is float; times a 0-dim float64, too), and the cast to int64
    truncates toward zero as ``int()`` does."""
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "item":
        return node.func.value
    method = "long" if full_name(node.func) == "int" else "double"
    return cst.Call(func=cst.Attribute(value=paren(node.args[0].value), attr=cst.Name(method)), args=[])


FIXED = [
    (
        "import torch\ndef f(x, t):\n    s = t.sum().item()\n    return x * s + s\n",
        "import torch\ndef f(x, t):\n    s = t.sum()\n    return x * s + s\n",
    ),
    (
        "import torch\ndef f(x, t):\n    s = t.sum().item()\n    return x * s, s\n",
        None,  # ``s`` is also returned as a Python number: refused, unchanged
    ),
    (
        "import torch\ndef f(x: torch.Tensor, t: torch.Tensor):\n    scale = t.max().item()\n    return x * scale\n",
        "import torch\ndef f(x: torch.Tensor, t: torch.Tensor):\n    scale = t.max()\n    return x * scale\n",
    ),
    (
        "import torch\ndef f(x: torch.Tensor):\n    return x / x.norm().item()\n",
        "import torch\ndef f(x: torch.Tensor):\n    return x / x.norm()\n",
    ),
]

FIXED += [
    (
        "import torch\ndef f(x: torch.Tensor, t: torch.Tensor):\n    k = int(t.sum())\n    return x * k\n",
        "import torch\ndef f(x: torch.Tensor, t: torch.Tensor):\n    k = t.sum().long()\n    return x * k\n",
    ),
    (
        "import torch\ndef f(x: torch.Tensor):\n    return x + float(x.mean())\n",
        "import torch\ndef f(x: torch.Tensor):\n    return x + x.mean().double()\n",
    ),
    (
        "import torch\ndef f(x: torch.Tensor):\n    peak = x.abs().max().item()\n"
        "    scale = 30.0 / peak if peak > 30.0 else 1.0\n    return x * scale\n",
        "import torch\ndef f(x: torch.Tensor):\n    peak = x.abs().max()\n"
        "    scale = torch.where(peak > 30.0, 30.0 / peak, 1.0)\n    return x * scale\n",
    ),
]

NEGATIVE = [
    ("import torch\ndef f(x: torch.Tensor):\n    peak = x.abs().max().item()\n"
     "    scale = 30.0 / peak if peak > 30.0 else 1.0\n    return scale\n", "Python code"),
    ("import torch\ndef f(x: torch.Tensor):\n    n = x.sum().item()\n    return x[: int(n)]\n", "Python code"),
    ("import torch\ndef f(x: torch.Tensor):\n    print(x.sum().item())\n    return x\n", None),
]
