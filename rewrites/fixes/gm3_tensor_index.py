"""GM303: a 0-d integer tensor used as an index, ``x[i]``, a SAFE fix.

Python indexing reads a 0-d integer tensor as a Python int (``__index__``), so under
torch.compile ``x[i]`` is a graph break (``Data dependent operator``:
``aten._local_scalar_dense``) whenever ``i`` was computed in the graph: a timestep taken from
the schedule it loops over, ``index + 1``. Every diffusers scheduler that reads its
``alphas_cumprod`` at the timestep does it (DDIM, DDPM, LCM, TCD, UnCLIP)::

    alpha_prod_t = self.alphas_cumprod[timestep]

becomes::

    alpha_prod_t = _mend_index(self.alphas_cumprod, timestep)

with ``_mend_index`` (rewrites/fixes/runtime/index.py) defined once in the file. Eager code
indexes as written: the same view, the same values and errors. Compiled, a 0-d integer
tensor index becomes a one-element index (``x[i.reshape(1)].squeeze(0)``), which stays in
the graph and selects the same row with the same gradient (a copy, where eager gives a view:
verification's compiled-program check compares them). Any other index, or ``x`` that is not a
tensor (a list, a ``ModuleList``), is indexed as written.

Made only at a line where Dynamo read a tensor into Python there to index with it
(``Context.index_lines``: a GM303 break), on the subscripts of one computed index (a name, an
attribute, arithmetic, a call; not a constant, a slice or a tuple) that the statement reads,
never one it assigns to or deletes; and in the arms of a conditional expression or an ``if``
on a tensor (``Context.tensor_lines``: Dynamo broke on its condition first) whose index is a
name the condition tests, unless the condition reads only parameters annotated as Python
values. Such a name is a one-element tensor, and once ``torch.where`` (gm1_where) runs the arm
in the graph its subscript would read it back: DDIM's ``self.alphas_cumprod[prev_timestep] if
prev_timestep >= 0 else self.final_alpha_cumprod``, UnCLIP's ``if prev_timestep == t - 1:
beta = self.betas[t]``.
"""

from __future__ import annotations

import re

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Plan, Refusal, Site
from rewrites.fixes.facts import FunctionFacts, names_in
from rewrites.fixes.judgements import code
from rewrites.fixes.python_parts import python_only
from rewrites.fixes.runtime import helper

RULES = ("GM303",)
ORDER = 27  # an expression's own edit: gm1_where (80) rewrites a statement holding it around it
INDEX = helper("index")

_CONSTANTS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
              cst.FormattedString, cst.Ellipsis, cst.Tuple, cst.List, cst.Set, cst.Dict)


def _computed(node: cst.Subscript) -> bool:
    """``x[e]`` with one index ``e`` that may be a 0-d tensor: not a slice, a tuple or a constant."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index) or node.slice[0].slice.star:
        return False
    value = node.slice[0].slice.value
    while isinstance(value, cst.UnaryOperation):
        value = value.expression
    if isinstance(value, cst.Name):
        return value.value not in ("None", "True", "False")
    return not isinstance(value, _CONSTANTS)


class _Reads(cst.CSTVisitor):
    """Visits what a statement reads: a subscript it writes (``x[i] = v``, ``x[i] += v``,
    ``del x[i]``) stays as written."""

    def visit_AssignTarget(self, n: cst.AssignTarget) -> bool:
        return False

    def visit_AugAssign(self, n: cst.AugAssign) -> bool:
        n.value.visit(self)
        return False

    def visit_AnnAssign(self, n: cst.AnnAssign) -> bool:
        if n.value is not None:
            n.value.visit(self)
        return False

    def visit_Del(self, n: cst.Del) -> bool:
        return False


def _by_tested_name(test: cst.BaseExpression, arms: list[cst.CSTNode]) -> list[cst.Subscript]:
    """Subscripts in ``arms`` indexed by a name ``test`` reads. Where a tensor decided the
    branch, ``test`` is a one-element tensor, and so is a name it compares (``i >= 0``): an
    arm's ``x[i]`` reads ``i`` back too, once ``torch.where`` runs the arm in the graph."""
    tested = names_in(test)
    out: list[cst.Subscript] = []

    class V(_Reads):
        def visit_Subscript(self, n: cst.Subscript) -> None:
            index = n.slice[0].slice.value if _computed(n) else None  # type: ignore[attr-defined]
            if isinstance(index, cst.Name) and index.value in tested:
                out.append(n)

    for arm in arms:
        arm.visit(V())
    return out


