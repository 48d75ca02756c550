"""GM503 at a ``torch.unique_consecutive`` of per-row ids, an UNSAFE fix: per-run modules run
on every row.

(GM302's ``.tolist()`` split sizes, ScatterMoE's experts, are gm3_unbacked's: a list of
unbacked ints keeps one graph at no extra FLOPs, where a dense form would run every expert
on every row.)

X-MOD (in transformers 4) runs each run of rows sharing a language through that language's adapter::

    lang_ids, lang_lengths = torch.unique_consecutive(lang_ids, return_counts=True)
    ...
    split_hidden_states = torch.split(hidden_states, lang_lengths.tolist(), 0)
    lang_wise_outputs = []
    for i, (lang_id, split_hidden_state) in enumerate(zip(lang_ids, split_hidden_states)):
        lang = list(self.adapter_modules.keys())[int(lang_id.item())]
        lang_wise_outputs.append(self.adapter_modules[lang](split_hidden_state))
    hidden_states = torch.cat(lang_wise_outputs, 0)

Three breaks (the run lengths, ``.tolist()``, ``.item()``). The rewrite drops the
``unique_consecutive`` and runs every module on every row, row ``r`` taking the output of
module ``ids[r]`` (``_mend_rows_by_id``, ``torch.where``; the k-th key of the dict is id
k, as the ``list(self.M.keys())[...]`` lookup says)::

    hidden_states = _mend_rows_by_id(lang_ids, hidden_states, list(self.adapter_modules.values()))

Preconditions: the five statements in that shape in one function body (``zip`` or
``enumerate(zip(...))``; ``int(i.item())`` or ``i.item()``), the names they bind read
nowhere else after the ``unique_consecutive``, the per-row ids not re-bound in between, and
again rows mapped independently by each module (verification shows it). An id outside the
dict raised IndexError in the original; the dense form gives that row the first module's
output.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst
import libcst.matchers as m

from rewrites.fixes.base import Analysis, Case, Context, Edit, Helper, Plan, Site, offer_unsafe, single
from rewrites.fixes.judgements import code, full_name

RULES = ("GM503",)
ORDER = 70

COST_BY_ID = "every module then runs on every row (the number of modules x the FLOPs of the dispatch)"

BY_ID_HELPER = Helper('''def _mend_rows_by_id(row_ids, x, fns):
    # mend GM503: every module on every row; row r takes fns[row_ids[r]](x)[r] (the original
    # split the rows into runs of one id and ran each run through its module)
    out = fns[0](x)
    for k in range(1, len(fns)):
        pick = (row_ids == k).reshape((-1,) + (1,) * (out.dim() - 1))
        out = torch.where(pick, fns[k](x), out)
    return out
''')


def _assign(stmt: cst.CSTNode) -> Optional[tuple[str, cst.BaseExpression]]:
    s = single(stmt)
    if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
        return s.targets[0].target.value, s.value
    return None


def _dim0(c: cst.Call, at: int) -> bool:
    """The call's ``dim`` (keyword, or positional ``at``) is 0."""
    for i, a in enumerate(c.args):
        if (a.keyword is not None and a.keyword.value == "dim") or (a.keyword is None and i == at):
            return isinstance(a.value, cst.Integer) and a.value.value == "0"
    return False


def _collect_then_cat(init: cst.CSTNode, cat: cst.CSTNode) -> Optional[tuple[str, str]]:
    """``O = []`` and ``R = torch.cat(O, dim=0)`` -> (O, R)."""
    i, c = _assign(init), _assign(cat)
    if (i and isinstance(i[1], cst.List) and not i[1].elements and c and isinstance(c[1], cst.Call)
            and full_name(c[1].func) == "torch.cat" and c[1].args and isinstance(c[1].args[0].value, cst.Name)
            and c[1].args[0].value.value == i[0] and _dim0(c[1], 1)):
        return i[0], c[0]
    return None


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}\b", text) is not None


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if ctx.lines is None:
        return result  # only where Dynamo broke
    _plan_runs(an, ctx, result)
    return result


class _Runs:
    """The X-MOD shape: statement indices in the function body and what the rewrite names."""

    def __init__(self, first: int, split: int, x_ids: str, h: cst.BaseExpression, modules: str, result: str):
        self.first, self.split, self.x_ids, self.h = first, split, x_ids, h
        self.modules, self.result = modules, result


