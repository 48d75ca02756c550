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
work at all: docs/real-models.md, "Unbacked scalars"). The fake asks the frame's ShapeEnv for
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

import re
from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, FunctionFacts, Helper, Plan, Refusal, Site, code, \
    full_name, single
from rewrites.fixes.gm3_scalars import scalar_source
from rewrites.fixes.gm5_opaque import Refuse, _in_mend_helper, _module_names, _wrapped, site_names

RULES = ("GM301", "GM302", "GM303")
ORDER = 25  # before gm3_scalars (30), whose refusal ("reaches Python code") this rewrite answers

RUNTIME = Helper('''def _mend_size_op(name, read, many=False):
    # mend: `read` (a tensor's value read back as a Python int, or with `many` a 1-D
    # tensor's values as a list of ints) as one custom op whose fake returns new
    # unbacked ints, so torch.compile keeps the graph whole without
    # capture_scalar_outputs; the torch._check lines after each call bound the int.
    # Made once per process: a file imported twice (verification's overlay) finds its
    # op in sys.modules.
    import sys
    import types

    if not hasattr(torch.library, "custom_op"):
        raise RuntimeError(
            f"{name}: this torch has no torch.library.custom_op (torch >= 2.4 has it)"
        )
    reg = sys.modules.get("_mend_size_ops")
    if reg is None:
        reg = types.ModuleType("_mend_size_ops")
        reg.ops = {}
        sys.modules[reg.__name__] = reg
    mine = (read.__code__.co_code, read.__code__.co_names)
    base, k = name, 0
    while name in reg.ops and reg.ops[name][1] != mine:
        # another file's read has this name (same stem, function, line): the next one
        k += 1
        name = f"{base}_{k}"
    if name in reg.ops:
        return reg.ops[name][0]

    def forward(t):
        return read(t)

    def fake(t):
        # the frame's ShapeEnv makes the symbol (new_dynamic_size() would refuse outside
        # fullgraph=True); its bounds are the torch._check calls at the site
        ctx = torch.library.get_ctx()
        env = ctx._shape_env
        new = ctx.new_dynamic_size if env is None else env.create_unbacked_symint
        if not many:
            return new()
        if t.dim() != 1:
            raise ValueError(
                f"{name} reads a 1-D tensor's values, not a {t.dim()}-D one's"
            )
        return [new() for _ in range(t.shape[0])]

    schema = "(Tensor t) -> SymInt[]" if many else "(Tensor t) -> SymInt"
    op = torch.library.custom_op(name, forward, mutates_args=(), schema=schema)
    op.register_fake(fake)
    reg.ops[name] = (op, mine)
    return op
''')

# calls whose positional arguments are sizes: a negative one raises in eager too
_SIZE_FUNCS = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn"})
_SIZE_METHODS = frozenset({"new_zeros", "new_ones", "new_empty"})


