"""GM1xx: Python control flow that depends on tensor values.

Dynamo traces one path through the program; a Python ``if``/``while``/ternary/``and``
whose condition is a tensor's *value* (not its shape) needs ``bool(tensor)``, which Dynamo
cannot know at trace time: the graph ends there and resumes after the branch.
"""

from __future__ import annotations

import ast

from rewrites.rules._util import is_raise_only, snippet
from rewrites.rules.base import Rule
from rewrites.tensors import LIMITS, TENSORISH

_WHERE_FIX = ("Express both outcomes as tensors and select with `torch.where(cond, a, b)` when both "
              "arms are cheap, pure, total and shape-compatible (several assigned names, elif chains and early "
              "returns included); otherwise `torch.cond(pred, true_fn, false_fn, operands)` for branches "
              "that call modules or span statements but are pure. `torch.where` evaluates BOTH arms, forward "
              "and backward: an arm holding an operation that is not total on the inputs where eager code "
              "skips it (`torch.sqrt(h)`, `s / m.sum()`, `p.log()`, `acos`, `exp`, which overflows, or an "
              "index: `F.embedding`, `gather`, `index_select`, `x[ids]`) gets the double-where form: the "
              "dangerous operand `v` becomes `torch.where(C, v, SAFE)`, C the condition under which eager code "
              "runs that arm (`torch.logical_not(c)` for the else arm, `not c0 and c1` for an elif), SAFE 1 "
              "for sqrt/rsqrt/log/reciprocal/a tensor divisor/the base of a non-integer power, 0 for "
              "log1p/acos/asin/atanh/exp and indices. Example: `if (h > 0).all(): y = torch.sqrt(h) else: "
              "y = h * 0.5` becomes `y = torch.where((h > 0).all(), torch.sqrt(torch.where((h > 0).all(), h, "
              "1)), h * 0.5)`. What changes for the user: nothing in forward values; the gradients are "
              "those of eager code (NaN only where eager code has NaN), where plain `torch.where` would give "
              "NaN (`0 * inf`) or raise (an out-of-range id in the arm eager code skips). "
              "With torch.cond only the taken arm runs, but it is an UNSAFE fix (`mend fix --unsafe-fixes`; "
              "without the flag the finding says it exists): a second derivative through `torch.cond` fails "
              "(`create_graph=True`: \"element 0 of tensors does not require grad\"; a gradient penalty, a "
              "physics-informed loss), and a forward hook that records anything on a module an arm runs (a "
              "calibration hook, which users register at any time) makes it raise "
              "`UncapturedHigherOrderOpError`, eager or compiled (torch 2.13; tests/adversarial/cond_*.py). "
              "Neither can be ruled out from the source: an arm becomes `torch.cond` because it calls code "
              "beyond torch, which may run a module. A chained comparison on a tensor, `lo <= t <= hi` "
              "(Python's `lo <= t and t <= hi`, whose `and` asks for the tensor's truth value), becomes "
              "`torch.logical_and(lo <= t, t <= hi)` in a condition and `(lo <= t) & (t <= hi)` as a value "
              "(every operand a number or a full reduction: 0-dim, where `&` gives what `and` returned); its "
              "middle operands must be pure, they are evaluated twice. Where Dynamo reported the "
              "data-dependent branch at the line, the condition counts as a tensor even when the source "
              "cannot show it (its value came through a parameter or a call); in `<python> and <tensor>` the "
              "operands reading only `self` and parameters typed or defaulted as Python numbers, strings or "
              "bools are then the Python part. An `if` on a tensor whose `elif` tests are Python values "
              "(`if x.sum() > 0: y = A elif self.momentum == -1: y = B else: y = C`, I-BERT's calibration) becomes "
              "`y = torch.where(x.sum() > 0, A, (B if self.momentum == -1 else C))`: the elif chain a Python "
              "ternary, which keeps the original's choice and which Dynamo resolves while tracing, as it "
              "did the elif (so the tensor condition is the one verification must see go both ways, as for "
              "`<python> and <tensor>`). An attribute every path re-binds (`self.x_min = ...` in each arm, "
              "I-BERT's buffers) is selected like a name, in one tuple assignment when a later value reads it; "
              "one that only some paths re-bind is refused (a torch.where would give the others a new object)."
              " Arms with Python structure inside (transformers "
              "4.52's LongRoPE update: a lazy `if not hasattr(self, \"a\"): self.a = ...` cache, a device move "
              "`self.b = self.b.to(device)`, then `self.register_buffer(\"inv_freq\", <table>, ...)` in both "
              "arms): the cache and the move are hoisted in front (they give the attribute the value eager "
              "code gives it, the cache on the first call instead of the first call of its arm) and the "
              "buffer is re-registered with `torch.where(cond, <long table>, <short table>)`, not written in "
              "place: in 4.52 the buffer is the short table itself, which `copy_` would overwrite. A guard "
              "`if m.any():` (no `else`) around writes through the boolean mask `m` alone (`x[m] = v`, "
              "`x[m] += v`, `x.masked_fill_(m, v)`, `v` a number, name or attribute; HuBERT's pre-training "
              "loss) is dropped: a write through a mask with no element set writes nothing, and the write "
              "stays in the graph.")
