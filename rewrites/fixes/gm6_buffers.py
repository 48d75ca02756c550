"""GM606 (unsafe): an ``nn.Buffer`` re-assigned in ``forward`` becomes a local.

transformers 5.x registers CTRL's sinusoid table as ``self.pos_encoding = nn.Buffer(...)``
and ``forward`` re-binds it on every call::

    self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)
    pos_embeds = self.pos_encoding[position_ids, :]

The assignment runs ``nn.Module.__setattr__``, whose ``isinstance(value, nn.Buffer)`` check
Dynamo cannot trace ("Unsupported python_type() call"): the graph breaks there and the
frame around it is skipped. The converted table only feeds the lines below it, so it can
live in a local::

    pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)
    pos_embeds = pos_encoding[position_ids, :]

The function computes the same values; what changes is the module: its buffer is not
re-bound, so a conversion that does change the tensor (another dtype or device) is done on
every call instead of once, and code outside the function sees the buffer as it was. Hence
an unsafe fix (``--unsafe-fixes``). Planned at a statement Dynamo broke at, or, with no
lines given, where the class (or a base in the file) creates the attribute as
``nn.Buffer``; only for conversions of the attribute itself, as a statement of the function
body, and refused when anything after it could still read the attribute from ``self``.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst
import libcst.matchers as m

from rewrites.fixes.base import (Analysis, Case, Context, Edit, Plan, Refusal, Site, full_name, names_in, offer_unsafe,
                                 single)

RULES = ("GM606",)
ORDER = 100

COST = ("the buffer is no longer re-bound: a conversion that changes it runs on every call, and code outside "
        "the function sees the unconverted buffer")
# methods that return the same values, converted (none accumulates state across calls)
CONVERSIONS = frozenset({"to", "type", "float", "half", "bfloat16", "double", "cpu", "cuda", "contiguous",
                         "detach"})
_INIT_LIKE = ("init", "build", "setup")


def _self_attr(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _converts(value: cst.BaseExpression, attr: str) -> bool:
    """``self.<attr>.to(...)``, ``self.<attr>.float().contiguous()``, ..."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value in CONVERSIONS:
        value = value.func.value
        if _self_attr(value) == attr:
            return True
    return False


def _buffers(module: cst.Module) -> dict[str, set[str]]:
    """{class name: attributes an init-like method creates as ``nn.Buffer``}, bases of the
    same file included."""
    own: dict[str, set[str]] = {}
    bases: dict[str, list[str]] = {}
    for cls in (s for s in module.body if isinstance(s, cst.ClassDef)):
        bases[cls.name.value] = [full_name(b.value) or "" for b in cls.bases]
        found = own.setdefault(cls.name.value, set())
        for fn in (s for s in cls.body.body if isinstance(s, cst.FunctionDef)):
            if any(k in fn.name.value for k in _INIT_LIKE):
                for a in m.findall(fn, m.Assign()):
                    if isinstance(a.value, cst.Call) and (full_name(a.value.func) or "").split(".")[-1] == "Buffer":
                        found.update(n for t in a.targets if (n := _self_attr(t.target)))
    out: dict[str, set[str]] = {}
    for name in own:
        seen, todo, acc = set(), [name], set()
        while todo:
            c = todo.pop()
            if c in seen or c not in own:
                continue
            seen.add(c)
            acc |= own[c]
            todo += [b.split(".")[-1] for b in bases.get(c, [])]
        out[name] = acc
    return out