def custom_op_lacking() -> Optional[str]:
    """Why the installed torch cannot hold the op (None: it can): read from torch when the
    process has imported it, else from its version (the planner imports no torch)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        return None if hasattr(getattr(torch, "library", None), "custom_op") else \
            "this torch has no `torch.library.custom_op` (the unbacked read is one)"
    from graphmend.core.env import torch_version

    v = torch_version()
    nums = [int(x) for x in re.findall(r"\d+", v or "")[:2]]
    if len(nums) < 2 or tuple(nums) < (2, 4):
        return f"torch {v or '(not installed)'} is older than 2.4, which added `torch.library.custom_op`"
    return None


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


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if ctx.lines is None:
        # only where Dynamo broke: NumPy's `.item()` and `int()` of Python arithmetic read alike
        return result
    assigns: list[cst.Assign] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            if len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
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
        listed = _tolist(node.value)
        # a .tolist() at a line where Dynamo broke on it reads a tensor: the capture is the proof
        src = ("GM302", listed) if listed is not None else scalar_source(node.value, f.tensor_names(start))
        if src is None or not ctx.wants(src[0]):
            continue
        if src[0] == "GM303" and full_name(node.value.func) != "int":  # type: ignore[attr-defined]
            continue  # float(t) is never a size
        rule, tensor = src
        var = node.targets[0].target.value  # type: ignore[attr-defined]
        uses: list[cst.Name] = []

        class U(cst.CSTVisitor):
            def visit_Name(self, n: cst.Name) -> None:
                if n.value == var and an.span(n)[0] > end:
                    uses.append(n)

            def visit_Attribute(self, n: cst.Attribute) -> bool:
                n.value.visit(self)  # ``self.n`` is an attribute, not the local
                return False

        fn.body.visit(U())
        kinds = [(_list_use if listed is not None else _use)(an, u, var) for u in uses]
        if not any(k in ("size", "slice", "split", "returned") for k, _ in kinds):
            continue  # feeds no size or slice: not this family's (GM3's scalars keep it a tensor)
        try:
            # bound here only, or earlier as well (`sizes = t.sum(0)`, then `sizes = sizes.tolist()`)
            # outside a loop, where no earlier binding is read after this one
            again = [line for n, line, _ in f.bindings if n == var and line != start]
            if any(line > start for line in again) or again and an.in_loop(stmt):
                raise Refuse(f"`{var}` is bound more than once in the function")
            bad = [why for k, why in kinds if k == "bad"]
            if bad:
                raise Refuse(bad[0])
            missing = custom_op_lacking()
            if missing:
                raise Refuse(missing)
            stem, read_name, op_var = site_names(ctx.module, fn.name.value, start, taken, "the op")
        except Refuse as why:
            result.refusals.append(Refusal(rule, start, f"not kept as an unbacked int: {why}"))
            continue
        taken.update({read_name, op_var})
        # a list's sizes are checked by the split that takes them (eager raises there too)
        sized = listed is None and any(k == "size" for k, _ in kinds)
        read = {"GM301": "t.item()", "GM302": "t.tolist()", "GM303": "int(t)"}[rule]
        shown = code(node.value)
        shown = shown if len(shown) <= 30 else read.replace("t", "<...>", 1)
        what = ("split sizes,\n    # read by the custom op mend::{} as unbacked ints" if listed is not None else
                "a size or slice\n    # bound, read by the custom op mend::{} as an unbacked int").format(stem)
        helper = Helper(
            f"def {read_name}(t):\n"
            f"    # mend {rule}: {fn.name.value}'s `{shown}` (line {start}), {what}\n"
            f"    return {read}\n\n\n"
            + _wrapped(f"{op_var} = _mend_size_op(", [f'"mend::{stem}"', read_name]
                       + (["many=True"] if listed is not None else []), ")") + "\n")
        kept = "a list of unbacked ints" if listed is not None else "an unbacked int"
        site = Site(rule, start, end, f"`{var}` stays in the graph as {kept} (custom op mend::{stem}"
                    + (", torch._check(" + var + " >= 0)" if sized else "") + ")", strategy="unbacked")

        def build(updated: cst.SimpleStatementLine, var=var, op_var=op_var, tensor=tensor, sized=sized):
            call = cst.Call(cst.Name(op_var), [cst.Arg(tensor)])
            out = [updated.with_changes(body=[updated.body[0].with_changes(value=call)])]
            if sized:
                out.append(cst.parse_statement(f"torch._check({var} >= 0)\n"))
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
    Case(_LENGTHS, _LENGTHS.replace("import torch\n", "import torch\n\n\n" + RUNTIME.source + "\n\n"
                                    + _read("GM301", "module_pooled_5", "lengths.max().item()", 5, "t.item()"))
         .replace("    n = lengths.max().item()\n",
                  "    n = _mend_module_pooled_5_op(lengths.max())\n    torch._check(n >= 0)\n"), lines={5}),
    # int(t) bounding slices only (of a computed value: int() of an input specialises on it instead): no check (a slice clamps any int, negative or past the end)
    Case('''import torch


def pooled(x: torch.Tensor, k: torch.Tensor):
    n = int(k.sum())
    return x[n:], x[..., :n]  # head and tail
''', '''import torch


''' + RUNTIME.source + "\n\n" + _read("GM303", "module_pooled_5", "int(k.sum())", 5, "int(t)") + '''

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


''' + RUNTIME.source + "\n\n" + _read("GM303", "module_spread_5", "int(counts.sum())", 5, "int(t)")
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
CASES.append(Case(_MASKS, _MASKS.replace("import torch\n", "import torch\n\n\n" + RUNTIME.source + "\n\n"
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


CASES.append(Case(_ROUTER, _ROUTER.replace("import torch\n", "import torch\n\n\n" + RUNTIME.source + "\n\n"
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
