"""GM301 / GM303: a scalar read back from a tensor (``n = t.item()``, ``n = int(t)``) whose every
use is a size or a slice bound stays in the graph as an unbacked int, a SAFE fix::

    n = lengths.max().item()                  n = _mend_model_forward_12_op(lengths.max())
    y = x[:, :n].sum(1)               ->      torch._check(n >= 0)
    z = torch.arange(n)                       y = x[:, :n].sum(1)
                                              z = torch.arange(n)

The read becomes a custom op (``torch.library.custom_op``, named after the site
``mend::<module>_<function>_<line>``, registered once per process by ``_mend_size_op``)
whose fake implementation returns a new unbacked SymInt: Dynamo gets an int it cannot see,
Inductor lowers the sizes and slices symbolically, the graph does not break, and nothing
global is switched on (``capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` for
the whole program crash Longformer's compile on torch 2.13; scoped to a region they do not
work at all: docs/internals.md, "Data-dependent values"). The fake asks the frame's ShapeEnv for
the symbol itself, as torch's own ``device_mesh`` op does:
``torch.library.get_ctx().new_dynamic_size()`` refuses outside ``fullgraph=True`` (it reads
``allow_dynamic_output_shape_ops``), and a plain ``torch.compile`` is what mend verifies.

The bounds, each on its own line after the call, are the ones the original code already
required, so that no input it ran on now fails: ``torch._check(n >= 0)`` when a use is a size
(``torch.arange(n)`` or ``torch.arange(0, n)``, ``torch.zeros(n, d)``, ``x.new_zeros(n)``,
``repeat_interleave``'s ``output_size=n``, ``.expand(b, n)``: torchaudio's lengths-to-mask), which raises on a negative value in eager as well; none for a value that
only bounds slices, which a Python slice clamps (``x[:, :n]`` for any ``n``, negative or past
the end, and torch 2.13 lowers the unbacked slice with the same semantics). ``torch._check(n <= x.shape[d])`` is not added: it would make
a value past the end raise where the slice clamped. (``torch._check_is_size`` is deprecated
on torch 2.13 in favour of ``torch._check(n >= 0)``.)

Several reads bound by one statement (``t, h, w = (g[0].item() // m, g[1].item() // m, ...)``,
the grid of a vision-language model's rope index in Qwen2/2.5/3-VL, GLM-4V and their copies)
go through one op, each value its own unbacked int; a read floor-divided by an int literal or
an ``int`` parameter stays divided (eager computes the same ``int // k``). Any value of the
statement not kept so refuses the whole statement: its break would stay.

``sizes = t.tolist()`` (GM302, 1-D ``t``) is kept the same way, as a list of unbacked ints
(``_mend_size_op(..., many=True)``: the fake makes one per element), where every use of the
list is a split's sizes (``x.split(sizes, dim)``, ``torch.split(x, sizes)``), a size, or a
``return`` (ScatterMoE's router hands the list to the experts that split on it: its callers'
uses are checked by verification's re-trace, where a guard on a value is a new break). No
check line is added: ``split_with_sizes`` checks its sizes itself, eagerly and compiled.
Measured on the H200 (torch 2.11, docs/benchmarks.md): one graph for JetMoE, 0.39x the
original's time tiny and 0.97x at 2048 tokens in default mode; under ``reduce-overhead``
Inductor's CUDA-graph trees fail on the list (the partition after the op is handed it
whole), which ``mend fix --bench --bench-modes reduce-overhead`` reports as ``fails``.

Planned only at a line where Dynamo broke. Refused, with the reason: a value that also reaches
Python control flow (``if n > 0:``, a comparison), arithmetic producing a float (``n / 2``), a
print or a format string, ``range`` (a Python loop needs the count), or any other use where an
unbacked int would make Dynamo guard or specialise (``x.view(-1, n)``, ``return n``,
``n + 1``); a name bound more than once; a torch without ``torch.library.custom_op`` (per
site). A value that feeds no size or slice is
not this family's (GM3's scalars keep it a tensor).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Helper, Plan, Refusal, STATEMENT, Site, single
from rewrites.fixes.conditions import Refuse
from rewrites.fixes.facts import FunctionFacts
from rewrites.fixes.gm3_scalars import scalar_source
from rewrites.fixes.judgements import code, full_name
from rewrites.fixes.op_sites import _in_mend_helper, _module_names, _wrapped, site_names
from rewrites.fixes.runtime import custom_op_lacking, helper

RULES = ("GM301", "GM302", "GM303")
ORDER = 25  # before gm3_scalars (30), whose refusal ("reaches Python code") this rewrite answers

RUNTIME = helper("size_op", requires=("registry", "op_table"))

# calls whose positional arguments are sizes: a negative one raises in eager too
_SIZE_FUNCS = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn"})
_SIZE_METHODS = frozenset({"new_zeros", "new_ones", "new_empty"})


def _zero(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer) and node.evaluated_value == 0


def _use(an: Analysis, u: cst.Name, var: str) -> tuple[str, str]:
    """What a read of ``var`` is: ("size" | "slice", "") or ("bad", why)."""
    p = an.parent(u)
    where = f"line {an.span(u)[0]}"
    if isinstance(p, cst.Slice) and u is not p.step:
        return "slice", ""
    if isinstance(p, cst.Arg) and p.keyword is not None and p.keyword.value == "output_size" \
            and isinstance(an.parent(p), cst.Call) and "repeat_interleave" in code(an.parent(p).func):
        return "size", ""  # repeat_interleave's output_size (Kimi-K2.5's patch counts)
    call, arg = None, None
    if isinstance(p, cst.Arg) and p.keyword is None and not p.star:
        call, arg = an.parent(p), p
    elif isinstance(p, cst.Element) and isinstance(an.parent(p), (cst.Tuple, cst.List)):
        holder = an.parent(an.parent(p))
        if isinstance(holder, cst.Arg) and holder.keyword is None and not holder.star:
            call, arg = an.parent(holder), holder
    if isinstance(call, cst.Call):
        name = full_name(call.func) or ""
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
        direct = arg.value is u
        positional = [a for a in call.args if a.keyword is None]
        if name == "torch.arange" and direct and (len(positional) == 1 or len(positional) == 2 and arg is positional[1]
                                                   and _zero(positional[0].value)):
            return "size", ""  # torch.arange(n), torch.arange(0, n): n elements
        if name in _SIZE_FUNCS or method in _SIZE_METHODS:
            return "size", ""
        if method == "expand" and direct:
            # a target size: where it is not the tensor's own (unbacked) size, Dynamo guards
            # on it, a break verification's re-trace sees (a lengths-to-mask arange expanded
            # to (batch, n), as torchaudio's Conformer does)
            return "size", ""
        if name == "range" and direct:
            return "bad", f"it counts a Python `range` ({where}): the loop needs the value, Dynamo would specialise it"
        if name == "print":
            return "bad", f"it is printed ({where})"
        if name == "float" and direct:
            return "bad", f"it is made a float ({where})"
    n: Optional[cst.CSTNode] = u
    while n is not None and not isinstance(n, cst.BaseStatement):
        q = an.parent(n)
        if isinstance(q, (cst.If, cst.While)) and n is q.test or isinstance(q, cst.IfExp) and n is q.test \
                or isinstance(q, (cst.Comparison, cst.BooleanOperation)) or isinstance(q, cst.Assert):
            return "bad", f"its value reaches Python control flow ({where}): Dynamo would guard on the unbacked int"
        if isinstance(q, cst.FormattedStringExpression):
            return "bad", f"it is formatted into a string ({where})"
        n = q
    if isinstance(p, cst.BinaryOperation):
        other = p.right if p.left is u else p.left
        shown = code(p.with_changes(lpar=[], rpar=[]))
        if isinstance(p.operator, cst.Divide) or isinstance(other, cst.Float):
            return "bad", f"arithmetic on it produces a float (`{shown}`, {where})"
        return "bad", f"arithmetic on it (`{shown}`, {where}) is not a size or slice bound as written"
    return "bad", f"it is used where an unbacked int would make Dynamo guard or specialise ({where})"


_SPLIT_KEYWORDS = frozenset({"split_size_or_sections", "split_size", "split_sizes"})


def _tolist(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``t.tolist()`` -> t."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "tolist" \
            and not node.args:
        return node.func.value
    return None


def _list_use(an: Analysis, u: cst.Name, var: str) -> tuple[str, str]:
    """What a read of ``var`` (the list a ``.tolist()`` made) is: ("split" | "size" |
    "returned", "") or ("bad", why). A returned list's uses are its callers': verification's
    re-trace sees any guard they put on it (a new break, which rejects the fix)."""
    p = an.parent(u)
    if isinstance(p, cst.Return) or isinstance(p, cst.Element) and isinstance(an.parent(p), cst.Tuple) \
            and isinstance(an.parent(an.parent(p)), cst.Return):
        return "returned", ""
    call = an.parent(p) if isinstance(p, cst.Arg) and not p.star else None
    if isinstance(call, cst.Call):
        name = full_name(call.func) or ""
        positional = [a for a in call.args if a.keyword is None]
        keyword = p.keyword.value if p.keyword is not None else None  # type: ignore[union-attr]
        at = positional.index(p) if keyword is None else None
        if name in ("torch.split", "torch.split_with_sizes"):
            if keyword in _SPLIT_KEYWORDS or at == 1:
                return "split", ""
        elif isinstance(call.func, cst.Attribute) and call.func.attr.value in ("split", "split_with_sizes") \
                and (keyword in _SPLIT_KEYWORDS or at == 0):
            return "split", ""
    kind, why = _use(an, u, var)
    if kind == "slice":
        return "bad", f"a list bounds no slice (line {an.span(u)[0]})"
    return kind, why


def _targets(node: cst.Assign) -> list[tuple[str, cst.BaseExpression]]:
    """``n = <value>`` -> [(n, value)]; ``a, b = (<x>, <y>)`` -> [(a, x), (b, y)] (Qwen-VL's grid
    reads); anything else -> []."""
    if len(node.targets) != 1:
        return []
    target = node.targets[0].target
    if isinstance(target, cst.Name):
        return [(target.value, node.value)]
    value = node.value
    if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements) \
            and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements) \
            and all(isinstance(e, cst.Element) for e in value.elements):
        return [(t.value.value, v.value) for t, v in zip(target.elements, value.elements)]  # type: ignore[attr-defined]
    return []


def _int_parameter(fn: cst.FunctionDef, name: str) -> bool:
    """Whether ``name`` is a parameter of ``fn`` typed ``int`` or defaulting to an int literal."""
    params = fn.params
    for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
        if p.name.value == name:
            typed = p.annotation is not None and code(p.annotation.annotation) == "int"
            return typed or isinstance(p.default, cst.Integer)
    return False


def _floor_divided(value: cst.BaseExpression, fn: cst.FunctionDef) -> cst.BaseExpression:
    """``<read> // k`` with ``k`` an int literal or an int parameter -> the read (eager computes
    the same ``int // k`` on the op's int; compiled, an unbacked int divided stays one); else
    ``value``."""
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.FloorDivide):
        k = value.right
        if isinstance(k, cst.Integer) or isinstance(k, cst.Name) and _int_parameter(fn, k.value):
            return value.left
    return value


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if ctx.lines is None:
        # only where Dynamo broke: NumPy's `.item()` and `int()` of Python arithmetic read alike
        return result
    assigns: list[cst.Assign] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            if _targets(n):
                assigns.append(n)

    an.visit_covering(V(), ctx)
    taken = _module_names(an.module)
    facts: dict[int, FunctionFacts] = {}
    for node in assigns:
        stmt = an.parent(node)
        fn = an.enclosing_function(node)
        if fn is None or single(stmt) is not node or _in_mend_helper(an, fn):
            continue
        start, end = an.span(stmt)
        if not ctx.covers(start, end):
            continue
        f = facts.setdefault(id(fn), FunctionFacts(an, fn))
        pairs = _targets(node)
        # (var, rule, tensor read, whether a list) of each target a read binds
        reads: list[tuple[str, str, cst.BaseExpression, bool]] = []
        mixed = ""  # a target of several whose value reads a tensor in a form not kept
        for var, value in pairs:
            read = _floor_divided(value, fn)
            # a .tolist() at a line where Dynamo broke on it reads a tensor: the capture is the proof
            listed = _tolist(read) if len(pairs) == 1 and read is value else None
            src = ("GM302", listed) if listed is not None else scalar_source(read, f.tensor_names(start))
            if src is None or not ctx.wants(src[0]) \
                    or src[0] == "GM303" and full_name(read.func) != "int":  # type: ignore[attr-defined]
                # (float(t) is never a size)
                if len(pairs) > 1 and (".item()" in code(value) or ".tolist()" in code(value)):
                    mixed = mixed or f"`{var}` reads a tensor in a form not kept (`{code(value)}`)"
                continue
            reads.append((var, src[0], src[1], listed is not None))
        if not reads:
            continue
        rule, listed = reads[0][1], reads[0][3]
        kinds: dict[str, list[tuple[str, str]]] = {}
        for var, _, _, is_list in reads:
            uses: list[cst.Name] = []

            class U(cst.CSTVisitor):
                def visit_Name(self, n: cst.Name) -> None:
                    if n.value == var and an.span(n)[0] > end:
                        uses.append(n)

                def visit_Attribute(self, n: cst.Attribute) -> bool:
                    n.value.visit(self)  # ``self.n`` is an attribute, not the local
                    return False

            fn.body.visit(U())
            kinds[var] = [(_list_use if is_list else _use)(an, u, var) for u in uses]
        useful = [v for v in kinds if any(k in ("size", "slice", "split", "returned") for k, _ in kinds[v])]
        if not useful:
            continue  # feeds no size or slice: not this family's (GM3's scalars keep it a tensor)
        try:
            if mixed:
                raise Refuse(mixed)
            for var, _, _, _ in reads:
                # bound here only, or earlier as well (`sizes = t.sum(0)`, then `sizes = sizes.tolist()`)
                # outside a loop, where no earlier binding is read after this one
                again = [line for n, line, _ in f.bindings if n == var and line != start]
                if any(line > start for line in again) or again and an.in_loop(stmt):
                    raise Refuse(f"`{var}` is bound more than once in the function")
                bad = [why for k, why in kinds[var] if k == "bad"]
                if bad:
                    raise Refuse(bad[0])
                if var not in useful:
                    raise Refuse(f"`{var}` feeds no size or slice bound")
            missing = custom_op_lacking("the unbacked read")
            if missing:
                raise Refuse(missing)
            stem, read_name, op_var = site_names(ctx.module, fn.name.value, start, taken, "the op")
        except Refuse as why:
            result.refusals.append(Refusal(rule, start, f"not kept as an unbacked int: {why}"))
            continue
        taken.update({read_name, op_var})
        # a list's sizes are checked by the split that takes them (eager raises there too)
        sized = [var for var, _, _, is_list in reads if not is_list and any(k == "size" for k, _ in kinds[var])]
        read = {"GM301": "t.item()", "GM302": "t.tolist()", "GM303": "int(t)"}[rule]
        names = ", ".join(f"`{var}`" for var, _, _, _ in reads)
        if len(reads) == 1:
            shown = code(_floor_divided(pairs[0][1], fn))
            shown = f"`{shown}`" if len(shown) <= 30 else f"`{read.replace('t', '<...>', 1)}`"
        else:
            shown = names
        what = (" split sizes,\n    # read by the custom op mend::{} as unbacked ints" if listed else
                " a size or slice\n    # bound, read by the custom op mend::{} as an unbacked int" if len(reads) == 1 else
                "\n    # sizes or slice bounds, each read by the custom op mend::{} as an unbacked int").format(stem)
        helper = Helper(
            f"def {read_name}(t):\n"
            f"    # mend {rule}: {fn.name.value}'s {shown} (line {start}),{what}\n"
            f"    return {read}\n\n\n"
            + _wrapped(f"{op_var} = _mend_size_op(", [f'"mend::{stem}"', read_name]
                       + (["many=True"] if listed else []), ")") + "\n")
        kept = "a list of unbacked ints" if listed else "an unbacked int" if len(reads) == 1 else "unbacked ints"
        site = Site(rule, start, end, f"{names} stay{'s' if len(reads) == 1 else ''} in the graph as {kept} "
                    f"(custom op mend::{stem}" + "".join(f", torch._check({v} >= 0)" for v in sized) + ")",
                    strategy="unbacked", claims=STATEMENT)
        replaced = {var: tensor for var, _, tensor, _ in reads}

        def build(updated: cst.SimpleStatementLine, op_var=op_var, replaced=replaced, sized=sized, fn=fn):
            assign = updated.body[0]

            def through_op(var: str, value: cst.BaseExpression) -> cst.BaseExpression:
                if var not in replaced:
                    return value
                call = cst.Call(cst.Name(op_var), [cst.Arg(replaced[var])])
                read = _floor_divided(value, fn)
                return call if read is value else value.with_changes(left=call)  # type: ignore[attr-defined]

            target = assign.targets[0].target  # type: ignore[attr-defined]
            if isinstance(target, cst.Name):
                value = through_op(target.value, assign.value)  # type: ignore[attr-defined]
            else:
                value = assign.value.with_changes(elements=[  # type: ignore[attr-defined]
                    e.with_changes(value=through_op(t.value.value, e.value))
                    for t, e in zip(target.elements, assign.value.elements)])  # type: ignore[attr-defined]
            out = [updated.with_changes(body=[assign.with_changes(value=value)])]
            out += [cst.parse_statement(f"torch._check({var} >= 0)\n") for var in sized]
            return cst.FlattenSentinel(out)

        result.edits.append(Edit(stmt, build, site, helpers=(RUNTIME, helper)))
    return result


_LENGTHS = '''import torch


def pooled(x, lengths):
    n = lengths.max().item()
    return x[:, :n].sum(1) + torch.arange(n).sum()
'''


def _read(rule: str, stem: str, shown: str, line: int, read: str) -> str:
    return (f"def _mend_{stem}(t):\n"
            f"    # mend {rule}: pooled's `{shown}` (line {line}), a size or slice\n"
            f"    # bound, read by the custom op mend::{stem} as an unbacked int\n"
            f"    return {read}\n\n\n"
            f'_mend_{stem}_op = _mend_size_op("mend::{stem}", _mend_{stem})\n')


CASES = [
    # a size (arange) and a slice bound: the op, and `>= 0`, which arange required already
    Case(_LENGTHS, _LENGTHS.replace("import torch\n", "import torch\n\n\n" + RUNTIME.text + "\n\n"
                                    + _read("GM301", "module_pooled_5", "lengths.max().item()", 5, "t.item()"))
         .replace("    n = lengths.max().item()\n",
                  "    n = _mend_module_pooled_5_op(lengths.max())\n    torch._check(n >= 0)\n"), lines={5}),
    # int(t) bounding slices only (of a computed value: int() of an input specialises on it instead): no check (a slice clamps any int, negative or past the end)
    Case('''import torch


def pooled(x: torch.Tensor, k: torch.Tensor):
    n = int(k.sum())
    return x[n:], x[..., :n]  # head and tail
''', '''import torch


''' + RUNTIME.text + "\n\n" + _read("GM303", "module_pooled_5", "int(k.sum())", 5, "int(t)") + '''

def pooled(x: torch.Tensor, k: torch.Tensor):
    n = _mend_module_pooled_5_op(k.sum())
    return x[n:], x[..., :n]  # head and tail
''', lines={5}),
]
# refused, with the reason: every other use of the value
_REFUSED = [
    ("    if n > 0:\n        x = x * 2\n", "reaches Python control flow (line 6)"),
    ("    x = x / (n / 2)\n", "arithmetic on it produces a float (`n / 2`, line 6)"),
    ('    print("n", n)\n', "it is printed (line 6)"),
    ("    for _ in range(n):\n        x = x + 1\n", "it counts a Python `range` (line 6)"),
    ("    x = x.view(-1, n)\n", "where an unbacked int would make Dynamo guard or specialise (line 6)"),
    ("    n = n + 1\n", "`n` is bound more than once"),
]
CASES += [Case(_LENGTHS.replace("    return x[", extra + "    return x["), lines={5}, reason=why)
          for extra, why in _REFUSED]
CASES += [
    Case(_LENGTHS + "\n\ndef _mend_module_pooled_5():\n    pass\n", lines={5}, reason="a name collision"),
]
# repeat_interleave's output_size is a size too (Kimi-K2.5's patch counts, transformers 5)
CASES.append(Case('''import torch


def spread(counts):
    total = int(counts.sum())
    ids = torch.repeat_interleave(torch.arange(len(counts)), counts, output_size=total)
    return ids
''', '''import torch


''' + RUNTIME.text + "\n\n" + _read("GM303", "module_spread_5", "int(counts.sum())", 5, "int(t)")
    .replace("pooled's", "spread's") + '''

def spread(counts):
    total = _mend_module_spread_5_op(counts.sum())
    torch._check(total >= 0)
    ids = torch.repeat_interleave(torch.arange(len(counts)), counts, output_size=total)
    return ids
''', lines={5}))

# lengths to a padding mask, as torchaudio writes it twice (Conformer's ``int(....item())``
# expanded to (batch, n); Tacotron2's ``torch.arange(0, n)``): sizes, read from the tensor
_MASKS = '''import torch


def masks(lengths):
    max_length = int(torch.max(lengths).item())
    a = torch.arange(max_length, dtype=lengths.dtype).expand(lengths.shape[0], max_length) >= lengths[:, None]
    max_len = torch.max(lengths).item()
    b = torch.arange(0, max_len, dtype=lengths.dtype) < lengths[:, None]
    return a, b
'''
CASES.append(Case(_MASKS, _MASKS.replace("import torch\n", "import torch\n\n\n" + RUNTIME.text + "\n\n"
                                         + _read("GM303", "module_masks_5", "int(torch.max(lengths).item())", 5,
                                                 "int(t)").replace("pooled's", "masks's") + "\n\n"
                                         + _read("GM301", "module_masks_7", "torch.max(lengths).item()", 7,
                                                 "t.item()").replace("pooled's", "masks's"))
                  .replace("    max_length = int(torch.max(lengths).item())\n",
                           "    max_length = _mend_module_masks_5_op(torch.max(lengths))\n"
                           "    torch._check(max_length >= 0)\n")
                  .replace("    max_len = torch.max(lengths).item()\n",
                           "    max_len = _mend_module_masks_7_op(torch.max(lengths))\n    torch._check(max_len >= 0)\n"),
                  lines={5, 7}))
# (a start other than 0 is not n elements)
CASES.append(Case(_MASKS.replace("torch.arange(0, max_len", "torch.arange(1, max_len"), lines={7},
                  reason="`max_len` reaches Python code at line 8"))

# .tolist() of split sizes (JetMoE's router, transformers 5): a list of unbacked ints. The
# tensor it reads may be bound to the same name first; the list may be returned (its
# callers' uses are checked by verification's re-trace) or split on here. No check line:
# split_with_sizes checks its sizes itself, in eager and compiled alike.
_ROUTER = '''import torch


def route(x, gates):
    sizes = gates.long().sum(0)
    sizes = sizes.tolist()
    return x.split(sizes, dim=0), sizes
'''


def _list_read(stem: str, shown: str, line: int) -> str:
    return (f"def _mend_{stem}(t):\n"
            f"    # mend GM302: route's `{shown}` (line {line}), split sizes,\n"
            f"    # read by the custom op mend::{stem} as unbacked ints\n"
            f"    return t.tolist()\n\n\n"
            + _wrapped(f"_mend_{stem}_op = _mend_size_op(", [f'"mend::{stem}"', f"_mend_{stem}", "many=True"], ")")
            + "\n")


CASES.append(Case(_ROUTER, _ROUTER.replace("import torch\n", "import torch\n\n\n" + RUNTIME.text + "\n\n"
                                           + _list_read("module_route_6", "sizes.tolist()", 6))
                  .replace("    sizes = sizes.tolist()\n", "    sizes = _mend_module_route_6_op(sizes)\n"), lines={6}))
# refused: a list whose values reach Python, and an earlier binding a loop reads again
CASES += [Case(_ROUTER.replace("    return x.split", extra + "    return x.split"), lines={6}, reason=why)
          for extra, why in [("    first = sizes[0]\n", "where an unbacked int would make Dynamo guard or specialise"),
                             ('    print("sizes", sizes)\n', "it is printed (line 7)")]]
CASES.append(Case('''import torch


def route(x, gates):
    out = []
    for g in gates:
        sizes = g.long().sum(0)
        sizes = sizes.tolist()
        out.append(x.split(sizes, dim=0))
    return out
''', lines={8}, reason="`sizes` is bound more than once"))

# a vision-language model's grid read back three at a time, each divided by an int merge size
# and used as an arange's length (Qwen2/2.5/3-VL, GLM-4V, PaddleOCR-VL, transformers 5):
# one op for the statement, each value an unbacked int
_GRID = """import torch


