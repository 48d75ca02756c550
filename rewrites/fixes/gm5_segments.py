"""GM302 at a ``.tolist()`` of split sizes, an UNSAFE fix: per-chunk experts run on every row.

ScatterMoE-style layers (jetmoe; granitemoe in transformers 4) count the tokens routed to
each expert, read the counts back to the host and split the sorted rows by them::

    expert_size = gates.long().sum(0)
    expert_size = expert_size.tolist()            # the graph break: a host sync, sizes as data
    ...
    def forward(self, inputs, expert_size):       # ParallelExperts, in the same file
        input_list = inputs.split(expert_size, dim=0)
        output_list = []
        for i in range(self.num_experts):
            output_list.append(F.linear(input_list[i], self.weight[i]))
        results = torch.cat(output_list, dim=0)

The rewrite keeps the sizes a tensor and gives every chunk ALL the rows; each row then takes
the output of the chunk ``split`` would have put it in (``_mend_chunk_ids``: searchsorted of
the row index in the sizes' running sum), selected with ``torch.where`` so the other
chunks' values (an inf, a nan) never leak::

    _mend_rows = _mend_chunk_ids(expert_size, inputs.shape[0], inputs.device)
    input_list = [inputs] * len(expert_size)
    ...
    results = _mend_cat_chunks(output_list, _mend_rows)

and ``expert_size = expert_size.tolist()`` goes (``y = x.tolist()`` becomes ``y = x``).

Why UNSAFE (``--unsafe-fixes`` only): every expert runs on every row, ``len(sizes)`` times the
FLOPs of the split; the outputs stay the same. Preconditions (otherwise nothing is planned):

* the ``.tolist()`` is a statement ``y = x.tolist()`` at a line where Dynamo broke;
* a function of the same file takes a parameter named ``y`` and holds, in this order,
  ``L = X.split(y, dim=0)``, ``O = []``, a ``for`` loop whose body is the single statement
  ``O.append(f(L[i], ...))`` and ``R = torch.cat(O, dim=0)``; ``L`` and ``O`` are used
  nowhere else, and ``f`` reduces nothing across rows (``sum``, ``softmax``, ...);
* that ``f`` maps each row on its own (a linear layer) is not provable from the source:
  verification's output comparison is what shows it.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from rewrites.fixes.base import (HELPERS, Analysis, Context, Edit, FunctionFacts, Plan, Site, call, code, full_name,
                                 offer_unsafe, reduction_over)

RULES = ("GM302",)

COST = "every chunk's function then runs on every row (len(sizes) x the FLOPs of the split)"

IDS_HELPER, CAT_HELPER, ROWS = "_mend_chunk_ids", "_mend_cat_chunks", "_mend_rows"

HELPERS[IDS_HELPER] = '''def _mend_chunk_ids(sizes, n, device):
    # mend GM302: row r of x.split(sizes) lies in chunk ids[r] (sizes stay a tensor: no host sync)
    ends = torch.cumsum(torch.as_tensor(sizes, device=device), 0)
    return torch.searchsorted(ends, torch.arange(n, device=device), right=True)
'''
HELPERS[CAT_HELPER] = '''def _mend_cat_chunks(outs, ids):
    # mend GM302: torch.cat of per-chunk outputs computed on every row: row r takes chunk ids[r]'s
    out = torch.zeros_like(outs[0])
    for i, o in enumerate(outs):
        out = torch.where((ids == i).reshape((-1,) + (1,) * (o.dim() - 1)), o, out)
    return out
'''


def _single(stmt: cst.CSTNode) -> Optional[cst.BaseSmallStatement]:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def _assign(stmt: cst.CSTNode) -> Optional[tuple[str, cst.BaseExpression]]:
    s = _single(stmt)
    if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
        return s.targets[0].target.value, s.value
    return None


def _dim0(c: cst.Call, at: int) -> bool:
    """The call's ``dim`` (keyword, or positional ``at``) is 0."""
    for i, a in enumerate(c.args):
        if (a.keyword is not None and a.keyword.value == "dim") or (a.keyword is None and i == at):
            return isinstance(a.value, cst.Integer) and a.value.value == "0"
    return False


def _split_of(value: cst.BaseExpression, sizes: str) -> Optional[cst.BaseExpression]:
    """``X.split(sizes, dim=0)`` -> X."""
    if (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "split"
            and value.args and isinstance(value.args[0].value, cst.Name) and value.args[0].value.value == sizes
            and value.args[0].keyword is None and _dim0(value, 1)):
        return value.func.value
    return None


class _Pattern:
    def __init__(self, split_stmt, x, chunks, outs, loop, cat_stmt, result):
        self.split_stmt, self.x, self.chunks, self.outs = split_stmt, x, chunks, outs
        self.loop, self.cat_stmt, self.result = loop, cat_stmt, result


