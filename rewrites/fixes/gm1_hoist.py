"""GM101: a tensor ``if`` whose arms hold Python structure and re-register a buffer.

transformers 4.52's LongRoPE update (Phi-3, Phi-4-mini) picks the long or the short
frequency table on a tensor (``seq_len = torch.max(position_ids) + 1``), and each arm mixes
Python bookkeeping with the choice itself::

    if seq_len > original_max_position_embeddings:
        if not hasattr(self, "long_inv_freq"):          # a lazy cache
            self.long_inv_freq, _ = self.rope_init_fn(...)
        self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
    else:
        self.original_inv_freq = self.original_inv_freq.to(device)  # follows the device
        self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)

``torch.where`` cannot take those arms as they are (a nested ``if``, attribute stores), so
the Python part is hoisted in front and only the tensor part is selected::

    if not hasattr(self, "long_inv_freq"):
        self.long_inv_freq, _ = self.rope_init_fn(...)
    self.original_inv_freq = self.original_inv_freq.to(device)
    self.register_buffer("inv_freq", torch.where(seq_len > original_max_position_embeddings,
                         self.long_inv_freq, self.original_inv_freq), persistent=False)

What may be hoisted, arm by arm (the first arm's statements first): a lazy cache, ``if not
hasattr(self, "a"):`` (or ``getattr(self, "a", None) is None``, ``self.a is None``) whose
body only stores ``self.a`` (``_`` may take the rest of a tuple); and a device move of an
attribute onto itself, ``self.a = self.a.to(device)`` (``.cpu()``, ``.cuda()``,
``.contiguous()``). Both only ever give the attribute the value eager code would give it
when it gets there: the cache is filled on the first call instead of the first call that
takes its arm (so the call that fills it, which mend cannot see into, runs once, earlier;
verification runs both arms), and the move keeps the values. That holds only for a fill
that reads nothing of the call: a cache whose value reads a parameter or a local computed
from one (``seq_len=seq_len``: a table scaled for the sequence that first needs it, as
dynamic NTK scaling builds it) would be filled from the first call of any length -- a short
prompt -- and reused for every later long one; it is refused, naming the value. A device
(``device``, ``x.device``) is no such value: it moves the table, it does not change it. Each arm must then end in
``self.register_buffer("b", <value>, ...)``, the same buffer and keywords in both, with a
pure value that calls nothing outside torch; a plain ``if`` with no ``else``, an ``elif``,
any other statement, two arms that touch the same attribute, a hoisted statement that
writes what the condition or the other arm's value reads, or one that touches the buffer
itself is refused with the reason.

Why the buffer takes a new tensor and is not written in place
(``self.inv_freq.copy_(torch.where(...))``, which transformers 5.x does): in 4.52 the
buffer IS ``self.original_inv_freq`` (``self.original_inv_freq = self.inv_freq`` in
``__init__``), so an in-place write of the long table would overwrite the short one for
every later call; and a module cast to bfloat16 keeps a bfloat16 buffer where eager code
re-registers the float32 table.

Two details keep the second call from recompiling (on Phi-3 with transformers 4.52.4,
compiles per call 1 0 1 0 0 0 0 0 over short/short/long/long/short/short/long/short, the
original 5 0 5 0 1 0 0 0, the third compile being the new sequence length; verification's
re-trace over calls of other sizes refuses a fix that adds a recompile):

* a lazy cache's test becomes ``torch.compiler.is_compiling() or <test>``: compiled, the
  table is made on every call (in the graph, a few ops), since Dynamo would guard on the
  ``hasattr`` and the first call fills the attribute; eager code fills it once, as written;
* the buffer is stored as ``self._buffers["b"] = torch.where(...)``, then
  ``self._non_persistent_buffers_set.add("b")`` (``discard`` for a persistent one): what
  ``register_buffer`` does for a name that is already a buffer, without its checks, which
  read the old buffer and made Dynamo guard on ``self.original_inv_freq is
  self._buffers['inv_freq']`` (true until the first call). A ``persistent=`` that is not a
  literal keeps ``register_buffer`` (and its recompile). What the form gives up: the
  checks themselves (a name that is an attribute but not yet a buffer raises there) and
  global buffer-registration hooks, which no model code installs.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import STATEMENT, Analysis, Case, Context, Edit, Plan, Refusal, Site
from rewrites.fixes.conditions import Refuse, convert_condition
from rewrites.fixes.facts import FunctionFacts, names_in
from rewrites.fixes.judgements import call, calls_outside_torch, code, impurity, strip_parens
from rewrites.fixes.where_arms import block_stmts

RULES = ("GM101",)
ORDER = 79  # before gm1_where (80), which refuses these arms ("an arm holds a nested `if` block")

# methods that move a tensor without changing its values
_MOVES = frozenset({"to", "cpu", "cuda", "contiguous"})


def _self_attr(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _self_attrs(node: cst.CSTNode) -> set[str]:
    """Every ``self.x`` the expression reads."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> None:
            a = _self_attr(n)
            if a is not None:
                found.add(a)

    node.visit(V())
    return found


