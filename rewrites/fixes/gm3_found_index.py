"""GM501 / GM301: an index found with ``nonzero`` and read back as a Python int, the tail of
the function that finds it, stays in the graph as one unbacked int, a SAFE fix.

Every diffusers scheduler that steps through its own timesteps finds where a timestep is in
its schedule this way (``index_for_timestep``, copied into 18 scheduler files)::

    indices = (schedule_timesteps == timestep).nonzero()      # Dynamo breaks: data-dependent shape
    pos = 1 if len(indices) > 1 else 0
    return indices[pos].item()                                # and again: Tensor.item()

becomes::

    index = _mend_scheduler_index_for_timestep_5_op(schedule_timesteps == timestep)
    torch._check(index >= 0)
    return index

The lines from the ``nonzero`` to the function's end move, as written, into a module-level
function of one tensor (``t``, the ``nonzero``'s argument), and that function becomes the
custom op ``mend::<module>_<function>_<line>`` of GM301's unbacked reads
(``rewrites/fixes/runtime/size_op.py``): eager calls run the moved lines on the same tensor
and return the same int (or raise the same error); compiled, the op's fake gives Dynamo a new
unbacked int, so neither the ``nonzero`` nor the ``.item()`` breaks the graph. The check is a
fact of the value, not a new requirement: an element of ``nonzero``'s result is an index, never
negative (without it Dynamo breaks on the first use of the int as an index).

Made only where Dynamo said the ``nonzero`` line's output shape depends on data, and only
when every value the tail returns is an element of the ``nonzero``'s result read back
(``<v>[...].item()``, ``int(<v>[...])``, ``int(<v>[...].item())``, or a name only ever bound
to one), the tail does not bind ``<v>`` again, and it reads no other local of the function
(the op is given the one tensor): refused otherwise, with the name it reads (diffusers'
multistep schedulers fall back to ``len(self.timesteps) - 1``, which the op is not given).
Where the int goes after the return (a scheduler stores it as its step index and indexes its
sigmas with it) is the callers' affair, which verification's re-trace checks: a guard they
put on it is a new break, which rejects the fix.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes import gm3_unbacked
from rewrites.fixes.base import REGION, Analysis, Case, Context, Edit, Helper, Plan, Refusal, Site, single
from rewrites.fixes.conditions import Refuse
from rewrites.fixes.facts import FunctionFacts, names_in
from rewrites.fixes.judgements import code, full_name
from rewrites.fixes.op_sites import _in_mend_helper, _module_names, _wrapped, site_names
from rewrites.fixes.opaque_region import Unmovable, _bound
from rewrites.fixes.runtime import custom_op_lacking

RULES = ("GM501", "GM301")
ORDER = 3  # before gm5_opaque (5), which refuses the nonzero line (its result is read after it)


def _nonzero_of(value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``E.nonzero()`` / ``torch.nonzero(E)`` -> E (one tensor's indices, as an (n, dims) int64 tensor)."""
    if not isinstance(value, cst.Call):
        return None
    if isinstance(value.func, cst.Attribute) and value.func.attr.value == "nonzero" and not value.args:
        return value.func.value
    if full_name(value.func) == "torch.nonzero" and len(value.args) == 1 and value.args[0].keyword is None \
            and not value.args[0].star:
        return value.args[0].value
    return None


def _element(node: cst.BaseExpression, var: str) -> bool:
    """``var[...].item()``, ``int(var[...])`` or ``int(var[...].item())``: one element of
    ``nonzero``'s int64 result, read back as a Python int (an index: never negative)."""
    read = False  # read back into Python: an element alone is still a tensor
    if isinstance(node, cst.Call) and full_name(node.func) == "int" and len(node.args) == 1 \
            and node.args[0].keyword is None and not node.args[0].star:
        node, read = node.args[0].value, True  # of an int64 element, or of the int read back: the same int
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "item" \
            and not node.args:
        node, read = node.func.value, True
    if not read or not isinstance(node, cst.Subscript):
        return False
    while isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Name) and node.value == var


def _returns(tail: list[cst.CSTNode]) -> list[cst.Return]:
    found: list[cst.Return] = []

    class V(cst.CSTVisitor):
        def visit_Return(self, n: cst.Return) -> None:
            found.append(n)

        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            return False

    for s in tail:
        s.visit(V())
    return found


def _bindings(tail: list[cst.CSTNode], name: str) -> list[Optional[cst.BaseExpression]]:
    """The values ``name`` is bound to in ``tail`` (None: a binding other than ``name = <value>``)."""
    values: list[Optional[cst.BaseExpression]] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                if isinstance(t.target, cst.Name) and t.target.value == name:
                    values.append(n.value if len(n.targets) == 1 else None)
                elif name in names_in(t.target):
                    values.append(None)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            if isinstance(n.target, cst.Name) and n.target.value == name:
                values.append(None)

    for s in tail:
        s.visit(V())
    return values


