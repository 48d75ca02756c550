"""GM501, an UNSAFE fix: sparse expert dispatch becomes masked dense dispatch.

Mixtral's MoE block, and the families copied from it (qwen2-moe, olmoe, phimoe, jamba,
dbrx in transformers 4; switch and nllb-moe in transformers 5), route tokens with a
one-argument ``torch.where`` -- ``nonzero``, whose output shape depends on the data::

    for expert_idx in range(self.num_experts):
        idx, top_x = torch.where(expert_mask[expert_idx])
        current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
        current = expert_layer(current_state) * routing_weights[top_x, idx, None]
        final.index_add_(0, top_x, current)

The rewrite keeps the loop and every gather but enumerates EVERY index of the mask, in
``torch.where``'s row-major order (a fixed shape), and zeroes the pairs the mask did not
select where they are scattered::

        (idx, top_x), _mend_keep = _mend_dense_where(expert_mask[expert_idx])
        ...
        final.index_add_(0, top_x, _mend_masked(current, _mend_keep, 0))

An unselected pair adds exactly zero (``torch.where``, so an inf or nan computed for it does
not leak), so each sum is the original's up to the rounding of the expert's matmuls. A
loop over ``x.nonzero()`` (the experts some token chose, transformers 5) becomes a loop
over every index of ``x`` (``_mend_every_index``, in ``nonzero()``'s layout); an expert no
token chose then adds zeros.

Why UNSAFE (applied only with ``--unsafe-fixes``): the program's cost changes. Every expert
runs on every (token, slot) pair of the mask -- ``num_experts`` times the expert FLOPs of
the sparse dispatch -- in exchange for one graph without a host sync per expert. Worth it
for small batches (decoding, CUDA graphs), not for long prefills; ``mend bench`` measures it.

Preconditions (otherwise the loop is left alone, and the finding says why):

* ``a, b = torch.where(mask)`` is a statement of a ``for`` loop's body;
* the index names (and plain aliases ``n = b``) are used only inside subscripts (gathers),
  as the index of ``t.index_add_(dim, b, values)`` (the scatter) and in an
  ``if ...: continue`` skip;
* values computed from the gathers flow only into other such names and into the scatter's
  values: nothing writes one elsewhere (``x[i] = v``, ``lst.append(v)``) or reads it after
  the loop, and nothing reduces across their rows (``v.sum(0)``, ``softmax``);
* the expert maps each row on its own (a linear layer, an MLP): that is not provable from
  the source, so verification's output comparison is what shows it.

GM502, the same for boolean-mask dispatch (switch and nllb-moe in transformers 4, xmod's
language adapters): ``x[m] = f(y[m])`` becomes ``_mend_masked_put(x, m, f(y))`` (``f`` on
every position, written where ``m`` holds), every gather ``a[..., m, ...]`` becomes
``a[..., :, ...]``, and ``torch.nonzero(v, as_tuple=True)[0].tolist()`` feeding the loop
becomes every position of ``v`` (``_mend_every_position``).
"""

from __future__ import annotations

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Helper, Plan, Refusal, Site, offer_unsafe
from rewrites.fixes.conditions import Refuse
from rewrites.fixes.dispatch_flow import (_Flow, _header, _mask_element, _nonzero_arg, _positions_arg,
                                          _root_name, _stmt_puts, _where_assign)
from rewrites.fixes.facts import FunctionFacts
from rewrites.fixes.gm5_masks import maskish
from rewrites.fixes.judgements import call, code

RULES = ("GM501", "GM502")
ORDER = 60

KEEP = "_mend_keep"
COST = "every expert then runs on every token (num_experts x the expert FLOPs of the sparse dispatch)"

