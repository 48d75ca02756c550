"""GM302 / GM504: a function's last lines, whose result's sizes depend on data, stay in the
graph as one custom op whose output sizes are unbacked, for inference: an UNSAFE fix
(``--unsafe-fixes``), partially verified.

Vision-language models find each image's patch positions from its grid (transformers'
``vision_utils``, shared by Qwen2/2.5/3-VL, GLM-4V, Kimi-K2.5 and more)::

    position_ids = []
    for (t, h, w), merge_size in zip(grid_thw.tolist(), spatial_merge_size.tolist()):  # breaks
        ...
        position_ids.append(torch.stack([hpos_ids, wpos_ids], dim=-1).repeat(t, 1))
    return torch.cat(position_ids, dim=0)

becomes::

    return _mend_vision_utils_get_vision_position_ids_111_op(
        grid_thw, spatial_merge_size, device
    )

The lines from the one where Dynamo broke (a ``.tolist()``, a ``repeat_interleave`` by tensor
counts) to the function's ``return`` move, as written, into a module-level function of the
values they read (with the fresh lists and literals bound just before them), and that function
becomes the custom op ``mend::<module>_<function>_<line>`` (``rewrites/fixes/runtime/
shape_op.py``). Not compiling, a call runs the moved lines themselves: outputs, aliasing and
exceptions are the original's. Compiled, the op's fake runs the same lines on fake tensors whose
values, read into Python, are new unbacked ints: a size that depends on data comes out a new
unbacked size and the others as the lines make them, so the graph goes on with the result
(broadcasting it against a tensor of known size puts a runtime assert in the graph, not a
break). Where the lines cannot run so (a branch on a value they read), the fake says the
operator depends on data and Dynamo breaks there, as before.

Made only where Dynamo broke at the line, and only when the lines end the function in one
``return`` of a tensor or a tuple of them, return nowhere else, assign no attribute and write
into no value they read, read no ``self``, and move into a function of their own (no ``yield``,
nested function, ``global``). Each value they read is passed with the type the function gives
it (its annotation, or what it was bound to: a tensor, a number, a ``bool``, a ``str``, a
``dtype``, a ``device``); a call with another type runs the lines themselves, as does a call not
being compiled. What the callers do with a result of unbacked size is theirs: verification's
re-trace rejects the fix where one of them guards on it (a split by the sizes it holds crashes
Dynamo: rejected).

The caveat, why it is unsafe: the op serves inference. With grad enabled, the call runs the
lines as written: the op has no derivative, and where its unbacked sizes meet a tensor that
needs a gradient, autograd's broadcasting checks guard on them and torch.compile raises
(Qwen3-VL's rotary embedding, torch 2.13: ``Could not guard on data-dependent expression
Eq(u0, 16)``); under autocast it does too (a compiled graph would run the op without it).
mend's compiled check runs with grad, so no check compares the op's compiled values with
eager: the fix is partially verified, planned with ``--unsafe-fixes`` and written with
``--write --unsafe-fixes``.
"""

from __future__ import annotations

import textwrap
from typing import Optional

import libcst as cst

from rewrites.fixes.base import REGION, Analysis, Case, Context, Edit, Helper, Plan, Refusal, Site, offer_unsafe, single
from rewrites.fixes.conditions import Refuse
from rewrites.fixes.facts import FunctionFacts, names_in
from rewrites.fixes.judgements import code, full_name
from rewrites.fixes.op_sites import _in_mend_helper, _module_names, _wrapped, site_names
from rewrites.fixes.opaque_region import Unmovable, _assigns, _check_body, _kind
from rewrites.fixes.runtime import custom_op_lacking, helper

RULES = ("GM302", "GM504")
UNSAFE_RULES = ("GM302", "GM504")  # caveated: planned only with --unsafe-fixes
CAVEAT = ("the op serves inference only (no grad, no autocast; with grad the lines run as written, as its unbacked "
          "sizes meet autograd's broadcasting checks, which guard on them), and mend's compiled check runs with grad, "
          "so no check compares the op's compiled values with eager")
ORDER = 26  # after gm3_unbacked (25): a list read back for a split stays its fix, not this op's
RUNTIME = helper("shape_op", requires=("registry", "op_table"))

_DTYPES = frozenset({"torch.float16", "torch.float32", "torch.float64", "torch.bfloat16", "torch.half",
                     "torch.float", "torch.double", "torch.int8", "torch.int16", "torch.int32", "torch.int64",
                     "torch.uint8", "torch.long", "torch.int", "torch.bool", "torch.complex64"})