_WHERE_PRE = ("Both arms free of side effects and in-place mutation (`x.add_()`, `inplace=True`, `out=`), no "
              "`raise`, every name assigned on both paths, and the two results broadcastable to one shape and "
              "dtype. Refused, with the reason: an arm that draws random numbers (`F.dropout`, `torch.rand*`, "
              "`randn_like`, `bernoulli`, `multinomial`, `normal_`) or calls a stateful module (`self.norm` "
              "assigned `nn.BatchNorm1d`, `nn.Dropout`, an attribute named like `self.dropout`): `torch.where` "
              "would run it on both paths and `torch.cond` re-runs its branch in backward (another draw) and "
              "refuses buffer mutation, so neither keeps the RNG stream or the running statistics; an "
              "operation whose totality mend does not know (`torch.tan`), or `std` (no operand value makes "
              "its derivative finite at zero spread), naming it. `self.norm(h)` is a module call, never the "
              "tensor method `norm`; a pure method of the class is evaluated by `torch.where` only when its "
              "body is total, otherwise the arm becomes `torch.cond`. Hoisting the Python part of "
              "the arms needs an `if`/`else` whose arms end in the same `register_buffer` call with a pure "
              "value, hold nothing but lazy caches and device moves before it, and touch disjoint "
              "attributes (none the condition, the buffer or the other arm's value reads). An arm that is loop "
              "control (`continue` / `break`) is refused: neither form can skip the rest of a loop. LayerDrop "
              "(`if torch.rand([]) < self.layerdrop: continue`, or a `to_drop = True` flag, as in M2M-100) "
              "is refused with its own reason: as a `torch.cond` per layer its forward matches eager code, "
              "but the backward re-runs the layer and draws its dropout again, so gradients and the RNG "
              "state after the step differ (`benchmarks/layerdrop_cond.py`). A branch on an int read from "
              "data (Dynamo jumps on a `SymNodeVariable`: an `.item()` another fix keeps in the graph as an "
              "unbacked int) is a Python number in eager, which `torch.where` cannot take: its line is no "
              "sign that the condition is a tensor, and only a condition mend itself sees as one is rewritten.")
_NOT_BREAKS = ("Not reported: conditions on shape and metadata (`x.shape[0] > 1`, `x.dim() == 3`, "
               "`x.dtype == torch.float16`, `len(layers) > 2`), identity tests (`mask is None`), "
               "attributes (`self.training`, `self.config.flag`), `isinstance`, and "
               "`torch.jit.is_scripting()` / `torch.compiler.is_compiling()`. ")

