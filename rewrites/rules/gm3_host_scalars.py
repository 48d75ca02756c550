"""GM3xx: reading tensor data back into Python (`.item()`, `.tolist()`, `int(t)`, `.numpy()`).

Under the default configuration (`capture_scalar_outputs=False`) Dynamo cannot represent a
Python number read from a tensor: the graph ends so the value can be computed eagerly.
"""

from __future__ import annotations

import ast

from rewrites.guards import NUMPY_HELPERS
from rewrites.rules._util import snippet
from rewrites.rules.base import Rule
from rewrites.tensors import LIMITS, SCALAR_CONVERSIONS, TENSORISH

_KEEP = ("Keep the value a tensor: use the 0-d tensor directly in the arithmetic or the GM1xx condition "
         "that consumes it, detached as `.item()` was: `scale = h.abs().max().item()` becomes "
         "`scale = h.abs().max().detach()`, `float(t)` becomes `t.detach().double()`, `int(t)` `t.long()`. "
         "What changes for the user: nothing in values, dtypes (a 0-d float64/int64 tensor promotes as the "
         "Python float/int did) or gradients (no gradient flows back through the scalar, before and after). "
         "A comparison of the scalar with a float constant that float16/bfloat16 cannot hold exactly is made "
         "in float64 (`h.max().double() > 0.3`), as Python compared two doubles; in the tensor's own dtype the "
         "constant would be rounded first (0.3 is 0.30078125 in bfloat16) and the branch would flip between. "
         "A ternary the scalar decides becomes `torch.where` with GM101's double-where form for a non-total "
         "arm (`30.0 / torch.where(peak > 30.0, peak, 1)`). Refused: a scalar that reaches Python code "
         "(`range`, a format string, a call, a return; sizes and slice bounds are kept an unbacked int "
         "instead, below), one that is rebound, and a ternary arm of unknown totality.")

# Measured on torch 2.13 (docs/internals.md, "Data-dependent values"): what a scalar that must stay a
# Python int (a size, a slice bound) is given, and why not a knob.
_SIZES = ("Where the scalar must stay a Python int because every use is a size or a slice bound "
          "(`n = lengths.max().item()` then `x[:, :n]`, `torch.arange(n)`, `torch.zeros(n, d)`, "
          "`x.new_zeros(n)`; also `n = int(t)`), mend keeps it in the graph as an unbacked int: the read "
          "becomes a `torch.library.custom_op` named after the site (`mend::<module>_<function>_<line>`, "
          "made once per process by `_mend_size_op`) whose fake returns a new unbacked SymInt, followed by "
          "`torch._check(n >= 0)` on its own line when a use is a size (which a negative value failed in "
          "eager already); a value that only bounds slices gets no check, since a slice clamps any int and "
          "the unbacked slice keeps that (`torch._check(n <= x.shape[d])` would make a value past the end "
          "raise). One graph, no global knob: on torch 2.13 `capture_scalar_outputs` cannot be scoped to "
          "the region (`torch._dynamo.patch_dynamo_config` lifts only Dynamo's own check, the frame's "
          "ShapeEnv was made with scalar outputs off, so the graph still breaks: `Data dependent "
          "operator`; `torch._dynamo.nonstrict_trace` breaks on its `.item()`), and "
          "`torch._dynamo.config.capture_scalar_outputs = True` for the whole program with "
          "`capture_dynamic_output_shape_ops` crashes Longformer's compile (`Expected bool, "
          "got FakeTensor`, at the `.any().item()` that picks its global-attention path). Refused, with "
          "the reason: a value that also reaches Python control flow (`if n > 0:`), arithmetic making a "
          "float, a print or format string, a Python `range` (the loop needs the count), any other use "
          "where an unbacked int would make Dynamo guard (`x.view(-1, n)`, `n + 1`, a return), and a "
          "torch without `torch.library.custom_op`.")

