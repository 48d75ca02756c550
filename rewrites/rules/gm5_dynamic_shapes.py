"""GM5xx: operators whose output shape depends on tensor data.

`nonzero`, boolean-mask indexing, `unique`, `repeat_interleave` with tensor counts and
`masked_select` produce a tensor whose size is only known after running: by default
(`capture_dynamic_output_shape_ops=False`) Dynamo breaks the graph at them.
"""

from __future__ import annotations

import ast
import re

from rewrites.rules._util import snippet
from rewrites.rules.base import Rule
from rewrites.tensors import BOOL, LIMITS, OTHER, TENSOR, TENSORISH

_KNOB = ("Otherwise `torch._dynamo.config.capture_dynamic_output_shape_ops = True` keeps the op in the graph "
         "as an unbacked size: later ops then cannot specialise on it (slower kernels, possible guard errors).")

GM501 = Rule(
    code="GM501", name="nonzero", category="dynamic-shape",
    summary="`nonzero`, `argwhere` or one-argument `torch.where(cond)`.",
    why="The number of true elements decides the output size (`Dynamic shape operator`): the graph breaks.",
    fix=("Keep a fixed shape: use the mask itself (`x * mask`, `torch.where(mask, x, 0)`) instead of the "
         "indices. " + _KNOB),
    preconditions=("SAFE fix (same algorithm, same cost): a data-dependent region whose output shape is "
                   "known from its inputs' shapes, the statements from `A = torch.zeros_like(X)` to the end of a "
                   "loop that writes into `A` (sparse expert dispatch: `nonzero`, `torch.where(mask)`, "
                   "`index_add_`, as Mixtral, Qwen2-MoE and OLMoE in transformers 5 with eager experts), becomes "
                   "one opaque in-graph call: a `torch.library.custom_op` named after the site "
                   "(`mend::<module>_<function>_<line>`, helper `_mend_<module>_<function>_<line>`), fake "
                   "implementation `torch.empty_like(X)`, the module handed over through its handle "
                   "(`self._mend_opaque`, made in `__init__`: a reference-typed opaque object where torch has them, "
                   "2.13; before that the module's id, which Dynamo guards, so a second model instance compiles "
                   "anew) with its parameters and buffers as tensors. Under torch.compile the op's forward runs the "
                   "region once with autograd recording it (its leaves: detached aliases of the tensors that need a "
                   "gradient) and a backward op differentiates that recorded graph, which is freed with the ticket "
                   "tensor the backward receives: the region never runs twice, so forward hooks on the experts (an "
                   "expert-load monitor), Python's `random`, a module's own `torch.Generator` and the global RNG see"
                   " one forward per step, as in the original. Called eagerly (not compiling) the op is not used: "
                   "the hoisted region runs on the module it was called on, so a double backward (a WGAN-GP gradient"
                   " penalty), `torch.func.grad` over the module and an `nn.DataParallel` replica's own parameters "
                   "behave as in the original; compiled, a replica's call (it shares the original's handle) is "
                   "traced as the original code is, its break included, and a second derivative raises as through "
                   "any graph torch.compile makes (AOT autograd has no double backward on 2.13). Measured on torch "
                   "2.13 (CPU, `tests/rewrites/test_fix_opaque.py`): the MoE with a forward hook per expert fires 4 hooks a "
                   "step eager and compiled (`aot_eager`, `inductor`), as the original, where the recomputing op "
                   "fired 8; its outputs and gradients equal the original's, and no recorded graph outlives its "
                   "backward. Left to verification: `torch.func` transforms over a compiled call (the custom op's "
                   "autograd has no functorch rule on 2.13: the re-trace fails and the fix is rejected, "
                   "tests/adversarial/opaque_func_grad.py). Both ops are tagged `torch.Tag.cudagraph_unsafe` (the "
                   "region syncs), so under `reduce-overhead` Inductor's graph partition runs them between captured "
                   "CUDA graphs (torch 2.11: the OpenAI privacy filter's mended graph is five partitions, three of "
                   "them replayed). Refused, with the reason, when anything else bound in the region is read after "
                   "it (a `nonzero` that escapes: its shape depends on data), when it sits in a nested function (a "
                   "closure), returns, assigns attributes or writes into its inputs, on a name collision, and on a "
                   "torch without `torch.library.custom_op` (2.4; tested on 2.13 and 2.15 with opaque objects, on "
                   "2.13 without, and on 2.11). Chosen over `torch._dynamo.nonstrict_trace` (AOT autograd traces "
                   "into it: a `nonzero` inside fails with `PendingUnbackedSymbolNotFound` on torch 2.13) and "
                   "`torch._dynamo.decorators.leaf_function` (the same mechanism, the real forward recorded by "
                   "autograd and replayed by the backward, but Inductor cannot lower it on 2.13: `InductorError: "
                   "AssertionError` in `GraphLowering.get_attr`; `python benchmarks/opaque_choice.py` measures the "
                   "three: only the custom op compiles with `fullgraph=True` under both `aot_eager` and `inductor` "
                   "with outputs and gradients equal to eager). Torch 2.13 has no public `nonstrict_trace` in "
                   "`torch.compiler`; `torch.compiler.allow_in_graph` is traced by AOT autograd as `nonstrict_trace`"
                   " is. "
                   "A SAFE fix as well for an index found with `nonzero` and read back as a Python int at the "
                   "function's end (`indices = (schedule == t).nonzero()` ... `return indices[pos].item()`: the "
                   "`index_for_timestep` of 18 diffusers schedulers): the lines from the `nonzero` to the `return` "
                   "move into a function of the `nonzero`'s argument, made GM301's unbacked-int custom op "
                   "(`_mend_size_op`, gm3_found_index), and the call site keeps `torch._check(index >= 0)`, a fact "
                   "of an index; refused where a returned value is not an element of the indices read back or the "
                   "moved lines read another local. "
                   "Besides, one UNSAFE fix (`mend fix --unsafe-fixes`, which then takes these loops): sparse expert dispatch, "
                   "`a, b = torch.where(mask)` in a loop whose gathered rows only reach an `index_add_` "
                   "(Mixtral and its copies), becomes masked dense dispatch: every index of the mask is "
                   "enumerated (`_mend_dense_where`) and the unselected ones add exactly zero (`_mend_masked`); "
                   "a loop over `x.nonzero()` runs over every index (`_mend_every_index`). Outputs are the "
                   "original's up to matmul rounding (verified), but every expert runs on every token: "
                   "`num_experts` times the expert FLOPs, for one graph without a host sync per expert. "
                   "Without the flag `mend fix` says the fix exists; other index uses get advice only."),
    limits=("Method calls `.nonzero()` / `.argwhere()` on any receiver; `torch.nonzero`, `torch.argwhere`. "
            "The unsafe fix refuses a loop that writes a gathered value anywhere but the scatter, reads one "
            "after the loop, or branches on one (except `if ...: continue`)."),
    gb_ids=("GB0036",),
    advice=("a fixed-shape formulation (torch.where(mask, x, 0), masked sums); or "
            "torch._dynamo.config.capture_dynamic_output_shape_ops = True (unbacked sizes: guards on them may "
            "fail, recompiles)"),
    messages={"nonzero": "`{func}` has a data-dependent output shape",
              "where": "one-argument `torch.where(cond)` is `nonzero`: data-dependent shape"},
    hints={"nonzero": "use the mask instead of indices", "where": "torch.where(cond, a, b)"},
    valid=("import torch\n\ndef f(c: torch.Tensor, a: torch.Tensor):\n    return torch.where(c, a, 0)\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    return torch.nonzero(x > 0)\n",
             "import torch\n\ndef f(x: torch.Tensor):\n    idx = torch.where(x > 0)\n    return idx\n",
             "import torch\n\ndef f(x: torch.Tensor):\n    return (x > 0).nonzero()\n"),
)