def _written(an: Analysis, node: cst.Subscript) -> str:
    """How the row ``node`` reads is written in place, as source ("" if it is not): eager code's
    ``x[i]`` is a view of ``x``, the compiled ``_mend_index`` a copy, so a write through it
    (``x[i].mul_(2)``, ``row = x[i]`` then ``row += 1``) would reach ``x`` in one and not the other."""
    fn = an.enclosing_function(node)
    text = code(fn) if fn is not None else code(an.module)
    names = [re.escape(code(node))]
    assign = an.parent(node)
    if isinstance(assign, cst.Assign) and assign.value is node:  # ``row = x[i]``: the row by its name
        names += [re.escape(t.target.value) for t in assign.targets if isinstance(t.target, cst.Name)]
    for name in names:
        m = re.search(rf"(?<![\w.]){name}\s*(\.\w+_\(|\[[^\]]*\]\s*=(?!=)|(\*\*|//|>>|<<|[-+*/@%&|^])=)", text)
        if m:
            return m.group(0)
    return ""


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not (ctx.index_lines or ctx.tensor_lines) or not ctx.wants("GM303"):
        return result
    found: list[cst.Subscript] = []
    # the arms' subscripts by a name a tensor condition reads, by id(): covered by the condition's
    # line (an ``if``'s arms are statements of their own, which the walk does not enter)
    tested: dict[int, cst.Subscript] = {}

    class V(_Reads):
        def visit_IfExp(self, n: cst.IfExp) -> None:
            self.arms(n, n.test, [n.body, n.orelse])

        def visit_If(self, n: cst.If) -> None:
            self.arms(n, n.test, [n.body] + ([n.orelse] if n.orelse is not None else []))

        def arms(self, n: cst.CSTNode, test: cst.BaseExpression, arms: list[cst.CSTNode]) -> None:
            if an.span(test)[0] not in ctx.tensor_lines:
                return
            # a condition on parameters typed as Python values stays a branch (gm1_where says why)
            if not python_only(test, frozenset(FunctionFacts(an, an.enclosing_function(n)).python_params)):
                tested.update((id(s), s) for s in _by_tested_name(test, arms))

        def visit_Subscript(self, n: cst.Subscript) -> None:
            if _computed(n):
                found.append(n)

    an.visit_covering(V(), ctx)
    seen = {id(n) for n in found}
    for node in found + [n for i, n in tested.items() if i not in seen]:
        start, end = an.span(node)
        if id(node) not in tested and not (set(range(start, end + 1)) & ctx.index_lines and ctx.covers(start, end)):
            continue
        written = _written(an, node)
        if written:
            result.refusals.append(Refusal("GM303", start, f"`{code(node)}` is written in place (`{written}`): "
                                           "compiled, `_mend_index` gives a copy where eager code gives a view"))
            continue
        site = Site("GM303", start, end, f"`{code(node)}` -> _mend_index: a 0-d integer tensor index stays in the "
                    "graph under torch.compile (eager code indexes as written)", strategy="tensor_index")

        def build(updated: cst.Subscript) -> cst.Call:
            index = updated.slice[0].slice.value  # type: ignore[attr-defined]
            return cst.Call(cst.Name(INDEX.name), [cst.Arg(updated.value.with_changes(lpar=[], rpar=[])),
                                                   cst.Arg(index)], lpar=updated.lpar, rpar=updated.rpar)

        result.edits.append(Edit(node, build, site, helpers=(INDEX,)))
    return result