GM301 = Rule(
    code="GM301", name="item-call", category="host-scalar",
    summary="`Tensor.item()` in a compiled region.",
    why=("`.item()` returns a Python number computed from tensor data; with `capture_scalar_outputs=False` "
         "(the default) Dynamo breaks the graph to compute it (`Unsupported Tensor.item() call`)."),
    fix=_KEEP + " " + _SIZES,
    preconditions=("The scalar only feeds tensor arithmetic or a condition the GM1xx rewrite handles, or "
                   "only sizes and slice bounds (the unbacked int above). "
                   "Integer arithmetic done in torch on Python numbers and read back, "
                   "`torch.fmod(torch.tensor(a), torch.tensor(b)).item()` (CANINE 4.x; also `remainder`, "
                   "`floor_divide`, `add`, `sub`, `mul`, `maximum`, `minimum`), becomes "
                   "`_mend_int_item(\"fmod\", a, b)`: the same value computed on the host when both are ints "
                   "and it fits int64, the torch call otherwise (floats, bools, a zero divisor); only at a "
                   "line where Dynamo broke. Likewise `float(torch.tensor(s).log2().round())` (also `log10`, "
                   "`log`, `sqrt`; `floor`, `ceil`; `int(...)`, `.item()`) becomes "
                   "`float(_mend_host_round(\"log2\", \"round\", s))`: `math` on the host for an int `s` in "
                   "[1, 2**16], where float32 (torch) and float64 (math) round to the same integer on every "
                   "value (checked on each), the torch call otherwise. The scalar's other operand in "
                   "arithmetic may be a submodule's output: `self.mlp(h)`, `self.layers[i](h)`, `layer(h)` "
                   "in `for layer in self.layers` count as tensors (a module returning anything else fails "
                   "verification). A `torch._check_tensor_all(t)` statement where Dynamo broke (it reads "
                   "`.item()` of `t.all()`; transformers' `torch_compilable_check` calls it while compiling) is "
                   "split as GM4's checks are: `torch._assert_async(t.all(), ...)` under torch.compile, the "
                   "call as written in eager code."),
    limits="Any zero-argument `.item()` call is reported, whatever the receiver.",
    gb_ids=("GB0124",),
    gb_types=("Unsupported Tensor.item() call with capture_scalar_outputs=False",),
    message_patterns=(r"Tensor\.item|\.item\(\)|\bitem\b.*capture_scalar_outputs",),
    source_patterns=(r"\.item\(\)",),
    advice=("keep the value a tensor (drop .item()); a value that is only sizes and slice bounds: `mend fix` "
            "keeps it an unbacked int (a custom op and torch._check(n >= 0)); one that also reaches Python "
            "control flow or a print cannot be: capture_scalar_outputs cannot be scoped to a region on "
            "torch 2.13 (the frame's ShapeEnv decides)"),
    message="`{receiver}.item()` reads a tensor value into Python", hint="keep it a tensor",
    valid=("def f(d):\n    return d.items()\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    s = x.sum().item()\n    return x * s\n",),
)

GM302 = Rule(
    code="GM302", name="tolist-call", category="host-scalar",
    summary="`Tensor.tolist()` in a compiled region.",
    why="`.tolist()` materialises tensor data as Python lists: Dynamo breaks the graph to run it eagerly.",
    fix="Keep the data in tensors; index or iterate the tensor instead, or move the conversion out of the region.",
    preconditions=("A `.tolist()` inside a data-dependent region with a static output shape (per-expert "
                   "counts walked by a loop that writes into a `torch.zeros_like` accumulator) goes with the "
                   "region into one opaque custom op: GM501's SAFE fix, same algorithm and cost. A SAFE fix "
                   "too for split sizes, `y = x.tolist()` at a line where Dynamo broke whose list is only "
                   "split on (`X.split(y, dim=0)`, `torch.split(X, y)`), used as a size, or returned "
                   "(ScatterMoE-style routers, jetmoe and granitemoe): the read becomes a custom op whose fake "
                   "returns one unbacked int per element, so the split and the experts after it stay in the "
                   "graph (`_mend_size_op(..., many=True)`, gm3_unbacked). A returned list's uses are its "
                   "callers': verification's re-trace rejects the fix if one of them guards on a value. With "
                   "`--unsafe-fixes`, for inference and partially verified, where the `.tolist()` begins a "
                   "function's last lines, which end in one `return` of a tensor or a tuple of them (a "
                   "vision-language model's patch positions, built image by image from its grid): the lines become "
                   "one custom op whose fake runs them on fake tensors, the values they read into Python new "
                   "unbacked ints, so a size that depends on data leaves the op unbacked (`_mend_shape_op`, "
                   "gm5_shape_tail; GM504 says why it is unsafe)."),
    limits=("Any zero-argument `.tolist()` call is reported. The list fix refuses a list indexed, iterated, "
            "printed or compared, and a name bound again after it (or before it, inside a loop). On torch "
            "2.11 with CUDA, `mode=\"reduce-overhead\"` fails to compile the list (Inductor's CUDA-graph "
            "trees are handed it whole): `mend fix --bench --bench-modes reduce-overhead` reports it as "
            "`fails` and does not write the fix."),
    gb_ids=("GB0109",),
    gb_types=("Tensor.tolist() with non-integer tensor",),
    message_patterns=(r"tolist",),
    source_patterns=(r"\.tolist\(\)",),
    advice=("keep tensors (no .tolist()); loop over tensor ops instead of Python lists; split sizes read back "
            "are kept a list of unbacked ints by mend fix (a custom op, not capture_scalar_outputs, which "
            "cannot be scoped to one region on torch 2.13); a single size read back is GM301's `.item()`"),
    message="`{receiver}.tolist()` reads tensor data into Python", hint="keep the data in tensors",
    valid=("def f(x: list):\n    return list(x)\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    sizes = x.tolist()\n    return sizes\n",),
)