def _why_not(an: Analysis, stmt: cst.SimpleStatementLine, attr: str) -> Optional[str]:
    """Why the attribute cannot become a local after ``stmt``, or None."""
    block = an.parent(stmt)
    fn = an.parent(block) if block is not None else None
    if not isinstance(fn, cst.FunctionDef):
        return "the assignment is inside a loop, branch, `with` or `try`: the local would not be bound on every path"
    cls = an.parent(an.parent(fn)) if an.parent(fn) is not None else None
    if not isinstance(cls, cst.ClassDef):
        return "not in a method of a class"
    methods = {s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    after = fn.body.body[fn.body.body.index(stmt) + 1:]
    problems: list[str] = []

    class V(cst.CSTVisitor):
        def __init__(self) -> None:
            self.nested = 0

        def _nest(self, _n) -> None:
            self.nested += 1

        def _unnest(self, _n) -> None:
            self.nested -= 1

        visit_FunctionDef = visit_Lambda = visit_ClassDef = _nest
        leave_FunctionDef = leave_Lambda = leave_ClassDef = _unnest

        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            if _self_attr(n.target) == attr:
                problems.append(f"`self.{attr}` is assigned again")

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            if _self_attr(n.target) == attr:
                problems.append(f"`self.{attr}` is assigned again")

        def visit_Del(self, n: cst.Del) -> None:
            if attr in {_self_attr(e.value) for e in getattr(n.target, "elements", [])} | {_self_attr(n.target)}:
                problems.append(f"`self.{attr}` is deleted")

        def visit_Attribute(self, n: cst.Attribute) -> None:
            if self.nested and _self_attr(n) == attr:
                problems.append(f"a nested function reads `self.{attr}`")

        def visit_Call(self, n: cst.Call) -> None:
            meth = _self_attr(n.func)
            if meth in methods:
                problems.append(f"`self.{meth}()` may read `self.{attr}`")
            elif isinstance(n.func, cst.Name) and n.func.value == "super":
                problems.append(f"a `super()` method may read `self.{attr}`")

        def visit_Arg(self, n: cst.Arg) -> None:
            if isinstance(n.value, cst.Name) and n.value.value == "self":
                problems.append(f"`self` is passed on and the callee may read `self.{attr}`")

    v = V()
    for s in after:
        s.visit(v)
    # a function defined before the assignment and called after it reads the old buffer
    v.nested = 1
    for s in fn.body.body[:fn.body.body.index(stmt)]:
        if isinstance(s, cst.FunctionDef) or m.findall(s, m.Lambda()):
            s.visit(v)
    return problems[0] if problems else None


def _reads(an: Analysis, stmt: cst.SimpleStatementLine, attr: str) -> list[cst.CSTNode]:
    fn = an.parent(an.parent(stmt))
    assert isinstance(fn, cst.FunctionDef)
    read = m.Attribute(value=m.Name("self"), attr=m.Name(attr))
    return [n for s in fn.body.body[fn.body.body.index(stmt) + 1:] for n in m.findall(s, read)]


def _local_name(an: Analysis, stmt: cst.SimpleStatementLine, attr: str) -> str:
    fn = an.parent(an.parent(stmt))
    used = names_in(fn)
    for name in (attr, f"_mend_{attr}"):
        if name not in used:
            return name
    i = 2
    while f"_mend_{attr}_{i}" in used:
        i += 1
    return f"_mend_{attr}_{i}"


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not ctx.wants("GM606"):
        return result
    stmts: list[tuple[cst.SimpleStatementLine, str]] = []
    for n in an.findall(m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget()])]), ctx):
        a = single(n)
        attr = _self_attr(a.targets[0].target)
        if attr is not None and _converts(a.value, attr):
            stmts.append((n, attr))
    if not stmts:
        return result
    buffers = _buffers(an.module)
    for stmt, attr in stmts:
        start, end = an.span(stmt)
        if not ctx.covers(start, end):
            continue
        fn = an.enclosing_function(stmt)
        cls = an.parent(an.parent(fn)) if fn is not None and an.parent(fn) is not None else None
        known = isinstance(cls, cst.ClassDef) and attr in buffers.get(cls.name.value, set())
        if not known and ctx.lines is None:
            continue  # neither Dynamo nor the class says the attribute is an nn.Buffer
        if fn is not None and any(k in fn.name.value for k in _INIT_LIKE):
            continue
        why = _why_not(an, stmt, attr)
        if why:
            result.refusals.append(Refusal("GM606", start, f"buffer re-assignment not rewritten: {why}"))
            continue
        if not offer_unsafe(ctx, result, "GM606", start, COST, f"keeping the converted `self.{attr}` in a local"):
            continue
        local = _local_name(an, stmt, attr)
        site = Site("GM606", start, end, f"`self.{attr} = self.{attr}.<conversion>` -> a local `{local}` read "
                    f"below (unsafe: {COST})", strategy="buffer_local")

        def build_assign(updated: cst.SimpleStatementLine, local=local):
            a = updated.body[0]
            return updated.with_changes(body=[a.with_changes(targets=[a.targets[0].with_changes(
                target=cst.Name(local))])])

        result.edits.append(Edit(stmt, build_assign, site, needs_torch=False))
        for read in _reads(an, stmt, attr):
            result.edits.append(Edit(read, lambda _u, local=local: cst.Name(local), None, needs_torch=False))
    return result


