"""GM501 / GM302 / GM502: a data-dependent region with a static output shape
becomes one opaque in-graph call (a ``torch.library.custom_op``), a SAFE fix: the sparse
algorithm and its cost stay, the graph no longer breaks.

Sparse expert dispatch, as Mixtral (transformers 4 and 5) and its many copies write it::

    final_hidden_states = torch.zeros_like(hidden_states)
    expert_mask = one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
    for expert_idx in range(self.num_experts):
        idx, top_x = torch.where(expert_mask[expert_idx])          # data-dependent sizes
        current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
        current = self.experts[expert_idx](current_state) * routing_weights[top_x, idx, None]
        final_hidden_states.index_add_(0, top_x, current.to(hidden_states.dtype))
    return final_hidden_states

Inside, every size depends on the routing; outside, only ``final_hidden_states`` leaves the
region, and its shape is ``hidden_states``'s. The rewrite hoists the statements from the
accumulator's ``torch.zeros_like`` to the end of the loop into a module-level function named
after the site (``_mend_<module>_<function>_<line>``), registers it once as the custom op
``mend::<module>_<function>_<line>`` and calls the op instead::

    final_hidden_states = _mend_moe_forward_136_op(
        self, [*self.parameters(), *self.buffers()], hidden_states, selected_experts,
        routing_weights, hidden_dim,
    )

* fake (meta) implementation: ``torch.empty_like(<the zeros_like argument>)``, of the
  accumulator's dtype when ``zeros_like`` names one (gpt-oss's experts accumulate in float32);
* the module: ``self`` reaches the op through its handle, made once in ``__init__``
  (``self._mend_opaque``: torch.compile refuses an opaque object created mid-forward). Where
  torch has reference-typed opaque objects (``torch._library.opaque_object``, 2.13) the handle
  is one and the op takes it; before that the op takes the module's ``id``, which Dynamo
  guards (ID_MATCH: a second model instance compiles anew), and finds the module, which is
  alive for the call, in a weak table the handles fill (a copy's handle is its own, so a
  deepcopy or an unpickled module finds itself). Its parameters and buffers are passed as tensors.
  Under torch.compile the op's forward runs the region once with autograd recording it
  (its leaves: detached aliases of the tensors that need a gradient, swapped in with
  ``torch.nn.utils.stateless._reparametrize_module``, what ``torch.func.functional_call``
  does) and keeps that graph by a ticket, returned as a one-element int64 tensor the backward
  receives; a forward that needs no gradient reads the module's tensors in place;
* backward: a second op, ``mend::<...>_backward``, differentiates the recorded graph
  (``torch.autograd.grad``), as ``torch._dynamo.decorators.leaf_function`` does. The region
  never runs twice: forward hooks on the experts (an expert-load monitor), Python's
  ``random``, a module's own ``torch.Generator`` and the global RNG see one forward, as in the
  original. The graph is freed with its ticket (after the backward, or when the caller drops
  an output it never differentiates);
* eager calls (not compiling): the op is not used at all, the hoisted region runs on the
  module it was called on, so everything autograd offers is the original's: double
  backward (a gradient penalty), ``torch.func`` transforms, an ``nn.DataParallel`` replica's
  own parameters (a replica shares the original's ``__dict__``, its handle too; compiled,
  a replica's call is traced as the original code is, its break included). Compiled, a second derivative
  through the op raises, as it does through any graph torch.compile makes ("torch.compile with
  aot_autograd does not currently support double backward", torch 2.13);
* autocast: the caller's autocast (the device types it is on for, and their dtypes, which
  torch.compile guards) is an argument of the op, re-entered around the region: a compiled
  graph runs the op without autocast's state, where the original's experts ran in bfloat16;
* CUDA graphs: both ops are tagged ``torch.Tag.cudagraph_unsafe`` (the region syncs to read its
  sizes back, which a captured graph does not replay), so under ``reduce-overhead``
  Inductor's graph partition runs them between captured partitions (torch 2.11, the OpenAI privacy filter: five partitions, the two op calls
  eager and three graphs replayed a call; docs/benchmarks.md, "The OpenAI privacy filter").

Chosen over ``torch._dynamo.nonstrict_trace`` (AOT autograd traces into it: with a ``nonzero``
inside, torch 2.13 fails with ``PendingUnbackedSymbolNotFound``) and
``torch._dynamo.decorators.leaf_function`` (its mechanism, the real forward recorded by
autograd and its graph run by the backward, is the one used here; but Inductor cannot lower
it on torch 2.13: ``InductorError: AssertionError`` from ``GraphLowering.get_attr``, which
takes only tensors). A custom op compiles under every backend.

Preconditions (otherwise a refusal with the reason): the region is statements of a function
body at a line where Dynamo broke; it holds a data-dependent op (``nonzero``, ``argwhere``,
one-argument ``where``, ``tolist``, or a read through a boolean mask, ``h[m]`` with ``m`` a
comparison or a name bound to one: X-MOD's language adapters, ``out[m] = adapter(h[m])``,
GM502; a write through a mask alone has a fixed shape); the loop writes its result into
one accumulator created by ``A = torch.zeros_like(X)`` (a ``dtype=torch.<type>`` and a
``device=X.device`` may follow; X an input of the region, not re-bound in
it); nothing else bound in the region is read after it (a ``nonzero`` result that escapes has a
data-dependent shape no fake implementation can give); it returns, yields, assigns attributes
or writes into its inputs nowhere; every input it reads is a tensor or a number of a known
kind; the names it defines are free in the file; torch has ``torch.library.custom_op``.
Verification then checks the outputs, input and parameter gradients, autocast, buffers and
the RNG state after the call as for every fix.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Helper, Plan, REGION, Refusal, Site, single
from rewrites.fixes.conditions import Refuse
from rewrites.fixes.facts import FunctionFacts, names_in
from rewrites.fixes.judgements import code
from rewrites.fixes.op_sites import _in_mend_helper, _module_names, _wrapped, site_names
from rewrites.fixes.opaque_region import _bound, _check_body, _data_dependent, _kind, _writes, _zeros_like
from rewrites.fixes.runtime import custom_op_lacking, helper

RULES = ("GM501", "GM302", "GM502")
ORDER = 5  # first: the region is replaced whole, so no family rewrites inside it (fixes/__init__.py)

REF = "_mend_opaque"  # the attribute __init__ gives the module: its opaque handle

RUNTIME = helper("opaque", requires=("registry",))


def _enclosing_class(an: Analysis, fn: cst.FunctionDef) -> Optional[cst.ClassDef]:
    p = an.parent(fn)
    if isinstance(p, cst.IndentedBlock):
        p = an.parent(p)
    return p if isinstance(p, cst.ClassDef) else None


def _init_of(cls: cst.ClassDef) -> Optional[cst.FunctionDef]:
    if not isinstance(cls.body, cst.IndentedBlock):
        return None
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == "__init__":
            return s
    return None


def _has_ref(init: cst.FunctionDef) -> bool:
    return f"self.{REF} =" in code(init)


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if ctx.lines is None:
        return result  # only where Dynamo broke: the region's extent comes from the break
    taken = _module_names(an.module)
    refs: set[int] = set()  # classes whose __init__ this plan already gives a handle
    dense = _dense_lines(an, ctx)
    for fn in an.findall(cst.FunctionDef, ctx):
        if _in_mend_helper(an, fn) or not isinstance(fn.body, cst.IndentedBlock):
            continue
        body = list(fn.body.body)
        for k, loop in enumerate(body):
            if not isinstance(loop, cst.For):
                continue
            _plan_loop(an, ctx, fn, body, k, taken, refs, dense, result)
        _escaping(an, ctx, fn, body, result)
    return result


def _escaping(an: Analysis, ctx: Context, fn: cst.FunctionDef, body: list, result: Plan) -> None:
    """A statement of the function's body, at a line where Dynamo broke, binding a
    data-dependent op's result that the function reads later or returns (Longformer's
    ``is_index_global_attn.nonzero(as_tuple=True)``): refused with that reason, which is the
    whole of it; the family's other planners have nothing to say about such a line."""
    facts: Optional[FunctionFacts] = None
    for stmt in body:
        s = single(stmt)
        if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name)):
            continue
        line = an.span(stmt)[0]
        if ctx.lines is not None and line not in ctx.lines:
            continue
        dd = _data_dependent(s.value)
        if dd is None or not ctx.wants(dd[1]):
            continue
        facts = facts or FunctionFacts(an, fn)
        name = s.targets[0].target.value
        if facts.used_after(name, an.span(stmt)[1]):
            result.refusals.append(Refusal(dd[1], line, f"opaque region not made: `{name}` is `{dd[0]}`'s result, "
                                           "whose shape depends on data, and it is read after this line: an op "
                                           "hiding it would hand back a length no input's shape gives"))