def _find(an: Analysis, fn: cst.FunctionDef, sizes: str) -> Optional[_Pattern]:
    """``fn``'s split / append loop / cat on the parameter ``sizes``, or None."""
    if sizes not in FunctionFacts(an, fn).params or not isinstance(fn.body, cst.IndentedBlock):
        return None
    body = list(fn.body.body)
    for k, stmt in enumerate(body[:-3]):
        a = _assign(stmt)
        x = _split_of(a[1], sizes) if a else None
        if x is None:
            continue
        chunks = a[0]
        init, loop, cat = _assign(body[k + 1]), body[k + 2], _assign(body[k + 3])
        if not (init and isinstance(init[1], cst.List) and not init[1].elements and isinstance(loop, cst.For)
                and isinstance(loop.target, cst.Name) and cat and isinstance(cat[1], cst.Call)
                and full_name(cat[1].func) == "torch.cat" and cat[1].args
                and isinstance(cat[1].args[0].value, cst.Name) and cat[1].args[0].value.value == init[0]
                and _dim0(cat[1], 1)):
            continue
        outs, i = init[0], loop.target.value
        inner = list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []
        s = _single(inner[0]) if len(inner) == 1 else None
        app = s.value if isinstance(s, cst.Expr) else None
        if not (isinstance(app, cst.Call) and code(app.func) == f"{outs}.append" and len(app.args) == 1):
            continue
        value = app.args[0].value
        if f"{chunks}[{i}]" not in code(value).replace(" ", ""):
            continue
        if reduction_over(value, lambda e: True):
            continue
        # L and O are read nowhere but here
        rest = [code(st) for j, st in enumerate(body) if j not in (k, k + 1, k + 2, k + 3)]
        if any(_mentions(r, chunks) or _mentions(r, outs) for r in rest):
            continue
        return _Pattern(stmt, x, chunks, outs, loop, body[k + 3], cat[0])
    return None


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}\b", text) is not None


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not ctx.wants("GM302") or ctx.lines is None:
        return result
    tolists: list[tuple[cst.SimpleStatementLine, str, cst.BaseExpression]] = []
    functions: list[cst.FunctionDef] = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, n: cst.SimpleStatementLine) -> None:
            a = _assign(n)
            v = a[1] if a else None
            if (isinstance(v, cst.Call) and not v.args and isinstance(v.func, cst.Attribute)
                    and v.func.attr.value == "tolist"):
                tolists.append((n, a[0], v.func.value))

        def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
            functions.append(n)

    an.module.visit(V())
    for stmt, name, receiver in tolists:
        start, end = an.span(stmt)
        if not ctx.covers(start, end):
            continue
        found = [p for fn in functions if (p := _find(an, fn, name)) is not None]
        if not found or not offer_unsafe(ctx, result, "GM302", start, COST, "keeping the split sizes a tensor (every chunk "
                                                             "computed on every row)"):
            continue
        site = Site("GM302", start, end, f"`{name}.tolist()` split sizes stay a tensor; each chunk's function runs "
                    "on every row and torch.where picks each row's chunk (unsafe: len(sizes) x the FLOPs)",
                    strategy="segments")
        same = isinstance(receiver, cst.Name) and receiver.value == name

        def drop(updated: cst.SimpleStatementLine, same=same):
            if same:
                return cst.RemovalSentinel.REMOVE
            a = updated.body[0]
            return updated.with_changes(body=[a.with_changes(value=a.value.func.value)])

        result.edits.append(Edit(stmt, drop, site, needs_torch=False))
        for p in found:
            _pattern_edits(p, name, result)
    return result


def _pattern_edits(p: _Pattern, sizes: str, result: Plan) -> None:
    def build_split(updated: cst.SimpleStatementLine, p=p):
        rows = cst.parse_statement(f"{ROWS} = {IDS_HELPER}({sizes}, {code(p.x)}.shape[0], {code(p.x)}.device)\n")
        every = cst.parse_statement(f"{p.chunks} = [{code(p.x)}] * len({sizes})\n")
        return cst.FlattenSentinel([rows.with_changes(leading_lines=updated.leading_lines), every])

    def build_cat(updated: cst.SimpleStatementLine, p=p):
        a = updated.body[0]
        return updated.with_changes(body=[a.with_changes(value=call(CAT_HELPER, cst.Name(p.outs), cst.Name(ROWS)))])

    result.edits.append(Edit(p.split_stmt, build_split, None, helpers=(IDS_HELPER,)))
    result.edits.append(Edit(p.cat_stmt, build_cat, None, helpers=(CAT_HELPER,)))


_SPLIT = '''import torch
import torch.nn.functional as F


class Experts(torch.nn.Module):
    def forward(self, inputs, expert_size):
        input_list = inputs.split(expert_size, dim=0)
        output_list = []
        for i in range(self.num_experts):
            output_list.append(F.linear(input_list[i], self.weight[i]))
        results = torch.cat(output_list, dim=0)
        return results


class Gate(torch.nn.Module):
    def forward(self, gates):
        expert_size = gates.long().sum(0)
        expert_size = expert_size.tolist()
        order = gates.argmax(-1).sort(0)[1]
        return order, expert_size
'''

# (before, after, lines): applied with --unsafe-fixes at the .tolist() line
UNSAFE_FIXED = [
    (
        _SPLIT,
        _SPLIT.replace("import torch.nn.functional as F\n", "import torch.nn.functional as F\n" + "\n\n"
                       + HELPERS[IDS_HELPER] + "\n\n" + HELPERS[CAT_HELPER])
        .replace("        input_list = inputs.split(expert_size, dim=0)\n",
                 "        _mend_rows = _mend_chunk_ids(expert_size, inputs.shape[0], inputs.device)\n"
                 "        input_list = [inputs] * len(expert_size)\n")
        .replace("torch.cat(output_list, dim=0)", "_mend_cat_chunks(output_list, _mend_rows)")
        .replace("        expert_size = expert_size.tolist()\n", ""),
        {18},
    ),
]
# left alone even with --unsafe-fixes: (source, lines)
UNSAFE_NEGATIVE = [
    (_SPLIT.replace("F.linear(input_list[i], self.weight[i])", "F.softmax(input_list[i], dim=0)"), {18}),  # across rows
    (_SPLIT.replace("        return results\n", "        return results, input_list\n"), {18}),  # chunks escape
    (_SPLIT.replace("def forward(self, inputs, expert_size)", "def forward(self, inputs, sizes)")
     .replace("split(expert_size", "split(sizes"), {18}),  # no function splits by that name
    (_SPLIT.replace("dim=0)\n        output_list", "dim=1)\n        output_list"), {18}),  # not rows
]

FIXED: list = []
NEGATIVE: list = []