def _runs_header(stmt: cst.CSTNode) -> Optional[tuple[str, str, str]]:
    """``A, C = torch.unique_consecutive(X, return_counts=True)`` -> (A, C, X)."""
    s = single(stmt)
    if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Tuple)):
        return None
    els = s.targets[0].target.elements
    v = s.value
    if not (len(els) == 2 and all(isinstance(e.value, cst.Name) for e in els) and isinstance(v, cst.Call)
            and full_name(v.func) == "torch.unique_consecutive" and v.args and v.args[0].keyword is None
            and isinstance(v.args[0].value, cst.Name)):
        return None
    kw = {a.keyword.value: code(a.value) for a in v.args[1:] if a.keyword is not None}
    if len(kw) != len(v.args) - 1 or kw.get("return_counts") != "True" or set(kw) - {"return_counts", "dim"} \
            or kw.get("dim", "0") != "0":
        return None
    return els[0].value.value, els[1].value.value, v.args[0].value.value


def _split_by_counts(value: cst.BaseExpression, counts: str) -> Optional[cst.BaseExpression]:
    """``torch.split(H, C.tolist(), 0)`` / ``H.split(C.tolist(), dim=0)`` -> H."""
    if not isinstance(value, cst.Call) or not value.args:
        return None
    fn = full_name(value.func)
    args = list(value.args)
    if fn == "torch.split":
        h, args = args[0].value, args[1:]
    elif isinstance(value.func, cst.Attribute) and value.func.attr.value == "split":
        h = value.func.value
    else:
        return None
    if not args or code(args[0].value).replace(" ", "") != f"{counts}.tolist()" or args[0].keyword is not None:
        return None
    return h if _dim0(value.with_changes(args=args), 1) else None


def _runs_loop(loop: cst.CSTNode, ids: str, chunks: str, outs: str) -> Optional[tuple[str, set[str]]]:
    """``for [i,] (I, Q) in [enumerate(]zip(ids, chunks)[)]: K = list(M.keys())[int(I.item())];
    outs.append(M[K](Q))`` -> (M, the names it binds)."""
    if not isinstance(loop, cst.For) or loop.orelse is not None or not isinstance(loop.body, cst.IndentedBlock):
        return None
    it, target, bound = loop.iter, loop.target, set()
    if isinstance(it, cst.Call) and full_name(it.func) == "enumerate" and len(it.args) == 1 \
            and isinstance(target, cst.Tuple) and len(target.elements) == 2 \
            and isinstance(target.elements[0].value, cst.Name):
        bound.add(target.elements[0].value.value)
        it, target = it.args[0].value, target.elements[1].value
    if not (isinstance(it, cst.Call) and full_name(it.func) == "zip"
            and [code(a.value) for a in it.args] == [ids, chunks] and isinstance(target, cst.Tuple)
            and len(target.elements) == 2 and all(isinstance(e.value, cst.Name) for e in target.elements)):
        return None
    i, q = (e.value.value for e in target.elements)
    body = list(loop.body.body)
    key = _assign(body[0]) if len(body) == 2 else None
    app = single(body[1]) if len(body) == 2 else None
    if key is None or not isinstance(app, cst.Expr):
        return None
    hit = re.fullmatch(rf"list\((self\.\w+)\.keys\(\)\)\[(?:int\({i}\.item\(\)\)|{i}\.item\(\))\]",
                     code(key[1]).replace(" ", ""))
    if hit is None or code(app.value).replace(" ", "") != f"{outs}.append({hit.group(1)}[{key[0]}]({q}))":
        return None
    return hit.group(1), bound | {i, q, key[0]}


def _find_runs(fn: cst.FunctionDef) -> Optional[_Runs]:
    if not isinstance(fn.body, cst.IndentedBlock):
        return None
    body = list(fn.body.body)
    for k, stmt in enumerate(body):
        head = _runs_header(stmt)
        if head is None:
            continue
        ids, counts, x_ids = head
        for j in range(k + 1, len(body) - 3):
            a = _assign(body[j])
            h = _split_by_counts(a[1], counts) if a else None
            if h is None:
                continue
            collected = _collect_then_cat(body[j + 1], body[j + 3])
            loop = _runs_loop(body[j + 2], ids, a[0], collected[0]) if collected else None
            if loop is None:
                return None
            names = {ids, counts, a[0], collected[0]} | loop[1]
            others = [code(st) for n, st in enumerate(body) if n > k and n not in (j, j + 1, j + 2, j + 3)]
            if any(_mentions(o, name) for o in others for name in names):
                return None
            # the per-row ids must still be the per-row ids at the split
            if x_ids != ids and any(_mentions(code(st), x_ids) for st in body[k + 1:j]):
                return None
            return _Runs(k, j, x_ids, h, loop[0], collected[1])
        return None
    return None