def _string(node: cst.BaseExpression) -> Optional[str]:
    node = strip_parens(node)
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    return None


def _cache_attr(test: cst.BaseExpression) -> Optional[str]:
    """``not hasattr(self, "a")`` / ``getattr(self, "a", None) is None`` / ``self.a is None``."""
    t = strip_parens(test)
    if isinstance(t, cst.UnaryOperation) and isinstance(t.operator, cst.Not):
        inner = strip_parens(t.expression)
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "hasattr" \
                and len(inner.args) == 2 and code(inner.args[0].value) == "self":
            return _string(inner.args[1].value)
        return None
    if isinstance(t, cst.Comparison) and len(t.comparisons) == 1 and isinstance(t.comparisons[0].operator, cst.Is) \
            and code(t.comparisons[0].comparator) == "None":
        left = strip_parens(t.left)
        if _self_attr(left) is not None:
            return _self_attr(left)
        if isinstance(left, cst.Call) and isinstance(left.func, cst.Name) and left.func.value == "getattr" \
                and len(left.args) == 3 and code(left.args[0].value) == "self" and code(left.args[2].value) == "None":
            return _string(left.args[1].value)
    return None


class _Part:
    """What the hoisted statements of one arm write and read."""

    def __init__(self) -> None:
        self.writes: set[str] = set()
        self.reads: set[str] = set()
        self.stmts: list[cst.CSTNode] = []


def _store_targets(assign: cst.Assign, attr: str) -> bool:
    """``self.a = ...`` or ``self.a, _ = ...``: the store binds ``self.a`` and nothing else."""
    if len(assign.targets) != 1:
        return False
    t = assign.targets[0].target
    if _self_attr(t) == attr:
        return True
    if isinstance(t, (cst.Tuple, cst.List)):
        els = [e.value for e in t.elements]
        return sum(_self_attr(e) == attr for e in els) == 1 and all(
            _self_attr(e) == attr or (isinstance(e, cst.Name) and e.value == "_") for e in els)
    return False


def _move(stmt: cst.CSTNode) -> Optional[str]:
    """``self.a = self.a.to(device)`` (a device move onto itself): the attribute, else None."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return None
    a = stmt.body[0]
    if len(a.targets) != 1 or _self_attr(a.targets[0].target) is None:
        return None
    attr = _self_attr(a.targets[0].target)
    v = a.value
    while isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in _MOVES:
        if v.func.attr.value == "to" and not _device_only(v):
            return None
        v = v.func.value
        if _self_attr(v) == attr:
            return attr
    return None


def _device_only(c: cst.Call) -> bool:
    """``.to(device)`` / ``.to(x.device)`` / ``.to(device=...)``: a dtype would change the values."""
    if len(c.args) != 1:
        return False
    arg = c.args[0]
    if arg.keyword is not None:
        return arg.keyword.value == "device"
    v = strip_parens(arg.value)
    return (isinstance(v, cst.Name) and "device" in v.value) or (isinstance(v, cst.Attribute) and v.attr.value == "device")


def _without_devices(node: cst.CSTNode) -> cst.CSTNode:
    """``node`` with each ``<expr>.device`` read as the name ``device`` (a device is no value)."""

    class T(cst.CSTTransformer):
        def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
            return cst.Name("device") if updated.attr.value == "device" else updated

    return node.visit(T())


def _of_this_call(value: cst.CSTNode, facts: FunctionFacts, seen: frozenset = frozenset()) -> Optional[str]:
    """The first name ``value`` reads that holds a value of this call: a parameter, or a local
    bound (anywhere in the function) to an expression that reads one; a device is none."""
    for name in sorted(names_in(value)):
        if name == "self" or "device" in name or name in seen:
            continue
        if name in facts.params:
            return name
        for _, _, bound in (b for b in facts.bindings if b[0] == name):
            if bound is None or _of_this_call(bound, facts, seen | {name}):
                return name
    return None


def _set_outside(fn: cst.FunctionDef, node: cst.If) -> set[str]:
    """The ``self.x`` the function assigns outside ``node``: values each call may change."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_If(self, n: cst.If) -> bool:
            return n is not node

        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            found.update(_self_attrs(n.target) if isinstance(n.target, (cst.Tuple, cst.List)) else
                         {a for a in [_self_attr(n.target)] if a})

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            found.update(a for a in [_self_attr(n.target)] if a)

    fn.body.visit(V())
    return found