WHERE_HELPER = Helper('''def _mend_dense_where(mask):
    # mend GM501: every index of `mask`, in torch.where's row-major order, and which are set
    ranges = [torch.arange(n, device=mask.device) for n in mask.shape]
    grids = torch.meshgrid(*ranges, indexing="ij")
    return tuple(g.reshape(-1) for g in grids), mask.reshape(-1) != 0
''')
MASK_HELPER = Helper('''def _mend_masked(values, keep, dim):
    # mend GM501: the pairs the mask did not select add exactly zero
    shape = [1] * values.dim()
    shape[dim] = -1
    zero = torch.zeros((), dtype=values.dtype, device=values.device)
    return torch.where(keep.reshape(shape), values, zero)
''')
EVERY_HELPER = Helper('''def _mend_every_index(x):
    # mend GM501: every index of `x` in nonzero()'s layout; the loop masks the unset ones
    rows = [[]]
    for n in x.shape:
        rows = [r + [i] for r in rows for i in range(n)]
    return rows
''')
PUT_HELPER = Helper('''def _mend_masked_put(dest, mask, values):
    # mend GM502: dest[mask] = values[mask], with values computed at every position of dest
    m = mask.reshape(mask.shape + (1,) * (dest.dim() - mask.dim()))
    dest.copy_(torch.where(m, values, dest))
''')
POSITION_HELPER = Helper('''def _mend_every_position(v):
    # mend GM502: every position of the 1-D `v` (nonzero(v, as_tuple=True)[0] lists the set ones)
    torch._check(v.dim() == 1, lambda: "_mend_every_position: expected a 1-D tensor")
    return list(range(v.shape[0]))
''')