def _plan_runs(an: Analysis, ctx: Context, result: Plan) -> None:
    if not ctx.wants("GM503"):
        return
    for fn in an.findall(m.FunctionDef(), ctx):
        r = _find_runs(fn)
        if r is None:
            continue
        body = list(fn.body.body)
        start, end = an.span(body[r.first])[0], an.span(body[r.split + 3])[1]
        if not ctx.covers(start, end) or not offer_unsafe(
                ctx, result, "GM503", start, COST_BY_ID, "running every module on every row, each row keeping its "
                "own module's output"):
            continue
        site = Site("GM503", start, end, f"runs of one id through `{r.modules}[...]` -> every module on every row, "
                    f"torch.where picks each row's (unsafe: {COST_BY_ID})", strategy="rows_by_id")

        def build(updated: cst.SimpleStatementLine, r=r):
            new = cst.parse_statement(f"{r.result} = {BY_ID_HELPER.name}({r.x_ids}, {code(r.h)}, "
                                      f"list({r.modules}.values()))\n")
            return new.with_changes(leading_lines=updated.leading_lines)

        result.edits.append(Edit(body[r.first], lambda _u: cst.RemovalSentinel.REMOVE, site))
        result.edits.append(Edit(body[r.split], build, None, helpers=(BY_ID_HELPER,)))
        for n in (r.split + 1, r.split + 2, r.split + 3):
            result.edits.append(Edit(body[n], lambda _u: cst.RemovalSentinel.REMOVE, None, needs_torch=False))


# transformers code, laid out at its ruff line-length; every rewrite of this family is unsafe
_HF = {"unsafe": True, "line_length": 119}

_RUNS = '''import torch
from torch import nn


class LangAdapter(nn.Module):
    def __init__(self, langs, hidden):
        super().__init__()
        self.adapter_modules = nn.ModuleDict({lang: nn.Linear(hidden, hidden) for lang in langs})
        self.norm = nn.LayerNorm(hidden)

    def forward(self, lang_ids, hidden_states):
        # runs of rows with one language go through that language's adapter together
        lang_ids, lang_lengths = torch.unique_consecutive(lang_ids, return_counts=True)
        residual = hidden_states
        hidden_states = self.norm(hidden_states)
        split_hidden_states = torch.split(hidden_states, lang_lengths.tolist(), 0)
        lang_wise_outputs = []
        for i, (lang_id, split_hidden_state) in enumerate(zip(lang_ids, split_hidden_states)):
            lang = list(self.adapter_modules.keys())[int(lang_id.item())]
            lang_wise_outputs.append(self.adapter_modules[lang](split_hidden_state))
        hidden_states = torch.cat(lang_wise_outputs, 0)
        return hidden_states + residual
'''

# the X-MOD adapter dispatch, at its break lines
CASES = [
    Case(_RUNS, _RUNS.replace("from torch import nn\n", "from torch import nn\n\n\n" + BY_ID_HELPER.source, 1)
         .replace("        # runs of rows with one language go through that language's adapter together\n"
                  "        lang_ids, lang_lengths = torch.unique_consecutive(lang_ids, return_counts=True)\n", "")
         .replace("""        split_hidden_states = torch.split(hidden_states, lang_lengths.tolist(), 0)
        lang_wise_outputs = []
        for i, (lang_id, split_hidden_state) in enumerate(zip(lang_ids, split_hidden_states)):
            lang = list(self.adapter_modules.keys())[int(lang_id.item())]
            lang_wise_outputs.append(self.adapter_modules[lang](split_hidden_state))
        hidden_states = torch.cat(lang_wise_outputs, 0)
""", "        hidden_states = _mend_rows_by_id(lang_ids, hidden_states, list(self.adapter_modules.values()))\n"),
         lines={13, 16, 19}, **_HF),
]
# left alone even with --unsafe-fixes
CASES += [
    Case(_RUNS.replace("        return hidden_states + residual", "        return hidden_states + residual, lang_lengths"),
         lines={13}, **_HF),  # the run lengths are read after
    Case(_RUNS.replace("        residual = hidden_states\n",
                       "        residual = hidden_states\n        lang_ids = lang_ids.flip(0)\n"),
         lines={13}, **_HF),  # the ids re-bound between
    Case(_RUNS.replace("self.adapter_modules[lang](split_hidden_state)",
                       "self.adapter_modules[lang](split_hidden_state).mean(0)"),
         lines={13}, **_HF),  # not the module's output as is
    Case(_RUNS.replace("return_counts=True)", "return_counts=True, dim=1)"), lines={13}, **_HF),  # runs along another dimension
    Case(_RUNS.replace("torch.split(hidden_states, lang_lengths.tolist(), 0)",
                       "torch.split(hidden_states, lang_lengths.tolist(), 1)"),
         lines={13}, **_HF),  # split along another dimension
]