GM303 = Rule(
    code="GM303", name="python-scalar-conversion", category="host-scalar",
    summary=("`int(t)`, `float(t)`, `bool(t)` on a tensor value, a 0-d tensor picked from data used as an index, "
             "or a tensor passed as `narrow`'s start."),
    why=("Converting a tensor to a Python scalar reads its data, like `.item()`; the graph breaks. Indexing "
         "with a 0-d integer tensor (`i = order[0]; boxes[i]`, `boxes[scores.argmax()]`) converts it the same "
         "way (`__index__`: `Data dependent operator`, `aten._local_scalar_dense`)."),
    fix=_KEEP + (" `n = int(t)` whose every use is a size or a slice bound is kept an unbacked int, as "
                 "GM301's `.item()` is (a custom op, `torch._check(n >= 0)` where a use is a size). `x[i]` "
                 "with `i` a 0-d integer tensor becomes `_mend_index(x, i)`: eager code indexes as written, "
                 "compiled code with the one-element index `i.reshape(1)` (the same row and gradient), "
                 "which stays in the graph (diffusers' `self.alphas_cumprod[timestep]`)."),
    preconditions=("The scalar only feeds tensor arithmetic, or only sizes and slice bounds (of a computed "
                   "value: `int()` of a 0-d input tensor traces, Dynamo specialises on it), or it is a "
                   "rounded logarithm / square root of a Python int done in torch "
                   "(`float(torch.tensor(s).log2().round())`, see GM301: computed with `math` on the host). "
                   "The index fix: only at a line where Dynamo read a tensor back to index with (`Data dependent "
                   "operator`, `aten._local_scalar_dense`, at `x[i]`), on subscripts of one computed index "
                   "that the statement reads (never one it assigns to or deletes)."),
    limits=("Conversions of shapes (`int(x.shape[0])`) are not reported. An index is reported when it is a "
            "name bound in the function to a tensor's element at a constant position (`order[0]`) or to an "
            "`argmax()` / `argmin()` without a dim; a 0-d tensor passed in as an input traces (Dynamo reads "
            "it as a tensor index). A list, a `ModuleList` or a dict indexed by a tensor is indexed as written by "
            "`_mend_index` (the break stays, so verification rejects the fix). Compiled, the row is a copy where "
            "eager code gives a view: code writing into it in place is told apart by verification. " + LIMITS),
    gb_ids=("GB0124",),
    advice=("keep the tensor (no int()/float()/bool()); use t.to(dtype) for a cast; an int that is only sizes "
            "and slice bounds: mend fix keeps it an unbacked int (as GM301)"),
    messages={"narrow": "`narrow` takes the tensor `{start}` as its start: its value is read into Python",
              "conversion": "`{func}({arg})` reads a tensor value into Python",
              "index": "indexing with the 0-d tensor `{index}` reads its value into Python"},
    hints={"narrow": "keep the bound a tensor (index_select / a mask), or an int known from shapes",
           "conversion": "keep it a tensor",
           "index": "keep it a tensor index: index_select / gather with a 1-element index, or narrow"},
    valid=("import torch\n\ndef f(x: torch.Tensor):\n    return int(x.shape[0]) + int(x.size(1))\n",
           "import torch\n\ndef f(x: torch.Tensor, t: torch.Tensor, idx: torch.Tensor):\n"
           "    i = idx[0]\n    i = 2\n    return x[t], x[idx], x[i], x[x.argmax(-1)]\n"),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    n = int(x.sum())\n    return n\n",
             "import torch\n\ndef f(boxes: torch.Tensor, order: torch.Tensor):\n    i = order[0]\n    return boxes[i]\n",
             "import torch\n\ndef f(boxes: torch.Tensor, scores: torch.Tensor):\n    return boxes[scores.argmax()]\n",
             "import torch\n\ndef f(x: torch.Tensor, counts: torch.Tensor):\n    n = counts.max()\n"
             "    return x.narrow(-1, n, x.size(-1) - n)\n"),
)