def _data_dependent(stmt: cst.CSTNode) -> Optional[tuple[str, str]]:
    """The first op under ``stmt`` whose result's size depends on data: (its code, its rule)."""
    found: list[tuple[str, str]] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            f = n.func
            if not isinstance(f, cst.Attribute):
                return
            if f.attr.value == "tolist" and not n.args:
                found.append((code(n), "GM302"))
            elif f.attr.value == "repeat_interleave":
                # torch.repeat_interleave(x, counts) / x.repeat_interleave(counts): counts not a number
                counts = n.args[1:2] if full_name(f) == "torch.repeat_interleave" else n.args[:1]
                if counts and counts[0].keyword is None and not isinstance(counts[0].value, cst.Integer):
                    found.append((code(n), "GM504"))

    stmt.visit(V())
    return found[0] if found else None


def _fresh(stmt: cst.CSTNode) -> bool:
    """``name = []`` / ``{}`` / ``()`` / a literal: a value the moved lines may make themselves."""
    s = single(stmt)
    if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name)):
        return False
    v = s.value
    if isinstance(v, (cst.List, cst.Dict, cst.Tuple, cst.Set)):
        return not v.elements  # type: ignore[union-attr]
    return isinstance(v, (cst.Integer, cst.Float, cst.SimpleString))


_NOT_ONE_TENSOR = frozenset({"tolist", "item", "split", "chunk", "unbind", "tensor_split", "size", "dim", "numel",
                             "len", "int", "float", "bool", "list", "tuple", "dict", "range", "zip"})


def _outputs(value: Optional[cst.BaseExpression], tail: list[cst.CSTNode]) -> int:
    """How many tensors ``return value`` gives, as far as the code shows (0: something else,
    or a tuple holding something else)."""
    if value is None:
        return 0
    bound: dict[str, cst.BaseExpression] = {}  # a returned name's last value in the lines
    for t in tail:
        for a in _assigns(t):
            for target in a.targets:
                if isinstance(target.target, cst.Name):
                    bound[target.target.value] = a.value
    items = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    for v in items:
        v = bound.get(v.value, v) if isinstance(v, cst.Name) else v
        called = v.func.attr.value if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) else \
            v.func.value if isinstance(v, cst.Call) and isinstance(v.func, cst.Name) else ""
        if isinstance(v, (cst.List, cst.Dict, cst.Set, cst.Tuple, cst.BaseNumber, cst.BaseString, cst.StarredElement,
                          cst.Lambda, cst.ListComp, cst.DictComp, cst.SetComp, cst.GeneratorExp)) \
                or isinstance(v, cst.Name) and v.value in ("None", "True", "False") or called in _NOT_ONE_TENSOR:
            return 0
    return len(items)


def _type(an: Analysis, fn: cst.FunctionDef, facts: FunctionFacts, name: str, before: int, depth: int = 0) -> str:
    """The op schema's type of a value the moved lines read: ``_kind``'s tensor / int / float /
    bool, and a ``str``, a ``dtype`` or a ``device``, from the annotation or the value bound."""
    params = {p.name.value: p for p in [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]}
    value: Optional[cst.BaseExpression] = None
    last = -1
    for a in _assigns(fn):
        line = an.span(a)[0]
        if last <= line < before and any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets):
            value, last = a.value, line
    if value is None and name in params:
        p = params[name]
        ann = code(p.annotation.annotation) if p.annotation else ""
        if ann in ("str", "torch.dtype", "torch.device") or p.default is not None and \
                isinstance(p.default, cst.SimpleString) and not ann:
            return {"str": "str", "torch.dtype": "dtype", "torch.device": "device"}.get(ann, "str")
        if isinstance(p.default, cst.Name) and p.default.value in ("True", "False") and not ann:
            return "bool"
        return _kind(an, fn, facts, name, before)
    arms = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
    kinds = set()
    for v in arms:
        if isinstance(v, cst.Attribute) and v.attr.value in ("device", "dtype"):
            kinds.add(v.attr.value)
        elif full_name(v) in _DTYPES:
            kinds.add("dtype")
        elif isinstance(v, cst.Name) and depth < 4:
            kinds.add(_type(an, fn, facts, v.value, last, depth + 1))
        else:
            kinds.add(_kind(an, fn, facts, name, before) if v is value else "")
    return kinds.pop() if len(kinds) == 1 and "" not in kinds else "tensor"


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if ctx.lines is None:
        return result  # only where Dynamo broke
    taken = _module_names(an.module)
    for fn in an.findall(cst.FunctionDef, ctx):
        if _in_mend_helper(an, fn) or not isinstance(fn.body, cst.IndentedBlock):
            continue
        body = list(fn.body.body)
        last = single(body[-1])
        if not isinstance(last, cst.Return):
            continue  # not a function whose last lines make what it returns: not this family's
        for k, stmt in enumerate(body):
            start, end = an.span(stmt)
            found = _data_dependent(stmt)
            if found is None or not any(start <= ln <= end for ln in ctx.lines) or not ctx.wants(found[1]):
                continue
            if found[1] == "GM504" and not any(start <= ln <= end for ln in ctx.shape_lines):
                continue  # counts Dynamo did not say were data: an int's repeat
            first = k
            while first > 0 and _fresh(body[first - 1]):
                first -= 1
            tail = body[first:]
            rule, op = found[1], found[0]
            try:
                facts = FunctionFacts(an, fn)
                begin = an.span(tail[0])[0]
                read = {n for n in set().union(*(names_in(t) for t in tail)) if facts.defined_before(n, begin)}
                _check(an, fn, tail, last, read)
                inputs = _in_order(fn, facts, read)
                if "self" in inputs or "cls" in inputs:
                    raise Refuse("they read `self`, an object the op cannot take")
                kinds = [_type(an, fn, facts, n, begin) for n in inputs]
                missing = custom_op_lacking("the lines' op")
                if missing:
                    raise Refuse(missing)
                names = site_names(ctx.module, fn.name.value, begin, taken, "the op")
            except Refuse as why:
                result.refusals.append(Refusal(rule, start, f"the lines from `{op}` to the return not made one op "
                                                            f"of unbacked sizes: {why}"))
                break
            if offer_unsafe(ctx, result, rule, start, cost=CAVEAT, what="Making the lines from it to the return one op"):
                taken.update(names[1:])
                _plan_site(an, result, fn, tail, (rule, op), list(zip(inputs, kinds)), names)
            break  # the first such line: the op runs every line after it
    return result