def _hoistable(stmt: cst.CSTNode, part: _Part, facts: FunctionFacts, per_call: set[str]) -> None:
    attr = _move(stmt)
    if attr is not None:
        part.writes.add(attr)
        part.reads |= _self_attrs(stmt.body[0].value)
        part.stmts.append(stmt)
        return
    if isinstance(stmt, cst.If) and stmt.orelse is None:
        attr = _cache_attr(stmt.test)
        if attr is None:
            raise Refuse(f"`if {code(stmt.test).strip()}` inside an arm is not a lazy cache "
                         "(`if not hasattr(self, ...)`)")
        for s in block_stmts(stmt.body):
            if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Assign)
                    and _store_targets(s.body[0], attr)):
                raise Refuse(f"the lazy cache of `self.{attr}` does more than store it: `{code(s).strip()}`")
            if impurity(s.body[0].value):
                raise Refuse(f"the lazy cache of `self.{attr}` {impurity(s.body[0].value)}")
            read = _of_this_call(_without_devices(s.body[0].value), facts) or next(
                (f"self.{a}" for a in sorted(_self_attrs(s.body[0].value) & per_call)), None)
            if read is not None:
                raise Refuse(f"the lazy cache of `self.{attr}` reads `{read}`, a value of this call: hoisted, it "
                             "would be filled from the first call of any size and reused for a later, longer one")
            part.reads |= _self_attrs(s.body[0].value)
        part.writes.add(attr)
        part.stmts.append(stmt)
        return
    raise Refuse(f"an arm holds `{code(stmt).strip().splitlines()[0]}`, neither a lazy cache, a device move "
                 "nor the buffer's registration")