def positions(grid_thw, temp_merge_size: int = 1, spatial_merge_size: int = 1):
    grid_t, grid_h, grid_w = (
        grid_thw[0].item() // temp_merge_size,
        grid_thw[1].item() // spatial_merge_size,
        grid_thw[2].item() // 2,
    )
    t, h, w = torch.meshgrid(torch.arange(grid_t), torch.arange(grid_h), torch.arange(grid_w), indexing="ij")
    return torch.stack([t, h, w]).reshape(3, -1)
"""
CASES.append(Case(_GRID, _GRID.replace("import torch\n", "import torch\n\n\n" + RUNTIME.text + "\n\n"
                                       + "def _mend_module_positions_5(t):\n"
                                       "    # mend GM301: positions's `grid_t`, `grid_h`, `grid_w` (line 5),\n"
                                       "    # sizes or slice bounds, each read by the custom op mend::module_positions_5 as an "
                                       "unbacked int\n"
                                       "    return t.item()\n\n\n"
                                       '_mend_module_positions_5_op = _mend_size_op(\n'
                                       '    "mend::module_positions_5", _mend_module_positions_5\n)\n')
                  .replace("grid_thw[0].item() //", "_mend_module_positions_5_op(grid_thw[0]) //")
                  .replace("grid_thw[1].item() //", "_mend_module_positions_5_op(grid_thw[1]) //")
                  .replace("grid_thw[2].item() //", "_mend_module_positions_5_op(grid_thw[2]) //")
                  .replace("    )\n    t, h, w", "    )\n    torch._check(grid_t >= 0)\n    torch._check(grid_h >= 0)\n"
                           "    torch._check(grid_w >= 0)\n    t, h, w"), lines={6, 7, 8}))
# refused: one of the three reaches Python control flow; a divisor that may be a float
CASES += [
    Case(_GRID.replace("    return torch.stack", "    if grid_w > 1:\n        h = h * 2\n    return torch.stack"),
         lines={6, 7, 8}, reason="reaches Python control flow (line 11)"),
    Case(_GRID.replace("temp_merge_size: int = 1", "temp_merge_size=1.0"), lines={6},
         reason="`grid_t` reads a tensor in a form not kept (`grid_thw[0].item() // temp_merge_size`)"),
]