GM101 = Rule(
    code="GM101", name="tensor-condition-if", category="control-flow",
    summary="`if`/`elif` whose condition is a tensor value.",
    why=("Dynamo needs a Python bool to pick a branch; the value of a tensor is unknown while tracing "
         "(`Data-dependent branching`), so the graph breaks at the `if` and resumes in each branch."),
    fix=_WHERE_FIX, preconditions=_WHERE_PRE, limits=_NOT_BREAKS + LIMITS, gb_ids=("GB0170", "GB0035"),
    advice=("x = torch.where(cond, a, b)   # both sides pure;  or torch.cond(cond, lambda: f(x), lambda: "
            "g(x)); move side effects out of the branch"),
    message="`if {test}` branches on a tensor value", hint="torch.where(cond, a, b) or torch.cond",
    valid=(
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x, mask=None):\n"
        "        if x.shape[0] > 1 and x.dim() == 3:\n            x = x * 2\n"
        "        if mask is None or self.training or self.config.flag:\n            x = x + 1\n"
        "        if isinstance(x, torch.Tensor) and len(self.layers) > 2:\n            x = x - 1\n"
        "        if x.dtype == torch.float16 or x.device.type == 'cuda':\n            x = x.float()\n"
        "        if torch.jit.is_scripting() or torch.compiler.is_compiling():\n            pass\n"
        "        return x\n",
        "def f(n: int, items):\n    if n > 2 and items:\n        return 1\n    return 0\n",
    ),
    invalid=(
        "import torch\n\ndef f(x: torch.Tensor):\n    if (x > 0).any():\n        return x\n    return -x\n",
        "import torch\n\n@torch.compile\ndef f(h):\n    if h.abs().max() > 1e4:\n        h = h / 2\n    return h\n",
        "def f(t):\n    if t.item() > 0:\n        return 1\n    return 0\n",
        "import torch\n\ndef f(x: torch.Tensor):\n    if torch.isinf(x).any():\n        x = torch.nan_to_num(x)\n    return x\n",
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x):\n"
        "        s = x.sum()\n        if x.shape[0] > 1:\n            pass\n        elif s > 0:\n            x = x * 2\n        return x\n",
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.proj = nn.Linear(4, 4)\n\n    def forward(self, inp):\n        y = self.proj(inp)\n"
        "        if y.mean() > 0:\n            return y\n        return inp\n",
    ),
)

GM102 = Rule(
    code="GM102", name="tensor-condition-ternary", category="control-flow",
    summary="Conditional expression `a if cond else b` on a tensor value.",
    why="A ternary evaluates `bool(cond)` exactly like an `if`: a tensor condition breaks the graph.",
    fix=("`torch.where(cond, a, b)` (both sides evaluated, then selected element-wise), with the double-where "
         "form for a side that is not total (see GM101): `torch.sqrt(h) if c else h` becomes "
         "`torch.where(c, torch.sqrt(torch.where(c, h, 1)), h)`; `torch.cond` when a side calls a module, "
         "an UNSAFE fix (`--unsafe-fixes`; no second derivative, no recording hook on a module in an arm: "
         "see GM101)."),
    preconditions=("Both sides cheap and free of side effects, randomness and stateful modules; results "
                   "broadcastable to one shape. Refused as for GM101."),
    limits=_NOT_BREAKS + LIMITS, gb_ids=("GB0170",),
    advice="torch.where(cond, a, b) instead of `a if cond else b`",
    message="ternary on a tensor value `{test}`", hint="torch.where(cond, a, b)",
    valid=("import torch\n\ndef f(x: torch.Tensor):\n    return x if x.shape[0] > 1 else x * 2\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    return x if x.sum() > 0 else -x\n",),
)