GM304 = Rule(
    code="GM304", name="numpy-conversion", category="host-scalar",
    summary="`Tensor.numpy()` in a compiled region.",
    why=("`.numpy()` hands tensor memory to NumPy; unless `torch._dynamo.config.trace_numpy` covers the "
         "following NumPy code, Dynamo breaks the graph (`Tensor.numpy() with trace_numpy=False`)."),
    fix="Stay in torch (the torch equivalent of the NumPy function), or move the NumPy code out of the region.",
    preconditions="Advice only.",
    limits=("Any `.numpy()` call is reported, except one passed straight to a NumPy function: there "
            "the NumPy call is what breaks (GM604); or to a helper `mend fix` wrote that runs NumPy "
            "operations Dynamo traces (`_mend_interp`)."),
    gb_ids=("GB0105",),
    gb_types=("Tensor.numpy() with trace_numpy=False", "Tensor.numpy() without NumPy installed"),
    message_patterns=(r"Tensor\.numpy|\.numpy\(\)",),
    source_patterns=(r"\.numpy\(\)",),
    advice="use torch ops instead of .numpy()",
    message="`{receiver}.numpy()` leaves torch", hint="stay in torch or move out of the region",
    valid=("import numpy\n\ndef f(x):\n    return numpy.zeros(3)\n",
           "import numpy as np\nimport torch\n\ndef f(x: torch.Tensor, xp, fp):\n    return np.interp(x.numpy(), xp, fp)\n",
           "import torch\n\ndef f(x: torch.Tensor, xp, fp):\n    return _mend_interp(x.numpy(), xp, fp)\n"),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    return x.cpu().numpy()\n",),
)

RULES = (GM301, GM302, GM303, GM304)
# a value read back feeds a condition (GM1) or a guard (GM4) on the same line
OVERLAPS = ("GM1", "GM4")
NAMES_BREAKS = 2

# Set on a `t.numpy()` call passed straight to a NumPy function (the parent call is visited
# first): Dynamo traces `.numpy()` there (trace_numpy) and breaks on the NumPy function, GM604.
NUMPY_ARG = "_graphmend_numpy_arg"


def numpy_conversion(arg: ast.AST) -> bool:
    """``<expr>.numpy()`` (no arguments)."""
    return (type(arg) is ast.Call and type(arg.func) is ast.Attribute and arg.func.attr == "numpy"
            and not arg.args and not arg.keywords)


def mark_numpy_args(call: ast.Call) -> None:
    for a in list(call.args) + [k.value for k in call.keywords]:
        if numpy_conversion(a):
            setattr(a, NUMPY_ARG, True)


def _check_call(node: ast.Call, ctx) -> None:
    f = node.func
    tf = type(f)
    if tf is ast.Attribute:
        m = f.attr
        if m == "item":
            if not node.args and not node.keywords:
                ctx.report("GM301", node, receiver=snippet(f.value, 40))
        elif m == "tolist":
            if not node.args and not node.keywords:
                ctx.report("GM302", node, receiver=snippet(f.value, 40))
        elif m == "numpy":
            if not node.args and ctx.resolve(f) is None and not getattr(node, NUMPY_ARG, False):
                ctx.report("GM304", node, receiver=snippet(f.value, 40))
        elif m == "narrow" and len(node.args) == 3 and ctx.is_tensor(f.value) and ctx.is_tensor(node.args[1]):
            # t.narrow(dim, start, length) with a tensor start: Dynamo reads it back (`Data dependent
            # operator`), as at Longformer's narrow past its global tokens; a tensor length alone
            # traces there (torch 2.13, the same function's `narrow(-1, 0, n)` does not break)
            ctx.report("GM303", node, variant="narrow", start=snippet(node.args[1], 30))
        elif (ctx.resolve(f) or "").startswith("numpy."):
            mark_numpy_args(node)
    elif tf is ast.Name and f.id in NUMPY_HELPERS:
        mark_numpy_args(node)
    elif tf is ast.Name and f.id in SCALAR_CONVERSIONS and len(node.args) == 1 and f.id not in ctx.fa.imports:
        if ctx.kind(node.args[0]) in TENSORISH:
            ctx.report("GM303", node, variant="conversion", func=f.id, arg=snippet(node.args[0], 40))


def _check_subscript(node: ast.Subscript, ctx) -> None:
    idx = node.slice
    if type(idx) is ast.Call and ctx._scalar_tensor(idx):
        name = snippet(idx, 30)
    elif type(idx) is ast.Name and idx.id in ctx.scalar_tensors:
        name = idx.id
    else:
        return
    if ctx.is_tensor(node.value):
        ctx.report("GM303", node, variant="index", index=name)


HOOKS = {ast.Call: (_check_call,), ast.Subscript: (_check_subscript,)}