GM502 = Rule(
    code="GM502", name="boolean-mask-index", category="dynamic-shape",
    summary="Indexing a tensor with a boolean mask (`x[mask]`).",
    why="`x[mask]` has as many rows as `mask` has true values: a data-dependent size, the graph breaks.",
    fix=("Mask-then-reduce (`x[mask].sum()`, `.mean()`, `.max()`) becomes masked arithmetic "
         "(`(x * mask).sum()`, `torch.where(mask, x, -inf).max()`). A loop that routes rows through a mask "
         "into an accumulator made by `torch.zeros_like` (X-MOD's language adapters: `lang_mask = lang_ids == i`, "
         "`out[lang_mask] = adapter(h[lang_mask])`) becomes one opaque custom op, as GM501's expert dispatch "
         "(rewrites/fixes/gm5_opaque.py): the same algorithm and cost, no break. " + _KNOB),
    preconditions=("The masked result is only reduced, not returned or reshaped; for the opaque region, GM501's "
                   "preconditions (the gathered rows do not leave the loop). One UNSAFE fix "
                   "(`mend fix --unsafe-fixes`): masked dispatch in a loop, `x[m] = f(y[m])` with the gathered "
                   "rows reaching only that write (switch and nllb-moe in transformers 4, xmod's adapters), "
                   "becomes `_mend_masked_put(x, m, f(y))`: `f` runs on every position and is written where `m` "
                   "holds; every gather `a[..., m, ...]` becomes `a[..., :, ...]`, and a "
                   "`torch.nonzero(v, as_tuple=True)[0].tolist()` the loop walks becomes every position of `v`. "
                   "Same outputs when `f` maps each row on its own (verification compares them), for "
                   "`num_experts` times the expert FLOPs."),
    limits=("The index must be provably boolean (a comparison of tensors, `torch.isnan`..., `~m`, `.bool()`, a "
            "name assigned from those or annotated `BoolTensor`) or a name ending in `mask`/`masks` (or starting `masked_`) indexing a known "
            "tensor; assignment `x[mask] = v` is fine and not reported. "
            + LIMITS),
    gb_ids=("GB0036",),
    advice=("masked arithmetic: (x * mask).sum() / torch.where(mask, x, 0); or "
            "torch._dynamo.config.capture_dynamic_output_shape_ops = True (cost: unbacked sizes, possible "
            "guard failures)"),
    messages={"bool": "boolean-mask index `{index}` has a data-dependent shape",
              "named": ("index `{index}` by a tensor named like a mask: a data-dependent shape if it is boolean "
                        "(an integer index is not)")},
    hint="masked arithmetic for mask-then-reduce",
    valid=("import torch\n\ndef f(x: torch.Tensor, idx: torch.Tensor):\n    x[x < 0] = 0\n    return x[idx]\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    mask = x > 0\n    return x[mask].sum()\n",),
)