def _dense_gather(updated: cst.Subscript, i: int) -> cst.BaseExpression:
    """``x[a, mask, b]`` -> ``x[a, :, b]``; trailing ``:`` dropped; ``x[mask]`` -> ``x``."""
    els = list(updated.slice)
    els[i] = cst.SubscriptElement(cst.Slice(lower=None, upper=None))
    while els and isinstance(els[-1].slice, cst.Slice) and els[-1].slice.lower is None \
            and els[-1].slice.upper is None and els[-1].slice.step is None:
        els.pop()
    if not els:
        return updated.value
    els[-1] = els[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(slice=els)


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    loops: list[cst.For] = []

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            loops.append(n)

    an.module.visit(V())
    for loop in loops:
        fn = an.enclosing_function(loop)
        if fn is None:
            continue
        if ctx.wants("GM501"):
            _plan_where(an, ctx, loop, fn, result)
        if ctx.wants("GM502"):
            _plan_mask(an, ctx, loop, fn, result)
    return result


def _late(an: Analysis, facts: FunctionFacts, loop: cst.For, flow: _Flow) -> None:
    loop_end = an.span(loop)[1]
    late = sorted(n for n in flow.idx | flow.pair if facts.used_after(n, loop_end))
    if late:
        raise Refuse(f"`{late[0]}` is read after the loop")


def _plan_where(an: Analysis, ctx: Context, loop: cst.For, fn: cst.FunctionDef, result: Plan) -> None:
    body = list(loop.body.body)
    for k, stmt in enumerate(body):
        found = _where_assign(stmt)
        if found is None:
            continue
        assign, names, mask = found
        line = an.span(stmt)[0]
        if not ctx.covers(line, line):
            continue
        facts = FunctionFacts(an, fn)
        flow = _Flow(names)
        try:
            flow.walk(body[k + 1:])
            if not flow.scatters:
                raise Refuse("no `index_add_` scatters the gathered rows")
            _late(an, facts, loop, flow)
            if any(n == KEEP for n, _, _ in facts.bindings):
                raise Refuse(f"`{KEEP}` is already bound in this function")
        except Refuse as why:
            result.refusals.append(Refusal("GM501", line, f"sparse dispatch not rewritten: {why}"))
            continue
        if offer_unsafe(ctx, result, "GM501", line, COST, "a masked dense dispatch"):
            _where_edits(assign, flow, line, result)
        _header_edit(an, ctx, loop, facts, mask, flow, body[:k], result)


def _where_edits(assign: cst.Assign, flow: _Flow, line: int, result: Plan) -> None:
    """The where-assign becomes every index plus ``_mend_keep``; each scatter masks its values."""
    site = Site("GM501", line, line, f"sparse expert dispatch -> masked dense dispatch (unsafe: {COST})",
                strategy="dense_dispatch")
    tuple_target = assign.targets[0].target

    def build_where(updated: cst.Assign, tuple_target=tuple_target):
        target = cst.Tuple([cst.Element(tuple_target.with_changes(lpar=[cst.LeftParen()],
                                                                  rpar=[cst.RightParen()])),
                            cst.Element(cst.Name(KEEP))], lpar=[], rpar=[])
        return updated.with_changes(targets=[cst.AssignTarget(target)],
                                    value=call(WHERE_HELPER.name, updated.value.args[0].value))

    result.edits.append(Edit(assign, build_where, site, helpers=(WHERE_HELPER,)))
    for sc in flow.scatters:
        def build_scatter(updated: cst.Call):
            d, i, v = (a.value for a in updated.args)
            masked = call(MASK_HELPER.name, v, cst.Name(KEEP), d)
            return updated.with_changes(args=[*updated.args[:2], updated.args[2].with_changes(value=masked)])

        result.edits.append(Edit(sc, build_scatter, None, helpers=(MASK_HELPER,)))


def _header_edit(an, ctx, loop, facts, mask, flow: _Flow, body_before, result: Plan) -> None:
    head = _header(an, loop, facts, mask, flow, body_before)
    if head is None:
        return
    holder, _ = head
    hline = an.span(holder)[0]
    if not ctx.covers(hline, an.span(holder)[1]):
        return
    if not offer_unsafe(ctx, result, "GM501", hline, COST, "looping over every expert instead of those `nonzero` lists"):
        return
    helper = POSITION_HELPER if _positions_arg(holder) is not None else EVERY_HELPER
    hsite = Site("GM501", hline, an.span(holder)[1], "loop over the experts hit -> over every expert "
                 f"(one whose mask is empty adds nothing; unsafe: {COST})", strategy="every_index")
    result.edits.append(Edit(holder, lambda u, helper=helper: call(helper.name, _nonzero_arg(u)), hsite,
                             helpers=(helper,)))


def _plan_mask(an: Analysis, ctx: Context, loop: cst.For, fn: cst.FunctionDef, result: Plan) -> None:
    """``x[m] = f(y[m])`` in a loop (switch, nllb, xmod adapters) -> ``f(y)`` on every
    position, written where ``m`` holds (``_mend_masked_put``)."""
    body = list(loop.body.body)
    masks: list[str] = []
    for s in body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                        and isinstance(small.targets[0].target, cst.Subscript):
                    els = small.targets[0].target.slice
                    if els and isinstance(els[-1].slice, cst.Index) and \
                            isinstance(els[-1].slice.value, (cst.Name, cst.Subscript)):
                        masks.append(code(els[-1].slice.value))
    for mc in dict.fromkeys(masks):
        mexpr = cst.parse_expression(mc)
        root = _root_name(mexpr)
        gathers: list[cst.Subscript] = []
        roots = 0

        class G(cst.CSTVisitor):
            def visit_Subscript(self, n: cst.Subscript) -> None:
                i = _mask_element(n, mc)
                if i >= 0:
                    gathers.append(n)

            def visit_Name(self, n: cst.Name) -> None:
                nonlocal roots
                roots += n.value == root

        # the mask is defined in the loop (``lang_mask = lang_ids == i``): the flow starts after it
        k0 = 0
        for k, s in enumerate(body):
            if isinstance(s, cst.SimpleStatementLine) and any(
                    isinstance(x, cst.Assign) and len(x.targets) == 1 and isinstance(x.targets[0].target, cst.Name)
                    and x.targets[0].target.value == mc for x in s.body):
                k0 = k + 1
        for s in body[k0:]:
            s.visit(G())
        puts_targets = {id(x.targets[0].target) for s in body[k0:] if isinstance(s, cst.SimpleStatementLine)
                        for x in s.body if isinstance(x, cst.Assign) and len(x.targets) == 1}
        gathers = [g for g in gathers if id(g) not in puts_targets]
        put_stmts = [s for s in body[k0:] if _stmt_puts(s, mc)]
        if not gathers or not put_stmts:
            continue
        first = min(an.span(n)[0] for n in [*gathers, *put_stmts])
        last = max(an.span(s)[1] for s in put_stmts)
        if not ctx.covers(first, last):
            continue
        facts = FunctionFacts(an, fn)
        is_mask = maskish(mexpr, facts.bindings) or bool(set(range(first, last + 1)) & ctx.shape_lines)
        if not is_mask:
            continue
        flow = _Flow((), mask=mc)
        try:
            flow.walk(body[k0:])
            if not flow.puts:
                raise Refuse("no masked write takes the gathered rows back")
            if root and roots != len(gathers) + len(flow.puts):
                raise Refuse(f"`{root or mc}` is used other than as the index of a gather or of the write")
            _late(an, facts, loop, flow)
        except Refuse as why:
            result.refusals.append(Refusal("GM502", first, f"masked dispatch not rewritten: {why}"))
            continue
        if offer_unsafe(ctx, result, "GM502", first, COST, "computing every position and writing where the mask holds"):
            _mask_edits(mc, gathers, flow, first, last, result)
        _header_edit(an, ctx, loop, facts, mexpr, flow, body[:k0], result)


def _mask_edits(mc: str, gathers: list, flow: _Flow, first: int, last: int, result: Plan) -> None:
    """Each gather drops the mask (every position); each masked write becomes ``_mend_masked_put``."""
    site = Site("GM502", first, last, f"x[mask] = f(y[mask]) -> f(y) written where mask holds (unsafe: {COST})",
                strategy="dense_mask")
    for g in gathers:
        result.edits.append(Edit(g, lambda u: _dense_gather(u, _mask_element(u, mc)), None))
    for p in flow.puts:
        def build_put(updated: cst.Assign):
            t = updated.targets[0].target
            els = list(t.slice)
            dest = t.value if len(els) == 1 else t.with_changes(slice=[
                *els[:-2], els[-2].with_changes(comma=cst.MaybeSentinel.DEFAULT)])
            return cst.Expr(call(PUT_HELPER.name, dest, els[-1].slice.value, updated.value))

        result.edits.append(Edit(p, build_put, site if p is flow.puts[0] else None, helpers=(PUT_HELPER,)))


_MIXTRAL = '''import torch
def moe(self, hidden_states, routing_weights, expert_mask, final):
    for expert_idx in range(self.num_experts):
        expert_layer = self.experts[expert_idx]
        idx, top_x = torch.where(expert_mask[expert_idx])
        current_state = hidden_states[None, top_x].reshape(-1, hidden_states.shape[-1])
        current = expert_layer(current_state) * routing_weights[top_x, idx, None]
        final.index_add_(0, top_x, current.to(hidden_states.dtype))
    return final
'''

_HIT = '''import torch
def moe(self, hidden_states, routing_weights, expert_mask, final):
    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
    for expert_idx in expert_hit:
        idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
        current = self[f"expert_{expert_idx[0]}"](hidden_states[None, top_x].reshape(-1, 4))
        final.index_add_(0, top_x, current * routing_weights[top_x, idx, None])
    return final
'''

# transformers code, laid out at its ruff line-length; every rewrite of this family is unsafe
_HF = {"unsafe": True, "line_length": 119}

CASES = [
    Case(_MIXTRAL, reason="unsafe fix", line_length=119),  # without --unsafe-fixes: left alone, saying why
    Case(
        _MIXTRAL,
        _MIXTRAL.replace("import torch\n", "import torch\n\n\n" + WHERE_HELPER.source + "\n\n"
                         + MASK_HELPER.source + "\n\n", 1)
        .replace("idx, top_x = torch.where(expert_mask[expert_idx])",
                 "(idx, top_x), _mend_keep = _mend_dense_where(expert_mask[expert_idx])")
        .replace("current.to(hidden_states.dtype))", "_mend_masked(current.to(hidden_states.dtype), _mend_keep, 0))"),
        lines={5}, **_HF,
    ),
    Case(
        _HIT,
        _HIT.replace("import torch\n", "import torch\n\n\n" + WHERE_HELPER.source + "\n\n"
                     + MASK_HELPER.source + "\n\n" + EVERY_HELPER.source + "\n\n", 1)
        .replace("torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()",
                 "_mend_every_index(torch.greater(expert_mask.sum(dim=(-1, -2)), 0))")
        .replace("idx, top_x = torch.where(", "(idx, top_x), _mend_keep = _mend_dense_where(")
        .replace("current * routing_weights[top_x, idx, None])",
                 "_mend_masked(current * routing_weights[top_x, idx, None], _mend_keep, 0))"),
        lines={3, 5}, **_HF,
    ),
]

_XMOD = '''import torch
def adapt(self, hidden_states, lang_ids):
    new_hidden_states = torch.zeros_like(hidden_states)
    for adapter_idx, lang_key in enumerate(self.adapter_modules.keys()):
        lang_mask = lang_ids == adapter_idx
        lang_hidden_states = hidden_states[lang_mask]
        adapted_lang_hidden_states = self.adapter_modules[lang_key](lang_hidden_states)
        new_hidden_states[lang_mask] = adapted_lang_hidden_states
    return new_hidden_states
'''
_XMOD_FIXED = '''import torch


def _mend_masked_put(dest, mask, values):
    # mend GM502: dest[mask] = values[mask], with values computed at every position of dest
    m = mask.reshape(mask.shape + (1,) * (dest.dim() - mask.dim()))
    dest.copy_(torch.where(m, values, dest))


def adapt(self, hidden_states, lang_ids):
    new_hidden_states = torch.zeros_like(hidden_states)
    for adapter_idx, lang_key in enumerate(self.adapter_modules.keys()):
        lang_mask = lang_ids == adapter_idx
        lang_hidden_states = hidden_states
        adapted_lang_hidden_states = self.adapter_modules[lang_key](lang_hidden_states)
        _mend_masked_put(new_hidden_states, lang_mask, adapted_lang_hidden_states)
    return new_hidden_states
'''
_SWITCH = '''import torch
def moe(self, hidden_states, router_mask):
    next_states = hidden_states.clone()
    router_mask = router_mask.bool()
    batch_size, seq_len, num_experts = router_mask.shape
    idx_mask = router_mask.reshape(batch_size * seq_len, num_experts).sum(dim=0)
    idx_mask = torch.nonzero(idx_mask, as_tuple=True)[
        0
    ].tolist()  # length: number of "activated" expert / value: index
    for idx in idx_mask:
        next_states[router_mask[:, :, idx]] = getattr(self.experts, "expert_{}".format(idx))(
            hidden_states[router_mask[:, :, idx]]
        )
    return next_states
'''
_SWITCH_FIXED = '''import torch


def _mend_masked_put(dest, mask, values):
    # mend GM502: dest[mask] = values[mask], with values computed at every position of dest
    m = mask.reshape(mask.shape + (1,) * (dest.dim() - mask.dim()))
    dest.copy_(torch.where(m, values, dest))


def _mend_every_position(v):
    # mend GM502: every position of the 1-D `v` (nonzero(v, as_tuple=True)[0] lists the set ones)
    torch._check(v.dim() == 1, lambda: "_mend_every_position: expected a 1-D tensor")
    return list(range(v.shape[0]))


def moe(self, hidden_states, router_mask):
    next_states = hidden_states.clone()
    router_mask = router_mask.bool()
    batch_size, seq_len, num_experts = router_mask.shape
    idx_mask = router_mask.reshape(batch_size * seq_len, num_experts).sum(dim=0)
    idx_mask = _mend_every_position(idx_mask)  # length: number of "activated" expert / value: index
    for idx in idx_mask:
        _mend_masked_put(next_states, router_mask[:, :, idx], getattr(self.experts, "expert_{}".format(idx))(
            hidden_states
        ))
    return next_states
'''
_NLLB = '''import torch
def moe(self, hidden_states, router_probs):
    router_mask = router_probs.bool()
    masked_hidden_states = torch.einsum("bm,be->ebm", hidden_states, router_mask)
    for idx, expert in enumerate(self.experts.values()):
        token_indices = router_mask[:, idx]
        combining_weights = router_probs[token_indices, idx]
        expert_output = expert(masked_hidden_states[idx, token_indices])
        if self.moe_token_dropout > 0:
            if self.training:
                expert_output = self.token_dropout(expert_output)
            else:
                expert_output *= 1 - self.moe_token_dropout
        masked_hidden_states[idx, token_indices] = torch.einsum("b,be->be", combining_weights, expert_output)
    return masked_hidden_states.sum(dim=0)
'''
_NLLB_FIXED = '''import torch


def _mend_masked_put(dest, mask, values):
    # mend GM502: dest[mask] = values[mask], with values computed at every position of dest
    m = mask.reshape(mask.shape + (1,) * (dest.dim() - mask.dim()))
    dest.copy_(torch.where(m, values, dest))


def moe(self, hidden_states, router_probs):
    router_mask = router_probs.bool()
    masked_hidden_states = torch.einsum("bm,be->ebm", hidden_states, router_mask)
    for idx, expert in enumerate(self.experts.values()):
        token_indices = router_mask[:, idx]
        combining_weights = router_probs[:, idx]
        expert_output = expert(masked_hidden_states[idx])
        if self.moe_token_dropout > 0:
            if self.training:
                expert_output = self.token_dropout(expert_output)
            else:
                expert_output *= 1 - self.moe_token_dropout
        _mend_masked_put(
            masked_hidden_states[idx],
            token_indices,
            torch.einsum("b,be->be", combining_weights, expert_output),
        )
    return masked_hidden_states.sum(dim=0)
'''

# GM502's masked dispatch at Dynamo's breaks; a mask the source does not show (a subscript,
# an attribute) is one because Dynamo broke on a data-dependent shape there
CASES += [
    Case(_XMOD, _XMOD_FIXED, lines={6, 8}, **_HF),
    Case(_SWITCH, _SWITCH_FIXED, lines={7, 10, 13}, hints=("shape",), **_HF),
    Case(_NLLB, _NLLB_FIXED, lines={7}, hints=("shape",), **_HF),
]

# the dispatch is rewritten but its ``nonzero`` loop is not, because an extra pass over an
# expert nobody chose would show (an effect, a loop name read after the loop)
_HIT_KEPT = (_HIT.replace("import torch\n", "import torch\n\n\n" + WHERE_HELPER.source + "\n\n" + MASK_HELPER.source
                          + "\n\n", 1)
             .replace("idx, top_x = torch.where(", "(idx, top_x), _mend_keep = _mend_dense_where(")
             .replace("current * routing_weights[top_x, idx, None])",
                      "_mend_masked(current * routing_weights[top_x, idx, None], _mend_keep, 0))"))
_EFFECT = ("        final.index_add_", "        self.seen.append(1)\n        final.index_add_")
_READ_AFTER = ("    return final\n", "    return final, expert_idx\n")
CASES += [
    Case(_HIT.replace(*_EFFECT), _HIT_KEPT.replace(*_EFFECT), lines={3, 5}, **_HF),
    Case(_HIT.replace(*_READ_AFTER), _HIT_KEPT.replace(*_READ_AFTER), lines={3, 5}, **_HF),
]

# recognised, left alone even with --unsafe-fixes
CASES += [
    Case(_MIXTRAL.replace("        final.index_add_(0, top_x, current.to(hidden_states.dtype))\n",
                          "        final[top_x] = current\n"), reason="written into `final[top_x]`", **_HF),
    Case(_MIXTRAL.replace("    return final\n", "    return final, current\n"), reason="`current` is read after the loop",
         **_HF),
    Case(_MIXTRAL.replace("        final.index_add_", "        print(current)\n        final.index_add_"),
         reason="outside the scatter", **_HF),
    Case(_MIXTRAL.replace("        final.index_add_(0, top_x, current.to(hidden_states.dtype))\n", ""),
         reason="no `index_add_`", **_HF),
    Case(_XMOD.replace("](lang_hidden_states)", "](lang_hidden_states - lang_hidden_states.mean(0))"),
         reason="reduces across the gathered rows", **_HF),
]
