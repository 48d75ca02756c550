"""GM604: a NumPy call on Python numbers whose result decides a branch.

``np.lcm(a, b)`` on two ints is an ``np.int64``; under Dynamo every NumPy call becomes an
ndarray traced through ``torch._numpy``, so ``if n % np.lcm(a, b) != 0`` is a branch on a
tensor: a graph break (Reformer's chunk-length check). ``math.lcm`` / ``math.gcd`` /
``math.sqrt`` compute the same value on Python numbers (lcm and gcd exactly; sqrt is
correctly rounded in both), and Dynamo folds them as constants:

    return np.lcm(config.lsh_chunk, config.local_chunk)  ->  return math.lcm(config.lsh_chunk, config.local_chunk)

Only calls on the lines torch's explanation names as the source of the branch's value
are rewritten (``Context.numpy_lines``), and only with plain positional arguments. On
arrays ``math.*`` raises TypeError, so a call that did get an array fails verification's
differential run and is rejected, never offered.
"""

from __future__ import annotations

import libcst as cst

from rewrites.fixes.base import Analysis, Context, Edit, Plan, Site, full_name

RULES = ("GM604",)

SCALAR_FUNCS = {"lcm": "math.lcm", "gcd": "math.gcd", "sqrt": "math.sqrt"}
NUMPY_NAMES = ("np", "numpy")


def _target(call: cst.Call):
    fn = full_name(call.func) or ""
    mod, _, name = fn.rpartition(".")
    if mod not in NUMPY_NAMES or name not in SCALAR_FUNCS:
        return None
    if not call.args or any(a.keyword is not None or a.star for a in call.args):
        return None
    if len(call.args) != (1 if name == "sqrt" else 2):
        return None
    return SCALAR_FUNCS[name]


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not ctx.numpy_lines or not ctx.wants("GM604"):
        return result
    calls: list[tuple[cst.Call, str]] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            target = _target(n)
            if target:
                calls.append((n, target))

    an.module.visit(V())
    for node, target in calls:
        start, end = an.span(node)
        if not (set(range(start, end + 1)) & ctx.numpy_lines) or not ctx.covers(start, end):
            continue
        site = Site("GM604", start, end, f"NumPy on Python numbers -> {target} (the same value; no ndarray "
                    "under Dynamo)", strategy="numpy_math")

        def build(updated: cst.Call, target=target):
            return updated.with_changes(func=cst.parse_expression(target))

        result.edits.append(Edit(node, build, site, needs_torch=False, imports=("math",)))
    return result


# (before, after, numpy_lines)
FIXED_WITH_LINES = [
    (
        "import numpy as np\n\n\ndef chunk(config):\n    if config.one:\n        return config.a\n"
        "    return np.lcm(config.a, config.b)\n",
        "import numpy as np\nimport math\n\n\ndef chunk(config):\n    if config.one:\n        return config.a\n"
        "    return math.lcm(config.a, config.b)\n",
        {7},
    ),
]

FIXED: list = []
NEGATIVE = [
    ("import numpy as np\ndef f(a, b):\n    return np.lcm(a, b)\n", None),  # no break traced here
]