GM503 = Rule(
    code="GM503", name="unique", category="dynamic-shape",
    summary="`torch.unique` / `Tensor.unique` / `unique_consecutive`.",
    why="The number of distinct values decides the output size: the graph breaks.",
    fix="Compute it outside the compiled region, or bound it (`torch.bincount(x, minlength=K)`). " + _KNOB,
    preconditions=("Advice, except one UNSAFE fix (`mend fix --unsafe-fixes`): runs of one id dispatched to a "
                   "module each (X-MOD's language adapters in transformers 4: `ids, n = "
                   "torch.unique_consecutive(ids, return_counts=True)`, `torch.split(h, n.tolist(), 0)`, a "
                   "loop appending `self.M[list(self.M.keys())[int(i.item())]](chunk)`, `torch.cat(..., 0)`) "
                   "becomes every module on every row, `torch.where` picking each row's module "
                   "(`_mend_rows_by_id`). The modules' FLOPs grow by their number; rows must be mapped "
                   "independently (verification compares the outputs), and the names the pattern binds must "
                   "be read nowhere else."),
    limits="Calls named `unique`/`unique_consecutive` on tensors or through torch.",
    gb_ids=("GB0036",),
    advice=("torch._dynamo.config.capture_dynamic_output_shape_ops = True, or precompute the unique values "
            "outside the compiled region"),
    message="`{func}` has a data-dependent output shape", hint="compute outside or bound it",
    valid=("import numpy as np\n\ndef f(a):\n    return np.unique(a)\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    return torch.unique(x)\n",),
)

GM504 = Rule(
    code="GM504", name="repeat-interleave-tensor", category="dynamic-shape",
    summary="`repeat_interleave` with tensor repeat counts.",
    why="Tensor-valued counts make the output length data-dependent: the graph breaks.",
    fix="Pass `output_size=` (a Python int) when the total is known, or use integer repeats. " + _KNOB,
    preconditions=("UNSAFE fix (`mend fix --unsafe-fixes`), for inference, where the `repeat_interleave` begins a "
                   "function's last lines, which end in one `return` of a tensor or a tuple of them (transformers' "
                   "`get_vision_interpolation_indices_and_weights`: every patch's taps, repeated per image by its "
                   "patch count): the lines move, as written, into a module-level function of the values they read, "
                   "made the custom op `mend::<module>_<function>_<line>`. Not compiling, a call runs the lines "
                   "themselves. Compiled without grad, the op's fake runs the same lines on fake tensors whose "
                   "values, read into Python, are new unbacked ints, so the sizes that depend on data come out "
                   "unbacked and the others as the lines make them; where the lines cannot run so (a branch on a "
                   "value they read), Dynamo breaks there as before. Made only where Dynamo said the counts were "
                   "data (`Dynamic shape operator`), when the lines return nowhere else, assign no attribute, write "
                   "into no value they read and read no `self`. Why it is unsafe: with grad enabled or under "
                   "autocast the call runs the lines as written (the op has no derivative, and its unbacked sizes "
                   "meeting a tensor that needs a gradient make autograd's broadcasting checks guard on them: "
                   "torch.compile raises, as on Qwen3-VL's rotary embedding), and verification's compiled check "
                   "runs with grad, so no check compares the op's compiled values: partially verified. A caller "
                   "that guards on an unbacked size (a split by the sizes the op returns) makes verification's "
                   "re-trace reject the fix."),
    limits="Counts must be provably a tensor. " + LIMITS,
    gb_ids=("GB0036",),
    advice="pass the repeats as a Python int list known ahead, or capture_dynamic_output_shape_ops = True",
    message="`repeat_interleave` with tensor counts `{counts}`", hint="pass output_size= or integer repeats",
    valid=("import torch\n\ndef f(x: torch.Tensor):\n    return x.repeat_interleave(2, dim=0)\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor, counts: torch.Tensor):\n    return x.repeat_interleave(counts, dim=0)\n",),
)