def _in_order(fn: cst.FunctionDef, facts: FunctionFacts, names: set[str]) -> list[str]:
    """``names`` as a reader meets them: the parameters in the signature's order, then the
    locals in the order they are first bound."""
    params = [p.name.value for p in [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]]
    bound = [n for n, _, _ in sorted(facts.bindings, key=lambda b: b[1])]
    return [n for n in dict.fromkeys(params + bound) if n in names]


def _check(an: Analysis, fn: cst.FunctionDef, tail: list[cst.CSTNode], last: cst.Return, read: set[str]) -> None:
    """Refuse lines a function of their own, given the values in ``read``, would not run alike."""
    if fn.asynchronous is not None:
        raise Refuse("the function is a coroutine")
    if an.enclosing_function(fn) is not None:
        raise Refuse("the function is nested in another: the names it closes over are not visible to a "
                     "module-level op")
    if not _outputs(last.value, tail):
        raise Refuse(f"it returns `{code(last.value) if last.value is not None else 'None'}`, not a tensor or a "
                     "tuple of them")
    v = Unmovable()
    for s in tail:
        s.visit(v)
    if v.why:
        raise Refuse(f"they cannot move into a function of their own: {v.why[0]}")
    _check_body(tail[:-1], read, "")  # no other return, attribute or input written


def _plan_site(an: Analysis, result: Plan, fn: cst.FunctionDef, tail: list[cst.CSTNode], found: tuple[str, str],
               inputs: list[tuple[str, str]], names: tuple[str, str, str]) -> None:
    (rule, op), (stem, tail_name, op_var) = found, names
    start, end = an.span(tail[0])[0], an.span(tail[-1])[1]
    text = "".join(code(t) for t in [tail[0].with_changes(leading_lines=[]), *tail[1:]])
    indented = "".join(("    " + ln if ln.strip() else ln) for ln in text.splitlines(True))
    args = [n for n, _ in inputs]
    outputs = _outputs(single(tail[-1]).value, tail)  # type: ignore[union-attr]
    make = [f'"mend::{stem}"', tail_name, '"' + " ".join(k for _, k in inputs) + '"'] + \
        ([str(outputs)] if outputs > 1 else [])
    why = textwrap.fill(f"mend {rule}: {fn.name.value}'s last lines ({start}-{end}), whose sizes depend on "
                        f"data, as the custom op mend::{stem}", 84, break_on_hyphens=False, break_long_words=False)
    helper_ = Helper(
        _wrapped(f"def {tail_name}(", args, "):") + "\n"
        + textwrap.indent(why, "    # ") + "\n"
        f"{indented}\n\n"
        + _wrapped(f"{op_var} = _mend_shape_op(", make, ")") + "\n")
    site = Site(rule, start, end, f"lines {start}-{end}, from `{op}` to the return, stay in the graph as the custom "
                f"op mend::{stem} (its output sizes that depend on data unbacked)", strategy="unbacked", claims=REGION,
                caveat=CAVEAT)

    def build(updated: cst.CSTNode) -> cst.CSTNode:
        call = cst.parse_statement(f"return {op_var}({', '.join(args)})\n")  # laid out where it goes
        return call.with_changes(leading_lines=updated.leading_lines)

    result.edits.append(Edit(tail[0], build, site, helpers=(RUNTIME, helper_)))
    for t in tail[1:]:
        result.edits.append(Edit(t, lambda _u: cst.RemovalSentinel.REMOVE, None, needs_torch=False))