_DDIM = '''import torch


class Scheduler:
    def step(self, sample, timestep):
        prev_timestep = timestep - self.step_size
        alpha_prod_t = self.alphas_cumprod[timestep]
        alpha_prod_t_prev = self.alphas_cumprod[prev_timestep] if prev_timestep >= 0 else self.final
        self.counts[timestep] += 1
        return sample * alpha_prod_t / alpha_prod_t_prev
'''

_UNCLIP = '''import torch


class Scheduler:
    def variance(self, t, prev_timestep=None):
        if prev_timestep is None:
            prev_timestep = t - 1
        if prev_timestep == t - 1:
            beta = self.betas[t]
        else:
            beta = 1 - self.alphas_cumprod[t] / self.alphas_cumprod[prev_timestep]
        return beta
'''

_UNCLIP_WHERE = '''        beta = torch.where(
            prev_timestep == t - 1,
            _mend_index(self.betas, torch.where(prev_timestep == t - 1, t, 0)),
            (
                1
                - (
                    _mend_index(
                        self.alphas_cumprod,
                        torch.where(torch.logical_not(prev_timestep == t - 1), t, 0),
                    )
                    / torch.where(
                        torch.logical_not(prev_timestep == t - 1),
                        _mend_index(
                            self.alphas_cumprod,
                            torch.where(
                                torch.logical_not(prev_timestep == t - 1),
                                prev_timestep,
                                0,
                            ),
                        ),
                        1,
                    )
                )
            ),
        )
'''


def _mended(text: str) -> str:
    return text.replace("import torch\n", "import torch\n\n\n" + INDEX.source, 1)


CASES = [
    # diffusers' DDIM step: the timestep it was given, read from the schedule in the graph
    Case(_DDIM, _mended(_DDIM.replace("self.alphas_cumprod[timestep]", "_mend_index(self.alphas_cumprod, timestep)")),
         lines={7}, hints=("index",)),
    # and the index in an arm of a conditional expression (which gm1_where then rewrites)
    Case(_DDIM, _mended(_DDIM.replace("self.alphas_cumprod[prev_timestep]",
                                      "_mend_index(self.alphas_cumprod, prev_timestep)")),
         lines={8}, hints=("index",), line_length=119),  # diffusers' width
    # Dynamo broke on the condition first: a name it tests is a one-element tensor, and the arm's
    # subscript by it would read it back once gm1_where runs the arm in the graph
    Case(_DDIM, _mended(_DDIM.replace(
        "        alpha_prod_t_prev = self.alphas_cumprod[prev_timestep] if prev_timestep >= 0 else self.final\n",
        "        alpha_prod_t_prev = torch.where(\n            prev_timestep >= 0,\n            _mend_index(self.alphas_cumprod, "
        "torch.where(prev_timestep >= 0, prev_timestep, 0)),\n            self.final,\n        )\n")),
        lines={8}, hints=("tensor",), line_length=119),
    # and in an `if` statement's arms (UnCLIP's variance), which gm1_where makes one torch.where
    Case(_UNCLIP, _mended(_UNCLIP.replace('''        if prev_timestep == t - 1:
            beta = self.betas[t]
        else:
            beta = 1 - self.alphas_cumprod[t] / self.alphas_cumprod[prev_timestep]
''', _UNCLIP_WHERE)), lines={8}, hints=("tensor",)),
    # without Dynamo's word that the line read a tensor to index with: left alone
    Case(_DDIM, lines={7}),
    # the row written in place through a name: eager's view reaches the table, a copy would not
    Case(_DDIM.replace("        alpha_prod_t = self.alphas_cumprod[timestep]\n",
                       "        alpha_prod_t = self.alphas_cumprod[timestep]\n        alpha_prod_t.mul_(0.5)\n"),
         lines={7}, hints=("index",), reason="is written in place (`alpha_prod_t.mul_(`)"),
    # a subscript written to stays; a constant index is never a tensor
    Case(_DDIM.replace("self.counts[timestep] += 1", "self.counts[timestep] += self.weights[0]"), lines={9},
         hints=("index",)),
]
