"""GM3xx: host scalars that only feed tensor arithmetic stay tensors.

* ``x * t.item()`` / ``x + float(t)``      -> ``x * t`` / ``x + t``
* ``s = t.item()`` (or ``float(t)``) where every later read of ``s`` is an operand of
  arithmetic whose other side is a tensor -> ``s = t``

A 0-dim tensor in arithmetic with a tensor of more dimensions follows the same type
promotion as a Python scalar of its kind, so results keep their dtype. Refused: ``int(t)``
(truncation), a scalar that reaches a Python API (shapes, ``range``, a comparison, a
format string, a call) or is rebound.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import (Analysis, Context, Edit, FunctionFacts, Plan, Refusal, Site, code,
                                 full_name, tensorish)

RULES = ("GM301", "GM303")


def scalar_source(node: cst.BaseExpression, tnames: frozenset[str]) -> Optional[tuple[str, cst.BaseExpression]]:
    """``t.item()`` / ``float(t)`` -> (rule, t); else None."""
    if not isinstance(node, cst.Call):
        return None
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "item" and not node.args:
        return "GM301", node.func.value
    if full_name(node.func) == "float" and len(node.args) == 1 and tensorish(node.args[0].value, tnames):
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
        if not uses or bad:
            why = ("it is never read" if not uses else
                   f"`{var}` reaches Python code at line {an.span(bad[0])[0]} (not only tensor arithmetic)")
            result.refusals.append(Refusal(rule, start, why,
                                           advice="keep the value a tensor, or set torch._dynamo.config.capture_scalar_outputs"))
            continue
        site = Site(rule, start, end, f"`{var}` stays a tensor (no {'.item()' if rule == 'GM301' else 'float()'})",
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


def _unwrap(call: cst.Call) -> cst.BaseExpression:
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "item":
        return call.func.value
    return call.args[0].value


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

NEGATIVE = [
    ("import torch\ndef f(x: torch.Tensor):\n    n = x.sum().item()\n    return x[: int(n)]\n", "Python code"),
    ("import torch\ndef f(x: torch.Tensor):\n    print(x.sum().item())\n    return x\n", None),
]
