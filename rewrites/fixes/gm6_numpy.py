"""GM604: a NumPy call on Python numbers whose result decides a branch or a size, and
``np.interp``, which Dynamo cannot trace.

``np.lcm(a, b)`` on two ints is an ``np.int64``; under Dynamo every NumPy call becomes an
ndarray traced through ``torch._numpy``, so ``if n % np.lcm(a, b) != 0`` is a branch on a
tensor: a graph break (Reformer's chunk-length check). ``math.lcm`` / ``math.gcd`` /
``math.sqrt`` compute the same value on Python numbers (lcm and gcd exactly; sqrt is
correctly rounded in both), and Dynamo folds them as constants:

    return np.lcm(config.lsh_chunk, config.local_chunk)  ->  return math.lcm(config.lsh_chunk, config.local_chunk)

A NumPy reduction of a Python list is the same kind of value: ``np.sum(plan[:k])`` is an
ndarray under Dynamo, and used as a size (BigBird's random-attention plan,
``np.zeros((n, np.sum(plan[:k])))``) it has to be read back to the host, a graph break
("Data dependent operator"). The builtin ``sum`` / ``math.prod`` / ``max`` / ``min`` give
the same number on a list of ints and Dynamo folds them:

    np.zeros((n, np.sum(plan[: i + 1])), dtype=np.int32)  ->  np.zeros((n, sum(plan[: i + 1])), dtype=np.int32)

``np.interp`` has no trace rule at all (``attempted to trace numpy function unsupported by
PyTorch``: the diffusers schedulers' ``set_timesteps``). It becomes a call to a helper defined
once in the file (rewrites/fixes/runtime/interp.py): eager code calls ``np.interp`` itself, so
every result, warning and error is NumPy's; compiled code runs NumPy's interpolation loop in
NumPy operations Dynamo traces (searchsorted for the interval, float64 arithmetic, the same
rules at the points, the ends and NaN), one graph where there were two:

    sigmas = np.interp(timesteps, np.arange(0, len(sigmas)), sigmas)  ->  sigmas = _mend_interp(timesteps, np.arange(0, len(sigmas)), sigmas)

Only the three-argument call (no ``left``, ``right``, ``period``) is rewritten. Under
torch.compile a scalar ``x`` gives a 0-d array where NumPy gives a float64 scalar (Dynamo's
own rule for every NumPy result); complex ``fp`` and fewer than two points still call
``np.interp`` (a break, as before). ``xp`` must increase, as ``np.interp`` asks: on a descending
``xp`` NumPy's values are its binary search's and the helper's differ, which verification's
compiled-program check rejects.

Only calls on the lines torch names are rewritten (``Context.numpy_lines``: the source of a
branch's value in torch 2.13's explanation, or the line of a break that is itself a NumPy
call), and only with plain positional arguments. On arrays ``math.*`` raises TypeError and
the builtins reduce the first axis only, so a call that did get an array fails
verification's re-trace or differential run and is rejected, never offered. On a list of
floats ``sum`` adds left to right where ``np.sum`` adds pairwise: the last bits may
differ, within verification's tolerance.
"""

from __future__ import annotations

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Plan, Site
from rewrites.fixes.judgements import full_name
from rewrites.fixes.runtime import helper

RULES = ("GM604",)
ORDER = 90

SCALAR_FUNCS = {"lcm": "math.lcm", "gcd": "math.gcd", "sqrt": "math.sqrt"}
# one-argument reductions of a sequence of Python numbers
REDUCTIONS = {"sum": "sum", "prod": "math.prod", "max": "max", "amax": "max", "min": "min", "amin": "min"}
NUMPY_NAMES = ("np", "numpy")
INTERP = helper("interp")


def _target(call: cst.Call):
    fn = full_name(call.func) or ""
    mod, _, name = fn.rpartition(".")
    if mod not in NUMPY_NAMES or not call.args or any(a.keyword is not None or a.star for a in call.args):
        return None
    if name == "interp":
        return INTERP.name if len(call.args) == 3 else None
    if name in REDUCTIONS:
        return REDUCTIONS[name] if len(call.args) == 1 else None
    if name not in SCALAR_FUNCS or len(call.args) != (1 if name == "sqrt" else 2):
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

    an.visit_covering(V(), ctx)
    for node, target in calls:
        start, end = an.span(node)
        if not (set(range(start, end + 1)) & ctx.numpy_lines) or not ctx.covers(start, end):
            continue
        interp = target == INTERP.name
        if interp:
            site = Site("GM604", start, end, f"np.interp -> {target} (np.interp in eager code; under "
                        "torch.compile its arithmetic in NumPy operations Dynamo traces)", strategy="numpy_interp")
        else:
            site = Site("GM604", start, end, f"NumPy on Python numbers -> {target} (the same value; no ndarray "
                        "under Dynamo)", strategy="numpy_math")

        def build(updated: cst.Call, target=target):
            return updated.with_changes(func=cst.parse_expression(target))

        imports = ("math",) if target.startswith("math.") else ()
        result.edits.append(Edit(node, build, site, needs_torch=interp, imports=imports,
                                 helpers=(INTERP,) if interp else ()))
    return result


# at a line Dynamo's explanation names as the NumPy source of a branch's value
CASES = [
    Case(
        "import numpy as np\n\n\ndef chunk(config):\n    if config.one:\n        return config.a\n"
        "    return np.lcm(config.a, config.b)\n",
        "import numpy as np\nimport math\n\n\ndef chunk(config):\n    if config.one:\n        return config.a\n"
        "    return math.lcm(config.a, config.b)\n",
        lines={7}, hints=("numpy",),
    ),
    Case(
        "import numpy as np\n\n\ndef chunk(config):\n    blocks = np.zeros((2, np.sum(config.plan[: config.a])), "
        "dtype=np.int32)\n    return blocks.shape[1] + np.prod(config.plan) + np.max(config.plan)\n",
        "import numpy as np\n\n\ndef chunk(config):\n    blocks = np.zeros((2, sum(config.plan[: config.a])), "
        "dtype=np.int32)\n    return blocks.shape[1] + np.prod(config.plan) + np.max(config.plan)\n",
        lines={5}, hints=("numpy",),
    ),
]

# np.interp at the break's own line: the helper, defined once however many calls
_SET_TIMESTEPS = (
    "import numpy as np\nimport torch\n\n\ndef set_timesteps(self, timesteps):\n"
    "    sigmas = np.array(((1 - self.alphas_cumprod) / self.alphas_cumprod) ** 0.5)\n"
    "    sigmas = np.interp(timesteps, np.arange(0, len(sigmas)), sigmas)\n"
    "    return torch.from_numpy(np.interp(timesteps, np.arange(len(sigmas)), sigmas))\n"
)
CASES.append(Case(
    _SET_TIMESTEPS,
    _SET_TIMESTEPS.replace("np.interp(", "_mend_interp(").replace(
        "import torch\n\n\n", "import torch\n\n\n" + INTERP.source + "\n\n"),
    lines={7, 8}, hints=("numpy",),
))

# left alone
CASES += [
    Case("import numpy as np\n\n\ndef f(x, xp, fp):\n    return np.interp(x, xp, fp, period=360)\n", lines={5},
         hints=("numpy",)),  # period: numpy.interp's own, not the helper's
    Case("import numpy as np\ndef f(a, b):\n    return np.lcm(a, b)\n"),  # no break traced here
]