def _dense_lines(an: Analysis, ctx: Context) -> set[int]:
    """Lines the unsafe dense dispatch rewrites when the run asked for it: left to it."""
    if not ctx.unsafe:
        return set()
    from rewrites.fixes import gm5_dispatch

    return {l for e in gm5_dispatch.plan(an, ctx).edits if e.site is not None
            for l in range(e.site.line, e.site.end_line + 1)}


def _plan_loop(an: Analysis, ctx: Context, fn: cst.FunctionDef, body: list, k: int, taken: set[str],
               refs: set[int], dense: set[int], result: Plan) -> None:
    loop = body[k]
    writes = _writes(loop)
    j = next((i for i in range(k - 1, -1, -1) if (z := _zeros_like(body[i])) and z[0] in writes), None)
    region = body[j:k + 1] if j is not None else [loop]
    start, end = an.span(region[0])[0], an.span(loop)[1]
    if not ctx.covers(start, end):
        return
    facts = FunctionFacts(an, fn)
    dd = None
    for s in region:
        dd = dd or _data_dependent(s, facts.bindings)
    if dd is None:
        return  # nothing data-dependent here: another family's break
    rule = dd[1]
    if not ctx.wants(rule) or any(start <= l <= end for l in dense):
        return
    line = an.span(loop)[0]
    try:
        missing = custom_op_lacking("the opaque region")
        if missing:
            raise Refuse(missing)
        if j is None:
            raise Refuse("the loop writes into no accumulator made by `torch.zeros_like(<input>)` before it: the "
                         "region's output shape is not derivable from its inputs' shapes")
        acc, like, dtype = _zeros_like(body[j])  # type: ignore[misc]
        bound = _bound(region)
        read = set().union(*(names_in(s) for s in region))
        text = "".join(code(s) for s in region)
        inputs = sorted((n for n in read if facts.defined_before(n, start)),
                        key=lambda n: re.search(rf"\b{re.escape(n)}\b", text).start())  # type: ignore[union-attr]
        if like not in inputs:
            raise Refuse(f"`{like}`, whose shape the output takes, is not an input of the region")
        if like in bound:
            raise Refuse(f"`{like}`, whose shape the output takes, is re-bound inside the region")
        if acc in _bound(region[1:]):
            raise Refuse(f"the accumulator `{acc}` is re-bound inside the region")
        _check_body(region, set(inputs), acc)
        for n in sorted(bound - {acc}):
            if facts.used_after(n, end):
                escaped = [s for s in region if n in _bound([s]) and _data_dependent(s, facts.bindings)]
                if escaped:
                    op = _data_dependent(escaped[0], facts.bindings)[0]  # type: ignore[index]
                    raise Refuse(f"`{n}` leaves the region and its shape depends on data (`{op}`): no fake "
                                 "implementation can give it, so the region cannot be one opaque op")
                raise Refuse(f"`{n}`, bound in the region, is read after it: an opaque region hands back only its "
                             f"accumulator `{acc}`")
        if an.enclosing_function(fn) is not None:
            raise Refuse("the function is nested in another: the names it closes over are not visible to a "
                         "module-level op")
        is_method = bool(fn.params.params) and fn.params.params[0].name.value == "self"
        uses_self = "self" in inputs
        if "self" in inputs and not is_method:
            raise Refuse("`self` is not the method's own first parameter")
        cls = _enclosing_class(an, fn) if uses_self else None
        init = _init_of(cls) if cls is not None else None
        if uses_self and (init is None or not isinstance(init.body, cst.IndentedBlock) or not init.params.params
                          or isinstance(single(init.body.body[-1]), cst.Return)):
            raise Refuse("the class defines no `__init__` of its own that ends in a statement after which the module's "
                         "opaque handle can be made")
        args = [n for n in inputs if n != "self"]
        kinds = [_kind(an, fn, facts, n, start) for n in args]
        stem, helper_name, op_var = site_names(ctx.module, fn.name.value, an.span(region[0])[0], taken, "the region's op")
    except Refuse as why:
        result.refusals.append(Refusal(rule, line, f"opaque region not made: {why}"))
        return
    taken.update({helper_name, op_var})
    params = (["self"] if uses_self else []) + args
    text = "".join(code(s) for s in [region[0].with_changes(
        leading_lines=[ln for ln in region[0].leading_lines if ln.comment]), *region[1:]])
    indented = "".join(("    " + ln if ln.strip() else ln) for ln in text.splitlines(True))
    where = f"{cls.name.value}.{fn.name.value}" if cls is not None else fn.name.value
    kinds_text = " ".join((["module"] if uses_self else []) + kinds)
    helper = Helper(
        _wrapped(f"def {helper_name}(", params, "):") + "\n"
        f"    # mend {rule}: {where}'s data-dependent region (lines {start}-{end}), run\n"
        f"    # as the custom op mend::{stem}; its output is shaped like `{like}`\n"
        f"{indented}"
        f"    return {acc}\n\n\n"
        + _wrapped(f"{op_var} = _mend_opaque_op(",
                   [f'"mend::{stem}"', helper_name, f'"{kinds_text}"', str(args.index(like))]
                   + ([f"dtype={dtype}"] if dtype else []), ")") + "\n")
    call_args = (["self", "[*self.parameters(), *self.buffers()]"] if uses_self else []) + args
    site = Site(rule, start, end, f"data-dependent region ({dd[0]}) -> one opaque custom op mend::{stem} (same "
                "algorithm, same cost; its backward differentiates what its forward recorded)", strategy="opaque", claims=REGION)

    def build(updated: cst.CSTNode, call_args=call_args):
        new = cst.parse_statement(f"{acc} = {op_var}({', '.join(call_args)})\n")
        return new.with_changes(leading_lines=updated.leading_lines)

    result.edits.append(Edit(region[0], build, site, helpers=(RUNTIME, helper)))
    for s in region[1:]:
        result.edits.append(Edit(s, lambda _u: cst.RemovalSentinel.REMOVE, None, needs_torch=False))
    if uses_self and id(init) not in refs and not _has_ref(init):
        refs.add(id(init))
        me = init.params.params[0].name.value
        stmt = cst.parse_statement(f"{me}.{REF} = _mend_module_ref({me})\n")
        # an edit of the block, not of its last statement: the user's statements are not laid out again
        result.edits.append(Edit(init.body, lambda u, stmt=stmt: u.with_changes(body=[*u.body, stmt]), None,
                                 needs_torch=False, helpers=(RUNTIME,)))