GM103 = Rule(
    code="GM103", name="tensor-bool-operator", category="control-flow",
    summary="`and` / `or` / `not` applied to tensors outside a condition.",
    why=("`a and b` and `not a` call `bool()` on their tensor operands to decide what to return, the "
         "same data-dependent branch as an `if`. The last operand of `and` / `or` is returned as it is: "
         "a tensor there (`p or torch.where(...)`) is not a branch."),
    fix="Use element-wise logic: `torch.logical_and(a, b)`, `a & b`, `~a` / `torch.logical_not(a)`.",
    preconditions="Operands are boolean (or 0/1) tensors of broadcastable shapes.",
    limits=("Inside an `if`/`while`/`assert`/ternary condition the statement's own rule reports it. " + LIMITS),
    gb_ids=("GB0170",),
    advice="torch.logical_and(c1, c2) / torch.logical_or / torch.logical_not instead of and/or/not on tensors",
    messages={"boolop": "`{op}` on a tensor `{operand}` calls bool() on it",
              "not": "`not` on a tensor `{operand}` calls bool() on it"},
    hints={"boolop": "torch.logical_and / torch.logical_or (or & and |)", "not": "torch.logical_not(x) or ~x"},
    valid=("import torch\n\ndef f(a: torch.Tensor, b: torch.Tensor):\n    return a & b, ~a\n",
           "def f(a, b):\n    return a and not b\n",
           "import torch\n\ndef f(x: torch.Tensor, p: float):\n    return x / (p or torch.where(x > 0, p, 1))\n"),
    invalid=("import torch\n\ndef f(a: torch.Tensor, b: torch.Tensor):\n    return a and b\n",
             "import torch\n\ndef f(a: torch.Tensor):\n    ok = not (a > 0).all()\n    return ok\n"),
)

GM104 = Rule(
    code="GM104", name="tensor-condition-while", category="control-flow",
    summary="`while` loop whose condition is a tensor value.",
    why=("Each iteration evaluates `bool(cond)`; with a tensor condition the trip count is data-dependent, "
         "Dynamo breaks at the loop (often skipping the whole frame: breaks inside loops are not resumable)."),
    fix=("A fixed trip count with a `torch.where`-masked update, or `torch._higher_order_ops.while_loop` "
         "when the body is pure."),
    preconditions="The body is pure tensor arithmetic and a bound on the iterations is known.",
    limits=LIMITS, gb_ids=("GB0170", "GB7000"),
    advice="a `while` on a tensor: bound the loop by a Python count, or torch._higher_order_ops.while_loop",
    message="`while {test}` loops on a tensor value", hint="fixed trip count with a torch.where-masked update",
    valid=("def f(n: int):\n    while n > 0:\n        n -= 1\n    return n\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor, tol: float):\n    err = (x - x.mean()).abs().max()\n"
             "    while err > tol:\n        x = x * 0.5\n        err = err * 0.5\n    return x\n",),
)

RULES = (GM101, GM102, GM103, GM104)
# a condition reads a value read back (GM3), is a guard's (GM4), or holds a mask-then-reduce (GM5):
# Dynamo may name the break at its line by any of them
OVERLAPS = ("GM3", "GM4", "GM5")
NAMES_BREAKS = 1


def _check_if(node: ast.If, ctx) -> None:
    if ctx.is_data_dependent(node.test) and not (is_raise_only(node.body) and not node.orelse):
        ctx.report("GM101", node.test, test=snippet(node.test))


def _check_while(node: ast.While, ctx) -> None:
    if ctx.is_data_dependent(node.test):
        ctx.report("GM104", node.test, test=snippet(node.test))


def _check_ifexp(node: ast.IfExp, ctx) -> None:
    if ctx.is_data_dependent(node.test):
        ctx.report("GM102", node.test, test=snippet(node.test))


def _check_boolop(node: ast.BoolOp, ctx) -> None:
    if ctx.in_test:
        return
    for v in node.values[:-1]:  # the last operand is returned, never bool()'d
        if ctx.kind(v) in TENSORISH:
            op = "and" if type(node.op) is ast.And else "or"
            ctx.report("GM103", node, variant="boolop", op=op, operand=snippet(v))
            return


def _check_not(node: ast.UnaryOp, ctx) -> None:
    if ctx.in_test or type(node.op) is not ast.Not:
        return
    if ctx.kind(node.operand) in TENSORISH:
        ctx.report("GM103", node, variant="not", operand=snippet(node.operand))


HOOKS = {ast.If: (_check_if,), ast.While: (_check_while,), ast.IfExp: (_check_ifexp,),
         ast.BoolOp: (_check_boolop,), ast.UnaryOp: (_check_not,)}