# a vision-language model's patch positions, one image at a time (transformers' vision_utils)
_POSITIONS = """import torch


def positions(grid_thw: torch.Tensor, merge: int = 2):
    device = grid_thw.device
    ids = []
    for t, h, w in grid_thw.tolist():
        rows = torch.arange(h // merge, device=device).repeat_interleave(w // merge)
        ids.append(rows.repeat(t))
    return torch.cat(ids)
"""
_POSITIONS_OP = """def _mend_module_positions_6(grid_thw, merge, device):
    # mend GM302: positions's last lines (6-10), whose sizes depend on data, as the custom
    # op mend::module_positions_6
    ids = []
    for t, h, w in grid_thw.tolist():
        rows = torch.arange(h // merge, device=device).repeat_interleave(w // merge)
        ids.append(rows.repeat(t))
    return torch.cat(ids)


_mend_module_positions_6_op = _mend_shape_op(
    "mend::module_positions_6", _mend_module_positions_6, "tensor int device"
)
"""
# each patch's row and column, repeated per image by its patch count: two outputs
_ROWS = """import torch


def patch_rows(grid_thw: torch.Tensor):
    counts = grid_thw.prod(-1)
    heights = torch.repeat_interleave(grid_thw[:, 1], counts)
    starts = torch.repeat_interleave(counts.cumsum(0) - counts, counts)
    within = torch.arange(heights.shape[0]) - starts
    return within // heights, within % heights
"""
_ROWS_OP = """def _mend_module_patch_rows_6(grid_thw, counts):
    # mend GM504: patch_rows's last lines (6-9), whose sizes depend on data, as the custom
    # op mend::module_patch_rows_6
    heights = torch.repeat_interleave(grid_thw[:, 1], counts)
    starts = torch.repeat_interleave(counts.cumsum(0) - counts, counts)
    within = torch.arange(heights.shape[0]) - starts
    return within // heights, within % heights


_mend_module_patch_rows_6_op = _mend_shape_op(
    "mend::module_patch_rows_6", _mend_module_patch_rows_6, "tensor tensor", 2
)
"""


def _fixed(before: str, op: str, tail: str, call: str) -> str:
    return before.replace(tail, call).replace("import torch\n", "import torch\n\n\n" + RUNTIME.text + "\n\n" + op)


CASES = [
    Case(_POSITIONS, _fixed(_POSITIONS, _POSITIONS_OP, _POSITIONS[_POSITIONS.index("    ids = []"):],
                            "    return _mend_module_positions_6_op(grid_thw, merge, device)\n"), lines={7},
         unsafe=True),
    Case(_ROWS, _fixed(_ROWS, _ROWS_OP, _ROWS[_ROWS.index("    heights ="):],
                       "    return _mend_module_patch_rows_6_op(grid_thw, counts)\n"), lines={6}, hints=("shape",),
         unsafe=True),
    # without --unsafe-fixes: left alone, saying why
    Case(_POSITIONS, lines={7}, reason="unsafe fix"),
    # where Dynamo did not break, or did not say the counts were data: left alone
    Case(_POSITIONS, lines={5}),
    Case(_ROWS, lines={6}),
    # what the op cannot take or give, or the lines would do differently in a function of their own
    Case(_POSITIONS.replace("def positions(", "def positions(self, ").replace("h // merge", "h // self.merge"),
         lines={7}, reason="they read `self`"),
    Case(_POSITIONS.replace("return torch.cat(ids)", "return torch.cat(ids).tolist()"), lines={7},
         reason="it returns `torch.cat(ids).tolist()`, not a tensor"),
    Case(_POSITIONS.replace("return torch.cat(ids)", "return [torch.cat(ids)]"), lines={7},
         reason="not a tensor or a tuple of them"),
    Case(_ROWS.replace("    starts =", "    counts.clamp_(min=1)\n    starts ="), lines={6}, hints=("shape",),
         reason="it mutates `counts`, an input of the region"),
    Case(_POSITIONS.replace("        ids.append", "        if t > 4:\n            return None\n        ids.append"),
         lines={7}, reason="it returns from the function"),
    Case(_POSITIONS.replace("    return torch.cat", "    def later():\n        return 0\n\n    return torch.cat"),
         lines={7}, reason="it defines a function"),
]