_MOE = '''import torch
from torch import nn


class Moe(nn.Module):
    def __init__(self, dim=8, n=4):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))

    def forward(self, x, expert):
        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            idx = torch.nonzero(expert == e).squeeze(-1)
            out[idx] = self.experts[e](x[idx]).to(x.dtype)
        return out
'''

_SITE = '''def _mend_module_forward_11(self, x, expert):
    # mend GM501: Moe.forward's data-dependent region (lines 11-14), run
    # as the custom op mend::module_forward_11; its output is shaped like `x`
    out = torch.zeros_like(x)
    for e in range(len(self.experts)):
        idx = torch.nonzero(expert == e).squeeze(-1)
        out[idx] = self.experts[e](x[idx]).to(x.dtype)
    return out


_mend_module_forward_11_op = _mend_opaque_op(
    "mend::module_forward_11", _mend_module_forward_11, "module tensor tensor", 0
)
'''

# at the nonzero's line, where Dynamo broke
CASES = [
    Case(_MOE, _MOE.replace("from torch import nn\n", "from torch import nn\n\n\n" + RUNTIME.text + "\n\n" + _SITE)
         .replace("        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))\n",
                  "        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))\n"
                  "        self._mend_opaque = _mend_module_ref(self)\n")
         .replace('''        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            idx = torch.nonzero(expert == e).squeeze(-1)
            out[idx] = self.experts[e](x[idx]).to(x.dtype)
''', '''        out = _mend_module_forward_11_op(
            self,
            [*self.parameters(), *self.buffers()],
            x,
            expert,
        )
'''), lines={13}),
]
# the per-expert counts read back with .tolist() and walked (the .tolist() is the break)
_COUNTS = (("        for e in range(len(self.experts)):\n",
            "        for e, n in enumerate(expert.bincount(minlength=4).tolist()):\n            if n == 0:\n"
            "                continue\n"),
           ("    for e in range(len(self.experts)):\n",
            "    for e, n in enumerate(expert.bincount(minlength=4).tolist()):\n        if n == 0:\n            continue\n"),
           ("(lines 11-14)", "(lines 11-16)"), ("mend GM501", "mend GM302"))