def _register(stmt: cst.CSTNode) -> Optional[tuple[str, cst.Call]]:
    """``self.register_buffer("b", value, ...)`` as a statement: (name, call)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    c = stmt.body[0].value
    if not (isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and code(c.func) == "self.register_buffer"):
        return None
    if len(c.args) < 2 or c.args[0].keyword is not None or c.args[1].keyword is not None:
        return None
    name = _string(c.args[0].value)
    return (name, c) if name is not None else None


def _extra_args(c: cst.Call) -> list[str]:
    return [code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip() for a in c.args[2:]]


class Decision:
    def __init__(self, buffer: str, parts: list[_Part]):
        self.buffer = buffer
        self.parts = parts


def decide(node: cst.If, facts: FunctionFacts, per_call: set[str] = frozenset()) -> Decision:
    if isinstance(node.orelse, cst.If):
        raise Refuse("an `elif` chain: only `if`/`else` with one buffer registration per arm is hoisted")
    if node.orelse is None:
        raise Refuse("no `else`: the buffer would be re-registered on the path eager code leaves it alone")
    arms = [block_stmts(node.body), block_stmts(node.orelse.body)]
    parts, regs = [], []
    for stmts in arms:
        if not stmts or _register(stmts[-1]) is None:
            raise Refuse("an arm does not end in `self.register_buffer(\"<name>\", <value>, ...)`")
        part = _Part()
        for s in stmts[:-1]:
            _hoistable(s, part, facts, per_call)
        name, c = _register(stmts[-1])  # type: ignore[misc]
        value = c.args[1].value
        why = impurity(value)
        if why or calls_outside_torch(value):
            raise Refuse(f"the value registered as `{name}` {why or 'calls ' + calls_outside_torch(value)[0]}")
        parts.append(part)
        regs.append((name, c, value))
    (n0, c0, v0), (n1, c1, v1) = regs
    if n0 != n1:
        raise Refuse(f"the arms register different buffers (`{n0}`, `{n1}`)")
    if _extra_args(c0) != _extra_args(c1):
        raise Refuse(f"the arms register `{n0}` with different arguments")
    a, b = parts
    if (a.writes & (b.writes | b.reads)) or (b.writes & a.reads):
        both = sorted((a.writes & (b.writes | b.reads)) | (b.writes & a.reads))
        raise Refuse(f"both arms touch `self.{both[0]}`: hoisting one arm's statements would change the other's")
    if n0 in a.writes | b.writes | a.reads | b.reads:
        raise Refuse(f"a hoisted statement touches the buffer `self.{n0}` itself")
    if a.writes & _self_attrs(v1) or b.writes & _self_attrs(v0):
        raise Refuse("a hoisted statement writes what the other arm's value reads")
    if (a.writes | b.writes) & _self_attrs(node.test):
        raise Refuse("a hoisted statement writes what the condition reads")
    return Decision(n0, parts)


_CACHE_NOTE = ("# mend: filled on every compiled call: a check for the cache makes Dynamo guard\n"
               "# on the attribute, and the call after it would recompile\n")
_BUFFER_NOTE = ("# mend: stored in the module's buffers directly: register_buffer's checks read\n"
                "# the old buffer, and Dynamo would guard on it (a recompile on the next call)\n")


def _persistent(c: cst.Call) -> Optional[bool]:
    """``register_buffer(name, value[, persistent])``'s flag when it is written as a literal
    (absent: True); None for anything else."""
    rest = c.args[2:]
    if not rest:
        return True
    if len(rest) != 1 or rest[0].keyword is not None and rest[0].keyword.value != "persistent":
        return None
    v = strip_parens(rest[0].value)
    return {"True": True, "False": False}.get(v.value) if isinstance(v, cst.Name) else None


def _note(stmt: cst.CSTNode, text: str, indent: str = "") -> cst.CSTNode:
    lines = [cst.EmptyLine(indent=True, comment=cst.Comment(line)) for line in text.splitlines()]
    return stmt.with_changes(leading_lines=[*stmt.leading_lines, *lines])


def _uncached(stmt: cst.CSTNode) -> cst.CSTNode:
    """A lazy cache's ``if`` filled on every compiled call: ``if torch.compiler.is_compiling()
    or <test>:`` (eager code still fills it once)."""
    if not isinstance(stmt, cst.If):
        return stmt
    test = cst.BooleanOperation(cst.parse_expression("torch.compiler.is_compiling()"), cst.Or(), stmt.test)
    return _note(stmt.with_changes(test=test), _CACHE_NOTE)


def build(updated: cst.If, d: Decision, tnames: frozenset[str], forced: bool):
    test = convert_condition(updated.test, tnames, forced)
    arms = [block_stmts(updated.body), block_stmts(updated.orelse.body)]
    hoisted: list[cst.CSTNode] = [_uncached(s) for stmts in arms for s in stmts[:-1]]
    regs = [stmts[-1] for stmts in arms]
    c0 = regs[0].body[0].value
    v0, v1 = c0.args[1].value, regs[1].body[0].value.args[1].value
    value = call("torch.where", test, v0, v1)
    persistent = _persistent(c0)
    if persistent is None:
        # a flag mend cannot read: register_buffer keeps it (one recompile on the next call)
        selected = c0.with_changes(args=[c0.args[0], c0.args[1].with_changes(value=value), *c0.args[2:]])
        regs_out = [regs[0].with_changes(body=[regs[0].body[0].with_changes(value=selected)])]
    else:
        # what register_buffer does for a name already a buffer, without its checks
        name = code(c0.args[0].value)
        store = cst.parse_statement(f"self._buffers[{name}] = 0\n")
        store = store.with_changes(body=[store.body[0].with_changes(value=value)], leading_lines=regs[0].leading_lines)
        flag = cst.parse_statement(f"self._non_persistent_buffers_set.{'discard' if persistent else 'add'}({name})\n")
        regs_out = [_note(store, _BUFFER_NOTE), flag]
    out = [*hoisted, *regs_out]
    # the ``if`` line's comments go with the first statement; each arm's own comments stay on theirs
    first = out[0]
    out[0] = first.with_changes(leading_lines=[*updated.leading_lines, *first.leading_lines])
    return cst.FlattenSentinel(out)


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not ctx.wants("GM101"):
        return result
    ifs: list[cst.If] = []
    elifs: set[int] = set()

    class V(cst.CSTVisitor):
        def visit_If(self, n: cst.If) -> None:
            ifs.append(n)
            if isinstance(n.orelse, cst.If):
                elifs.add(id(n.orelse))

    an.visit_covering(V(), ctx)
    facts_cache: dict[int, FunctionFacts] = {}
    for node in ifs:
        if id(node) in elifs or not _mentions_register_buffer(node):
            continue
        t0, t1 = an.span(node.test)
        test_lines = set(range(t0, t1 + 1))
        if ctx.lines is not None and not (test_lines & ctx.lines):
            continue
        fn = an.enclosing_function(node)
        if fn is None:
            continue
        facts = facts_cache.setdefault(id(fn), FunctionFacts(an, fn))
        start, end = an.span(node)
        tnames = facts.tensor_names(start)
        forced = bool(ctx.tensor_lines and test_lines & ctx.tensor_lines)
        try:
            convert_condition(node.test, tnames, forced)
        except Refuse:
            continue  # a Python condition: not a break (gm1_where says so where Dynamo broke)
        try:
            d = decide(node, facts, _set_outside(fn, node))
        except Refuse as exc:
            # gm1_where refuses the same statement in its own words; this adds what the
            # hoisting could not do
            result.refusals.append(Refusal("GM101", start, f"Python inside the arms not hoisted: {exc}"))
            continue
        moved = sorted(set().union(*(p.writes for p in d.parts)))
        what = f"; hoisted: {', '.join('self.' + m for m in moved)}" if moved else ""
        stored = " (stored in `self._buffers`)" if _persistent(_register(block_stmts(node.body)[-1])[1]) \
            is not None else ""
        site = Site("GM101", start, end, f"`if` on a tensor re-registering `{d.buffer}` -> the buffer's value "
                    f"selected by torch.where{stored}{what}", [an.rng(node.test)], "where", claims=STATEMENT)
        result.edits.append(Edit(node, lambda u, d=d, tnames=tnames, forced=forced: build(u, d, tnames, forced), site))
    return result


def _mentions_register_buffer(node: cst.If) -> bool:
    return "register_buffer" in code(node)


_ROPE = '''import torch
from torch import nn


class Rope(nn.Module):
    def __init__(self, dim, original_max):
        super().__init__()
        self.original_max = original_max
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.original_inv_freq = self.inv_freq

    def long_table(self, device):
        return self.original_inv_freq.to(device) / 4.0, 1.0

    def forward(self, x, position_ids):
        device = x.device
        seq_len = torch.max(position_ids) + 1
        if seq_len > self.original_max:
            if not hasattr(self, "long_inv_freq"):
                self.long_inv_freq, _ = self.long_table(device)
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            # follows the module to its device
            self.original_inv_freq = self.original_inv_freq.to(device)
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
        return x * self.inv_freq[0]
'''

_ROPE_AFTER = _ROPE.replace('''        if seq_len > self.original_max:
            if not hasattr(self, "long_inv_freq"):
                self.long_inv_freq, _ = self.long_table(device)
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            # follows the module to its device
            self.original_inv_freq = self.original_inv_freq.to(device)
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
''', '''        # mend: filled on every compiled call: a check for the cache makes Dynamo guard
        # on the attribute, and the call after it would recompile
        if torch.compiler.is_compiling() or not hasattr(self, "long_inv_freq"):
            self.long_inv_freq, _ = self.long_table(device)
        # follows the module to its device
        self.original_inv_freq = self.original_inv_freq.to(device)
        # mend: stored in the module's buffers directly: register_buffer's checks read
        # the old buffer, and Dynamo would guard on it (a recompile on the next call)
        self._buffers["inv_freq"] = torch.where(
            seq_len > self.original_max,
            self.long_inv_freq,
            self.original_inv_freq,
        )
        self._non_persistent_buffers_set.add("inv_freq")
''')

CASES = [
    Case(_ROPE, _ROPE_AFTER),
    # ``getattr(..., None) is None`` is the same cache; an arm with nothing to hoist
    Case(_ROPE.replace('if not hasattr(self, "long_inv_freq"):', 'if getattr(self, "long_inv_freq", None) is None:')
         .replace("            # follows the module to its device\n"
                  "            self.original_inv_freq = self.original_inv_freq.to(device)\n", ""),
         _ROPE_AFTER.replace('if torch.compiler.is_compiling() or not hasattr(self, "long_inv_freq"):\n',
                             'if (\n            torch.compiler.is_compiling()\n'
                             '            or getattr(self, "long_inv_freq", None) is None\n        ):\n')
         .replace("        # follows the module to its device\n"
                  "        self.original_inv_freq = self.original_inv_freq.to(device)\n", "")),
    # a flag that is not a literal: register_buffer keeps it (and its one recompile)
    Case(_ROPE.replace("persistent=False", "persistent=self.keep"),
         _ROPE_AFTER.replace("persistent=False", "persistent=self.keep").replace(
             '''        # mend: stored in the module's buffers directly: register_buffer's checks read
        # the old buffer, and Dynamo would guard on it (a recompile on the next call)
        self._buffers["inv_freq"] = torch.where(
            seq_len > self.original_max,
            self.long_inv_freq,
            self.original_inv_freq,
        )
        self._non_persistent_buffers_set.add("inv_freq")
''', '''        self.register_buffer(
            "inv_freq",
            torch.where(
                seq_len > self.original_max,
                self.long_inv_freq,
                self.original_inv_freq,
            ),
            persistent=self.keep,
        )
''')),
]
# left alone, the reason named
CASES += [
    Case(_ROPE.replace("self.original_inv_freq = self.original_inv_freq.to(device)",
                       "self.original_inv_freq = self.original_inv_freq.to(torch.float16)"),
         reason="neither a lazy cache, a device move"),
    Case(_ROPE.replace('if not hasattr(self, "long_inv_freq"):', "if self.original_max > 4:"),
         reason="is not a lazy cache"),
    # a table built for the sequence that first needs it: hoisted, the first call of any length would build it
    Case(_ROPE.replace("self.long_inv_freq, _ = self.long_table(device)",
                       "self.long_inv_freq, _ = self.long_table(device, seq_len)"),
         reason="reads `seq_len`, a value of this call"),
    # ... or from an attribute each call sets
    Case(_ROPE.replace("self.long_inv_freq, _ = self.long_table(device)",
                       "self.long_inv_freq, _ = self.long_table(device, self.seen)")
         .replace("        seq_len = torch.max(position_ids) + 1\n",
                  "        seq_len = torch.max(position_ids) + 1\n        self.seen = x.shape[1]\n"),
         reason="reads `self.seen`, a value of this call"),
    Case(_ROPE.replace("                self.long_inv_freq, _ = self.long_table(device)\n",
                       "                self.long_inv_freq, _ = self.long_table(device)\n                print('cached')\n"),
         reason="does more than store it"),
    Case(_ROPE.replace('self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)',
                       'self.register_buffer("inv_freq", self.original_inv_freq, persistent=True)'),
         reason="different arguments"),
    Case(_ROPE.replace('self.long_inv_freq, _ = self.long_table(device)',
                       'self.long_inv_freq, _ = self.long_table(device)\n                '
                       'self.original_inv_freq = self.long_inv_freq'),
         reason="does more than store it"),
    Case(_ROPE.replace('self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)',
                       'self.register_buffer("inv_freq", self.original_inv_freq / 2, persistent=False)')
         .replace('if not hasattr(self, "long_inv_freq"):\n                self.long_inv_freq, _ = self.long_table(device)',
                  'if not hasattr(self, "original_inv_freq"):\n                self.original_inv_freq = self.inv_freq'),
         reason="both arms touch `self.original_inv_freq`"),
    Case(_ROPE.replace("        else:\n            # follows the module to its device\n"
                       "            self.original_inv_freq = self.original_inv_freq.to(device)\n"
                       '            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)\n', ""),
         reason="no `else`"),
]
