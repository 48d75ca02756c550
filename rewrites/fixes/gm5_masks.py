"""GM5xx: data-dependent shapes.

Mask-then-reduce (GM502) becomes masked arithmetic of a fixed shape:

* ``x[m].sum()``  -> ``torch.where(m, x, 0).sum()``
* ``x[m].mean()`` -> ``(torch.where(m, x, 0).sum() / m.sum())``  (empty mask: nan, as before)
* ``x[m].max()``  -> ``torch.where(m, x, float("-inf")).max()`` -- ``min`` with ``+inf``.
  Caveat: on an EMPTY mask (an all-padding batch) the original raises and the rewrite
  returns -inf/+inf, which flows on as a number (``-inf - -inf`` is nan); so this form is
  UNSAFE (``--unsafe-fixes``; its ``Site.caveat`` says so): no example input has to hold an
  empty mask, and verification cannot show what it never ran. An integer ``x`` becomes
  float (verification then rejects it).

Valid when ``m`` has the shape of ``x`` (verification checks outputs on real inputs). Other
GM5xx ops (``nonzero``, ``unique``, ``repeat_interleave``, ``masked_select``) get advice:
``torch._dynamo.config.capture_dynamic_output_shape_ops = True`` keeps them in the graph
with unbacked symbolic sizes -- at the cost of guards that may fail later ("could not
guard on data-dependent expression") and of recompiles; prefer a fixed-shape formulation.
"""

from __future__ import annotations

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Plan, Site, offer_unsafe
from rewrites.fixes.facts import FunctionFacts
from rewrites.fixes.judgements import call, full_name, paren
from rewrites.tensors import BOOL_RESULTS

RULES = ("GM502",)
ORDER = 50

_REDUCE = {"sum": "0", "mean": "0", "max": 'float("-inf")', "min": 'float("inf")', "amax": 'float("-inf")',
           "amin": 'float("inf")'}


# what the masked max/min changes that no check may see (no input need hold an empty mask)
EMPTY_CAVEAT = ("on an empty mask (an all-padding batch) the original `x[mask].{op}()` raises and the rewrite "
                "returns {fill}")


def maskish(m: cst.BaseExpression, bindings) -> bool:
    if isinstance(m, cst.Comparison):
        return True
    if isinstance(m, cst.UnaryOperation) and isinstance(m.operator, cst.BitInvert):
        return maskish(m.expression, bindings)
    if isinstance(m, cst.Call):
        fn = full_name(m.func) or ""
        return fn.split(".")[-1] in BOOL_RESULTS
    if isinstance(m, cst.Name):
        vals = [v for n, _, v in bindings if n == m.value]
        return len(vals) == 1 and vals[0] is not None and maskish(vals[0], bindings)
    return False


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not ctx.wants("GM502"):
        return result
    found: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            f = n.func
            if (isinstance(f, cst.Attribute) and f.attr.value in _REDUCE and not n.args
                    and isinstance(f.value, cst.Subscript) and len(f.value.slice) == 1
                    and isinstance(f.value.slice[0].slice, cst.Index)):
                found.append(n)

    an.visit_covering(V(), ctx)
    for node in found:
        start, end = an.span(node)
        fn = an.enclosing_function(node)
        if fn is None or not ctx.covers(start, end):
            continue
        facts = FunctionFacts(an, fn)
        mask = node.func.value.slice[0].slice.value
        # a bare name is a mask when Dynamo broke on a data-dependent shape at this line
        # (an integer index has a fixed shape); verification compares the outputs anyway
        dyn = bool(set(range(start, end + 1)) & ctx.shape_lines) and isinstance(mask, (cst.Name, cst.Attribute))
        if not (maskish(mask, facts.bindings) or dyn):
            continue
        op = node.func.attr.value
        caveat = "" if op in ("sum", "mean") else EMPTY_CAVEAT.format(op=op, fill=_REDUCE[op])
        if caveat and not offer_unsafe(ctx, result, "GM502", start, caveat, f"a masked {op}"):
            continue
        site = Site("GM502", start, end, f"x[mask].{op}() -> masked {op}" + (" (unsafe: empty mask)" if caveat else ""),
                    strategy="mask", caveat=caveat)

        # ``sum / count`` needs parentheses only where an operator binds it
        bare = isinstance(an.parent(node), _DELIMITED)

        def build(updated: cst.Call, op=op, bare=bare):
            sub: cst.Subscript = updated.func.value
            x, m = sub.value, sub.slice[0].slice.value
            filled = call("torch.where", m, x, cst.parse_expression(_REDUCE[op]))
            if op == "mean":
                total = cst.Call(func=cst.Attribute(value=filled, attr=cst.Name("sum")), args=[])
                count = cst.Call(func=cst.Attribute(value=paren(m), attr=cst.Name("sum")), args=[])
                parens = {} if bare else {"lpar": [cst.LeftParen()], "rpar": [cst.RightParen()]}
                return cst.BinaryOperation(left=total, operator=cst.Divide(), right=count, **parens)
            return cst.Call(func=cst.Attribute(value=filled, attr=cst.Name(op)), args=[])

        result.edits.append(Edit(node, build, site))
    return result


# where an expression stands alone: the right side of ``=``, ``return``, an argument, an element
_DELIMITED = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return, cst.Expr, cst.Arg, cst.Element)


CASES = [
    Case(
        "import torch\ndef f(x):\n    return x[x > 0].sum()\n",
        "import torch\ndef f(x):\n    return torch.where(x > 0, x, 0).sum()\n",
    ),
    Case(
        "import torch\ndef f(x, y):\n    keep = y != 0\n    return x[keep].mean() + x[keep].sum()\n",
        "import torch\ndef f(x, y):\n    keep = y != 0\n"
        "    return (torch.where(keep, x, 0).sum() / keep.sum()) + torch.where(keep, x, 0).sum()\n",
    ),
    Case(  # unsafe: an empty mask raises in the original, gives -inf here
        "import torch\ndef f(x, y):\n    keep = y != 0\n    return x[keep].max() - x[keep].min()\n",
        "import torch\ndef f(x, y):\n    keep = y != 0\n    return (\n"
        '        torch.where(keep, x, float("-inf")).max()\n'
        '        - torch.where(keep, x, float("inf")).min()\n    )\n', unsafe=True,
    ),
    Case(  # any call the detectors know gives a boolean tensor is a mask (torch.isin)
        "import torch\ndef f(x, ids):\n    return x[torch.isin(ids, x)].sum()\n",
        "import torch\ndef f(x, ids):\n    return torch.where(torch.isin(ids, x), x, 0).sum()\n",
    ),
]

CASES += [
    # a bare-name mask, known as one because Dynamo broke there on a data-dependent shape
    Case(
        "import torch\ndef f(x, m):\n    return x[m].sum()\n",
        "import torch\ndef f(x, m):\n    return torch.where(m, x, 0).sum()\n",
        lines={3}, hints=("shape",),
    ),
]

# left alone
CASES += [
    Case("import torch\ndef f(x):\n    return x[x > 0].min()\n", reason="all-padding batch"),
    Case("import torch\ndef f(x, i):\n    return x[i].sum()\n"),
    Case("import torch\ndef f(x):\n    return x[0].sum()\n"),
]