def _not_an_index(tail: list[cst.CSTNode], var: str) -> Optional[str]:
    """Why a value the tail returns may not be an element of ``var`` read back, else None."""
    for r in _returns(tail):
        value = r.value
        if value is None:
            return "a `return` there gives no value"
        if _element(value, var):
            continue
        if not isinstance(value, cst.Name):
            return f"it returns `{code(value)}`, not an element of `{var}` read back"
        for bound in _bindings(tail, value.value) or [None]:
            if bound is None or not _element(bound, var):
                shown = f"`{code(bound)}`" if bound is not None else "a value it cannot follow"
                return f"`{value.value}`, which it returns, is bound to {shown}, not an element of `{var}` read back"
    return None


def _blocked(tail: list[cst.CSTNode]) -> Optional[str]:
    """What in ``tail`` a function of its own would not run alike, else None."""

    class V(Unmovable):
        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            self.why.append("it defines a class")
            return False

    v = V()
    for s in tail:
        s.visit(v)
    return f"the lines after it cannot move into a function of their own: {v.why[0]}" if v.why else None


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if ctx.lines is None or not ctx.wants("GM501"):
        return result  # only where Dynamo said the nonzero's shape depends on data
    taken = _module_names(an.module)
    for fn in an.findall(cst.FunctionDef, ctx):
        if _in_mend_helper(an, fn) or not isinstance(fn.body, cst.IndentedBlock):
            continue
        body = list(fn.body.body)
        for k, stmt in enumerate(body[:-1]):
            s = single(stmt)
            if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name)):
                continue
            mask = _nonzero_of(s.value)
            start = an.span(stmt)[0]
            if mask is None or start not in ctx.shape_lines:
                continue
            var, tail = s.targets[0].target.value, body[k + 1:]
            end = an.span(tail[-1])[1]
            if not isinstance(single(tail[-1]), cst.Return):
                continue  # not a function's tail that ends in what it returns: not this family's
            try:
                # an element of a re-bound `var` may be anything (`indices = indices - 5`)
                why = f"`{var}` is bound again after it" if var in _bound(tail) else \
                    _not_an_index(tail, var) or _blocked(tail)
                if why:
                    raise Refuse(why)
                if fn.asynchronous is not None:
                    raise Refuse("the function is a coroutine")
                if an.enclosing_function(fn) is not None:
                    raise Refuse("the function is nested in another: the names it closes over are not visible to a "
                                 "module-level op")
                facts = FunctionFacts(an, fn)
                own = _bound(tail) | {var}
                local = sorted(n for n in set().union(*(names_in(t) for t in tail)) - own
                               if facts.defined_before(n, start))
                if local:
                    raise Refuse(f"the lines after it read `{local[0]}`, a local of the function the op is not "
                                 f"given (it reads `{var}` alone)")
                missing = custom_op_lacking("the index's read")
                if missing:
                    raise Refuse(missing)
                stem, read_name, op_var = site_names(ctx.module, fn.name.value, start, taken, "the op")
            except Refuse as why:
                result.refusals.append(Refusal("GM501", start, f"the index `{var}` finds not kept as an unbacked int: "
                                                               f"{why}"))
                continue
            taken.update({read_name, op_var})
            _plan_site(result, facts, stmt, s, mask, tail, (start, end), (stem, read_name, op_var))
    return result


def _plan_site(result: Plan, facts: FunctionFacts, stmt: cst.CSTNode, s: cst.Assign,
               mask: cst.BaseExpression, tail: list[cst.CSTNode], lines: tuple[int, int],
               names: tuple[str, str, str]) -> None:
    (start, end), (stem, read_name, op_var) = lines, names
    var = s.targets[0].target.value  # type: ignore[attr-defined]
    used = set().union(*(names_in(t) for t in tail)) | {var}
    param = next(p for p in ("t", "mask", "found") if p not in used)
    call = s.value  # `E.nonzero()` or `torch.nonzero(E)`, E now the parameter
    finder = call.with_changes(func=call.func.with_changes(value=cst.Name(param))) \
        if isinstance(call.func, cst.Attribute) else call.with_changes(args=[cst.Arg(cst.Name(param))])  # type: ignore[attr-defined]
    first = cst.SimpleStatementLine([s.with_changes(value=finder)])
    text = code(first) + "".join(code(t) for t in tail)
    indented = "".join(("    " + ln if ln.strip() else ln) for ln in text.splitlines(True))
    last = single(tail[-1]).value  # type: ignore[union-attr]
    local = facts.params | {n for n, _, _ in facts.bindings} | used
    out = last.value if isinstance(last, cst.Name) else next(n for n in ("index", "found_index", "mend_index")
                                                             if n not in local)
    helper = Helper(
        f"def {read_name}({param}):\n"
        f"    # mend GM501: {facts.fn.name.value}'s index found by `nonzero` (lines {start}-{end}), read\n"
        f"    # back by the custom op mend::{stem} as an unbacked int\n"
        f"{indented}\n\n"
        + _wrapped(f"{op_var} = _mend_size_op(", [f'"mend::{stem}"', read_name], ")") + "\n")
    site = Site("GM501", start, end, f"the index `{var}` finds stays in the graph as an unbacked int (custom op "
                f"mend::{stem} runs lines {start}-{end}, torch._check({out} >= 0))", strategy="unbacked",
                claims=REGION)

    # `(a == b).nonzero()`'s parentheses are not the call's: `op(a == b)`
    arg = mask if isinstance(mask, (cst.Tuple, cst.GeneratorExp)) else mask.with_changes(lpar=[], rpar=[])

    def build(updated: cst.SimpleStatementLine, out=out) -> cst.FlattenSentinel:
        call = cst.parse_statement(f"{out} = {op_var}({code(arg)})\n")
        return cst.FlattenSentinel([call.with_changes(leading_lines=updated.leading_lines),
                                    cst.parse_statement(f"torch._check({out} >= 0)\n"),
                                    cst.parse_statement(f"return {out}\n")])

    result.edits.append(Edit(stmt, build, site, helpers=(gm3_unbacked.RUNTIME, helper)))
    for t in tail:
        result.edits.append(Edit(t, lambda _u: cst.RemovalSentinel.REMOVE, None, needs_torch=False))