GM505 = Rule(
    code="GM505", name="masked-select", category="dynamic-shape",
    summary="`torch.masked_select` / `Tensor.masked_select`.",
    why="Like `x[mask]`, the output has as many elements as the mask has true values.",
    fix="Masked arithmetic (`torch.where(mask, x, 0)`) when the result is only reduced. " + _KNOB,
    preconditions="The selected values are only reduced.",
    limits="Calls named `masked_select`.",
    gb_ids=("GB0036",),
    advice="torch.where(mask, x, 0) keeps the shape fixed",
    message="`masked_select` has a data-dependent output shape", hint="torch.where(mask, x, 0)",
    valid=("import torch\n\ndef f(x: torch.Tensor, m: torch.Tensor):\n    return x.masked_fill(m, 0)\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor, m: torch.Tensor):\n    return torch.masked_select(x, m)\n",),
)

RULES = (GM501, GM502, GM503, GM504, GM505)
# a mask-then-reduce often sits in a condition (GM1) or is read back (GM3)
OVERLAPS = ("GM1", "GM3")
NAMES_BREAKS = 3

_MASK_NAME = re.compile(r"(^|_)masks?$|^masked_", re.IGNORECASE)
_NAMES = frozenset({"nonzero", "argwhere", "where", "unique", "unique_consecutive", "repeat_interleave",
                    "masked_select"})


def _check_call(node: ast.Call, ctx) -> None:
    f = node.func
    tf = type(f)
    if tf is ast.Attribute:
        m = f.attr
    elif tf is ast.Name:
        m = f.id
    else:
        return
    if m not in _NAMES:
        return
    qn = ctx.resolve(f)
    via_torch = qn is not None and qn.startswith("torch.") and qn.count(".") == 1
    if qn is not None and not via_torch:
        return  # numpy.unique, another module's function
    method = qn is None and tf is ast.Attribute
    if qn is None and not method:
        return  # a local function named like a torch op
    if method and ctx.kind(f.value) == OTHER and type(f.value) is ast.Name and m in ("where", "unique"):
        return  # e.g. df.where / some_list_like.unique: no evidence of a tensor
    if m in ("nonzero", "argwhere"):
        ctx.report("GM501", node, variant="nonzero", func=m)
    elif m == "where":
        if via_torch and len(node.args) == 1 and not node.keywords:
            ctx.report("GM501", node, variant="where")
    elif m in ("unique", "unique_consecutive"):
        ctx.report("GM503", node, func=m)
    elif m == "masked_select":
        ctx.report("GM505", node)
    elif m == "repeat_interleave":
        if any(k.arg == "output_size" for k in node.keywords):
            return
        counts = None
        args = node.args if method else node.args[1:]
        if via_torch and len(node.args) == 1:
            counts = node.args[0]  # torch.repeat_interleave(counts)
        elif args:
            counts = args[0]
        else:
            counts = next((k.value for k in node.keywords if k.arg == "repeats"), None)
        if counts is not None and ctx.kind(counts) in TENSORISH:
            ctx.report("GM504", node, counts=snippet(counts, 30))


def _is_mask_index(e: ast.AST, ctx) -> bool:
    k = ctx.kind(e)
    if k == BOOL:
        return True
    # a tensor (or unknown) named like a mask: `x[attention_mask]`, `loss[masked_positions]`
    return type(e) is ast.Name and k in (TENSOR, OTHER) and _MASK_NAME.search(e.id) is not None


def _check_subscript(node: ast.Subscript, ctx) -> None:
    if type(node.ctx) is not ast.Load:
        return
    idx = node.slice
    ti = type(idx)
    if ti is ast.Constant or ti is ast.Slice:
        return
    elts = idx.elts if ti is ast.Tuple else (idx,)
    for e in elts:
        if _is_mask_index(e, ctx):
            base = ctx.kind(node.value)
            # indexing by a bool tensor is data-dependent for any tensor-like base; a name
            # heuristic needs the base to be known as a tensor
            if base in TENSORISH or (base == OTHER and ctx.kind(e) == BOOL):
                # "named": only its name says mask, and an integer (advanced) index keeps a fixed shape
                ctx.report("GM502", node, variant="bool" if ctx.kind(e) == BOOL else "named",
                           index=snippet(node, 50))
            return


HOOKS = {ast.Call: (_check_call,), ast.Subscript: (_check_subscript,)}