_CTRL = '''import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.pos_encoding = nn.Buffer(torch.randn(n, d), persistent=False)
        self.drop = nn.Dropout(0.0)

    def forward(self, inputs_embeds, position_ids):
        device = inputs_embeds.device
        # the table follows the input (kept from upstream)
        self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)
        pos_embeds = self.pos_encoding[position_ids, :]
        return self.drop(inputs_embeds + pos_embeds) * self.pos_encoding.shape[0]
'''

# every rewrite of this family is unsafe (--unsafe-fixes)
CASES = [
    Case(_CTRL, _CTRL.replace("        self.pos_encoding = self.pos_encoding.to(", "        pos_encoding = self.pos_encoding.to(")
         .replace("self.pos_encoding[position_ids, :]", "pos_encoding[position_ids, :]")
         .replace("* self.pos_encoding.shape[0]", "* pos_encoding.shape[0]"), unsafe=True),
    # a name taken, a base class that makes the buffer, a conversion chain; Dynamo's line
    Case(_CTRL.replace("class Model(nn.Module):", "class Base(nn.Module):")
         .replace("    def forward(", "    def unused(") + "\n\nclass Model(Base):\n    def forward(self, x, pos_encoding):\n"
         "        self.pos_encoding = self.pos_encoding.float().contiguous()\n"
         "        return x + self.pos_encoding[pos_encoding]\n",
         _CTRL.replace("class Model(nn.Module):", "class Base(nn.Module):")
         .replace("    def forward(", "    def unused(") + "\n\nclass Model(Base):\n    def forward(self, x, pos_encoding):\n"
         "        _mend_pos_encoding = self.pos_encoding.float().contiguous()\n"
         "        return x + _mend_pos_encoding[pos_encoding]\n", lines={21}, unsafe=True),
]
# left alone even with --unsafe-fixes
CASES += [
    Case(_CTRL.replace("        pos_embeds = self", "        if position_ids.numel():\n            self.pos_encoding = "
                       "self.pos_encoding.half()\n        pos_embeds = self"),
         reason="assigned again", unsafe=True),
    Case(_CTRL.replace("        pos_embeds = self.pos_encoding[position_ids, :]",
                       "        pos_embeds = self.lookup(position_ids)") + "\n    def lookup(self, ids):\n"
         "        return self.pos_encoding[ids]\n",
         reason="`self.lookup()` may read", unsafe=True),
    Case(_CTRL.replace("        self.pos_encoding = self", "        with torch.no_grad():\n            self.pos_encoding = self"),
         reason="inside a loop, branch", unsafe=True),
    Case(_CTRL.replace("        device = inputs_embeds.device\n", "        device = inputs_embeds.device\n"
                       "        look = lambda ids: self.pos_encoding[ids]\n")
         .replace("pos_embeds = self.pos_encoding[position_ids, :]", "pos_embeds = look(position_ids)"),
         reason="nested function", unsafe=True),
    Case(_CTRL.replace("pos_embeds = self.pos_encoding[position_ids, :]", "pos_embeds = helper(self, position_ids)"),
         reason="`self` is passed on", unsafe=True),
    Case(_CTRL.replace("self.pos_encoding[position_ids, :]", "(lambda: self.pos_encoding)()[position_ids, :]"),
         reason="nested function", unsafe=True),
    # not a buffer, and no break reported: nothing is planned
    Case(_CTRL.replace("nn.Buffer(torch.randn(n, d), persistent=False)", "torch.randn(n, d)"), unsafe=True),
    # accumulates across calls: not a conversion
    Case(_CTRL.replace("self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)",
                       "torch.cat([self.pos_encoding, inputs_embeds[0]])"), lines={14}, unsafe=True),
]