_SCHEDULER = '''import torch


class Scheduler:
    def index_for_timestep(self, timestep, schedule_timesteps=None):
        if schedule_timesteps is None:
            schedule_timesteps = self.timesteps
        indices = (schedule_timesteps == timestep).nonzero()

        # the first step takes the second match, where there are two
        pos = 1 if len(indices) > 1 else 0
        return indices[pos].item()
'''

_READ = '''def _mend_module_index_for_timestep_8(t):
    # mend GM501: index_for_timestep's index found by `nonzero` (lines 8-12), read
    # back by the custom op mend::module_index_for_timestep_8 as an unbacked int
    indices = t.nonzero()

    # the first step takes the second match, where there are two
    pos = 1 if len(indices) > 1 else 0
    return indices[pos].item()


_mend_module_index_for_timestep_8_op = _mend_size_op(
    "mend::module_index_for_timestep_8", _mend_module_index_for_timestep_8
)
'''


def _fixed(read: str) -> str:
    """``_SCHEDULER`` as the fix leaves it, the moved lines ending in ``read``."""
    return _SCHEDULER.replace("import torch\n", "import torch\n\n\n" + gm3_unbacked.RUNTIME.text + "\n\n" +
                              _READ.replace("return indices[pos].item()", read)).replace('''        indices = (schedule_timesteps == timestep).nonzero()

        # the first step takes the second match, where there are two
        pos = 1 if len(indices) > 1 else 0
        return indices[pos].item()
''', '''        index = _mend_module_index_for_timestep_8_op(schedule_timesteps == timestep)
        torch._check(index >= 0)
        return index
''')


CASES = [
    # diffusers' index_for_timestep (Euler, Heun, LMS, DPM-SDE, ... 18 scheduler files)
    Case(_SCHEDULER, _fixed("return indices[pos].item()"), lines={8, 12}, hints=("shape",)),
    # the index read back through int() too (diffusers' FlowMatchLCM)
    Case(_SCHEDULER.replace("return indices[pos].item()", "return int(indices[pos].item())"),
         _fixed("return int(indices[pos].item())"), lines={8, 12}, hints=("shape",)),
    # without Dynamo's word that the line's shape depends on data: left alone
    Case(_SCHEDULER, lines={8, 12}),
    # diffusers' multistep schedulers: a fallback the op is not given (an index that may be -1)
    Case(_SCHEDULER.replace('''        pos = 1 if len(indices) > 1 else 0
        return indices[pos].item()
''', '''        if len(indices) == 0:
            step_index = len(self.timesteps) - 1
        else:
            step_index = indices[0].item()
        return step_index
'''), lines={8}, hints=("shape",), reason="`step_index`, which it returns, is bound to `len(self.timesteps) - 1`"),
    # a local the op is not given
    Case(_SCHEDULER.replace("pos = 1 if len(indices) > 1 else 0", "pos = 1 if len(indices) > 1 else self.start"),
         lines={8}, hints=("shape",), reason="the lines after it read `self`"),
    # an element of the indices changed after the nonzero is not an index
    Case(_SCHEDULER.replace("        pos = 1", "        indices = indices - 5\n        pos = 1"), lines={8},
         hints=("shape",), reason="`indices` is bound again after it"),
    # what a function of its own would not run alike
    Case(_SCHEDULER.replace("        pos = 1", "        def later():\n            return 0\n\n        pos = 1"), lines={8},
         hints=("shape",), reason="cannot move into a function of their own: it defines a function"),
    # an element not read back is a tensor, where the op would give an int
    Case(_SCHEDULER.replace("return indices[pos].item()", "return indices[pos]"), lines={8},
         hints=("shape",), reason="it returns `indices[pos]`, not an element of `indices` read back"),
    # a float is not an index
    Case(_SCHEDULER.replace("return indices[pos].item()", "return indices.float().mean().item()"), lines={8},
         hints=("shape",), reason="it returns `indices.float().mean().item()`"),
]