_before, _after = _MOE, CASES[0].after
for _old, _new in _COUNTS:
    _before, _after = _before.replace(_old, _new), _after.replace(_old, _new)
CASES.append(Case(_before, _after, lines={12}))
# a float32 accumulator on the input's device (gpt-oss-style experts): the fake has its dtype
_F32 = (("out = torch.zeros_like(x)\n", "out = torch.zeros_like(x, dtype=torch.float32, device=x.device)\n"),
        ("self.experts[e](x[idx]).to(x.dtype)\n", "self.experts[e](x[idx]).float()\n"),
        ("        return out\n", "        return out.to(x.dtype)\n"),
        ('    "mend::module_forward_11", _mend_module_forward_11, "module tensor tensor", 0\n',
         '    "mend::module_forward_11",\n    _mend_module_forward_11,\n    "module tensor tensor",\n    0,\n'
         '    dtype=torch.float32,\n'))
_before, _after = _MOE, CASES[0].after
for _old, _new in _F32:
    _before, _after = _before.replace(_old, _new), _after.replace(_old, _new)
CASES.append(Case(_before, _after, lines={13}))

# a read through a boolean mask, one adapter per language (X-MOD's adapters), where Dynamo broke
_ADAPTERS = '''import torch
from torch import nn


class Adapters(nn.Module):
    def __init__(self, dim=8, n=2):
        super().__init__()
        self.adapters = nn.ModuleDict({str(i): nn.Linear(dim, dim) for i in range(n)})

    def forward(self, h, lang_ids):
        out = torch.zeros_like(h)
        for i, key in enumerate(self.adapters.keys()):
            lang_mask = lang_ids == i
            out[lang_mask] = self.adapters[key](h[lang_mask])
        return out
'''
_ADAPTERS_SITE = '''def _mend_module_forward_11(self, h, lang_ids):
    # mend GM502: Adapters.forward's data-dependent region (lines 11-14), run
    # as the custom op mend::module_forward_11; its output is shaped like `h`
    out = torch.zeros_like(h)
    for i, key in enumerate(self.adapters.keys()):
        lang_mask = lang_ids == i
        out[lang_mask] = self.adapters[key](h[lang_mask])
    return out


_mend_module_forward_11_op = _mend_opaque_op(
    "mend::module_forward_11", _mend_module_forward_11, "module tensor tensor", 0
)
'''
_ADAPTERS_LOOP = '''        out = torch.zeros_like(h)
        for i, key in enumerate(self.adapters.keys()):
            lang_mask = lang_ids == i
            out[lang_mask] = self.adapters[key](h[lang_mask])
'''
_ADAPTERS_CALL = '''        out = _mend_module_forward_11_op(
            self,
            [*self.parameters(), *self.buffers()],
            h,
            lang_ids,
        )
'''
CASES.append(Case(
    _ADAPTERS,
    _ADAPTERS.replace("from torch import nn\n", "from torch import nn\n\n\n" + RUNTIME.text + "\n\n" + _ADAPTERS_SITE)
    .replace("for i in range(n)})\n", "for i in range(n)})\n        self._mend_opaque = _mend_module_ref(self)\n")
    .replace(_ADAPTERS_LOOP, _ADAPTERS_CALL),
    lines={14}))

# refused, with the reason
CASES += [
    Case(_MOE.replace("        return out\n", "        return out, idx\n"), lines={13},
         reason="its shape depends on data (`nonzero`)"),  # a nonzero that escapes the region
    Case(_MOE + "\n\ndef _mend_module_forward_11():\n    pass\n", lines={13},
         reason="a name collision"),  # the site's name is taken
    Case(_MOE.replace("            out[idx] = self.experts[e](x[idx]).to(x.dtype)\n",
                      "            out[idx] = self.experts[e](x[idx]).to(x.dtype)\n            expert[idx] = -1\n"),
         lines={13}, reason="writes into `expert`, an input of the region"),
    Case(_MOE.replace("        out = torch.zeros_like(x)\n", "        out = []\n")
         .replace("            out[idx] = self.experts[e](x[idx]).to(x.dtype)\n", "            out.append(self.experts[e](x[idx]))\n")
         .replace("        return out\n", "        return torch.cat(out)\n"),
         lines={13}, reason="output shape is not derivable"),  # no accumulator of a known shape
    Case(_MOE.replace("out = torch.zeros_like(x)\n", "out = torch.zeros_like(x, dtype=self.acc_dtype)\n"),
         lines={13}, reason="no accumulator made by"),  # a dtype known only when it runs
    Case("import torch\n\n\ndef outer(w):\n    def f(x, expert):\n        out = torch.zeros_like(x)\n"
         "        for e in range(4):\n            idx = torch.nonzero(expert == e).squeeze(-1)\n"
         "            out[idx] = x[idx] * w[e]\n        return out\n\n    return f\n",
         lines={8}, reason="nested in another"),  # a closure: `w` is not visible at module level
    # the rows a mask picked leave the loop: their count depends on data
    Case(_ADAPTERS.replace("self.adapters[key](h[lang_mask])", "self.adapters[key](sel)")
         .replace("            lang_mask = lang_ids == i\n", "            lang_mask = lang_ids == i\n            sel = h[lang_mask]\n")
         .replace("        return out\n", "        return out, sel\n"), lines={14},
         reason="`sel` leaves the region and its shape depends on data (`h[lang_mask]`)"),
    # a write through a mask alone has a fixed shape: nothing data-dependent for a region
    Case("import torch\n\n\ndef f(h, ids):\n    out = torch.zeros_like(h)\n    for i in range(2):\n"
         "        m = ids == i\n        out[m] = i\n    return out\n", lines={8}),
    # no loop: a nonzero's index lists handed on (Longformer's global attention)
    Case("import torch\n\n\ndef global_indices(is_global):\n    idx = is_global.nonzero(as_tuple=True)\n"
         "    return idx\n", lines={5}, reason="`idx` is `nonzero`'s result, whose shape depends on data"),
]
