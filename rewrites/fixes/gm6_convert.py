"""GM606 / GM607: a buffer or a submodule converted in ``forward``.

transformers 5.x registers CTRL's sinusoid table as ``self.pos_encoding = nn.Buffer(...)``
and ``forward`` re-binds it on every call::

    self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)

The assignment runs ``nn.Module.__setattr__``, whose ``isinstance(value, nn.Buffer)`` check
Dynamo cannot trace ("Unsupported python_type() call"): the graph breaks there and the
frame around it is skipped. Switch Transformers' and NLLB-MoE's routers cast a submodule::

    self.classifier = self.classifier.to(self.dtype)

which torch 2.11 traces into ``Module._apply`` and its ``nn.Parameter(...)``
("Attempted to use `torch.nn.Parameter()` constructor"): a break on every call.

Safe fix (both): the conversion changes nothing when the tensor (every parameter and buffer
of the module) already has the target dtype and device; then ``.to`` returns the receiver
itself and the assignment re-binds what was there. So the statement runs only when it
would change something::

    if self.pos_encoding.device != device or self.pos_encoding.dtype != inputs_embeds.dtype:
        self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)

Dynamo reads the condition from the tensors' metadata (a guard, not a graph op), skips the
branch, and the graph goes on. The condition errs one way only: a target it cannot compare
(a device given as a string, a module holding an integer buffer) reads as "changes", and
the original statement runs as before. Applies to ``to`` with dtype/device arguments that
are names or attributes (``.to(self.dtype)``, ``.to(device=d, dtype=x.dtype)``),
``float``/``half``/``bfloat16``/``double``/``cpu`` without arguments, on ``self.<attr>``
that the class (or a base in the file) creates as ``nn.Buffer`` / ``register_buffer`` (a
tensor) or as a ``torch.nn`` module, whose ``to`` is torch's own; a module class of the file
counts when it and its bases of the file override nothing the conversion or the guard runs
(``to``, ``_apply``, ``parameters``, ...) and its other bases are ``torch.nn`` classes.

Unsafe fix (GM606, ``--unsafe-fixes``), for a buffer conversion the guard cannot state (a
chain, ``.detach()``): the converted table only feeds the lines below it, so it can live
in a local::

    pos_encoding = self.pos_encoding.float().contiguous()
    pos_embeds = pos_encoding[position_ids, :]

The function computes the same values; what changes is the module: its buffer is not
re-bound, so a conversion that does change the tensor (another dtype or device) is done on
every call instead of once, and code outside the function sees the buffer as it was. Only
for conversions of the attribute itself, as a statement of the function body, and refused
when anything after it could still read the attribute from ``self``.

Planned at a statement Dynamo broke at, or, with no lines given, where the class creates
the attribute as ``nn.Buffer`` (the static GM606 finding; a module's conversion breaks only
on some torch versions, so only Dynamo's line plans it).
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst
import libcst.matchers as m

from rewrites.fixes.base import Analysis, Case, Context, Edit, Plan, Refusal, Site, offer_unsafe, single
from rewrites.fixes.facts import names_in
from rewrites.fixes.judgements import full_name

RULES = ("GM606", "GM607")
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


BUFFER, TENSOR, MODULE, OWN_MODULE = "nn.Buffer", "tensor", "module", "own module"
# torch.nn names that are not modules (a tensor, or a function returning one)
_NOT_MODULES = frozenset({"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"})


def _kind_of_init(value: cst.BaseExpression, classes: dict[str, str]) -> Optional[str]:
    """What ``self.x = <value>`` in an init-like method makes ``x``: an ``nn.Buffer``, a
    module whose ``to`` is torch's own (``torch.nn``'s, or a class of this file's that
    overrides none of it), a module of this file's with its own conversions, or neither."""
    if not isinstance(value, cst.Call):
        return None
    name = full_name(value.func) or ""
    last = name.rsplit(".", 1)[-1]
    if last == "Buffer":
        return BUFFER
    if _torch_module(name):
        return MODULE  # nn.Linear(...), torch.nn.LayerNorm(...); not nn.init.* / nn.utils.*
    return classes.get(name)


def _torch_module(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return (name.startswith(("nn.", "torch.nn.")) and name.count(".") == (1 if name.startswith("nn.") else 2)
            and last[:1].isupper() and last not in _NOT_MODULES)


# what a module's conversion and the guard's `parameters()` / `buffers()` run through
_MODULE_HOOKS = frozenset({"to", "_apply", "type", "float", "half", "bfloat16", "double", "cpu", "cuda",
                           "parameters", "buffers", "named_parameters", "named_buffers", "__setattr__",
                           "__getattr__"})


def _module_classes(module: cst.Module) -> dict[str, str]:
    """{class name: MODULE | OWN_MODULE} for this file's ``nn.Module`` subclasses (through
    ``torch.nn`` classes and this file's own): OWN_MODULE when the class or a base of this
    file defines a method the conversion goes through. A base from elsewhere says nothing."""
    defs = {c.name.value: c for c in module.body if isinstance(c, cst.ClassDef)}
    out: dict[str, Optional[str]] = {}

    def kind(name: str, seen: frozenset = frozenset()) -> Optional[str]:
        if name in out or name in seen:
            return out.get(name)
        cls = defs[name]
        own = any(isinstance(f, cst.FunctionDef) and f.name.value in _MODULE_HOOKS for f in cls.body.body)
        found = None
        for b in cls.bases:
            base = full_name(b.value) or ""
            k = MODULE if _torch_module(base) else kind(base, seen | {name}) if base in defs else None
            if k is None:
                return None  # a base from elsewhere: its `to` is not known
            found = OWN_MODULE if OWN_MODULE in (found, k) else k
        if found is not None and own:
            found = OWN_MODULE
        out[name] = found
        return found

    for name in defs:
        kind(name)
    return {n: k for n, k in out.items() if k is not None}


def _attr_kinds(module: cst.Module) -> dict[str, dict[str, str]]:
    """{class name: {attribute: BUFFER | TENSOR | MODULE | OWN_MODULE}} from what its
    init-like methods (and those of its bases in the same file) create: ``self.x =
    nn.Buffer(...)``, ``self.register_buffer("x", ...)``, ``self.x = nn.Linear(...)``, ``self.x =
    Block(...)`` for a module class of this file (:func:`_module_classes`). An attribute made two
    ways is left out: nothing can be said of it."""
    own: dict[str, dict[str, str]] = {}
    bases: dict[str, list[str]] = {}
    classes = _module_classes(module)
    for cls in (s for s in module.body if isinstance(s, cst.ClassDef)):
        bases[cls.name.value] = [full_name(b.value) or "" for b in cls.bases]
        found = own.setdefault(cls.name.value, {})
        made: dict[str, set[Optional[str]]] = {}
        for fn in (s for s in cls.body.body if isinstance(s, cst.FunctionDef)):
            if not any(k in fn.name.value for k in _INIT_LIKE):
                continue
            for a in m.findall(fn, m.Assign()):
                for t in a.targets:
                    if (n := _self_attr(t.target)) is not None:
                        made.setdefault(n, set()).add(_kind_of_init(a.value, classes))
            for c in m.findall(fn, m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name("register_buffer")))):
                if c.args and isinstance(c.args[0].value, cst.SimpleString):
                    made.setdefault(c.args[0].value.evaluated_value, set()).add(TENSOR)
        found.update({n: k.pop() for n, k in made.items() if len(k) == 1 and None not in k})
    out: dict[str, dict[str, str]] = {}
    for name in own:
        seen, todo, acc = set(), [name], {}
        while todo:
            c = todo.pop()
            if c in seen or c not in own:
                continue
            seen.add(c)
            for attr, kind in own[c].items():
                acc.setdefault(attr, kind)  # the class's own word first, then its bases'
            todo += [b.split(".")[-1] for b in bases.get(c, [])]
        out[name] = acc
    return out


# conversions without arguments, and what they convert to
_FIXED = {"float": ("dtype", "torch.float32"), "half": ("dtype", "torch.float16"),
          "bfloat16": ("dtype", "torch.bfloat16"), "double": ("dtype", "torch.float64"), "cpu": ("type", '"cpu"')}
_TORCH_DTYPES = frozenset("""float16 float32 float64 bfloat16 half float double complex64 complex128 cfloat cdouble
float8_e4m3fn float8_e5m2 uint8 int8 int16 int32 int64 short int long bool""".split())


def _simple(e: cst.BaseExpression) -> bool:
    # read twice (in the condition and in the call): names, attributes and literals only
    while isinstance(e, cst.Attribute):
        e = e.value
    return isinstance(e, (cst.Name, cst.SimpleString))


def _target_kind(e: cst.BaseExpression) -> Optional[str]:
    """A positional argument of ``.to``: a dtype or a device, as far as its name says."""
    name = full_name(e) or ""
    last = name.rsplit(".", 1)[-1].lower()
    if name.startswith("torch.") and name.count(".") == 1 and last in _TORCH_DTYPES or last.endswith("dtype"):
        return "dtype"
    if last.endswith("device") or isinstance(e, cst.SimpleString):
        return "device"
    return None


def _targets(an: Analysis, call: cst.Call) -> Optional[list[tuple[str, str]]]:
    """``[(what, source)]`` the conversion ``call`` converts to (``what``: ``dtype``,
    ``device`` or the device ``type``), or None when its arguments do not say."""
    meth = call.func.attr.value  # type: ignore[attr-defined]
    if meth in _FIXED:
        return None if call.args else [_FIXED[meth]]
    if meth != "to" or not call.args:
        return None
    out: list[tuple[str, str]] = []
    for a in call.args:
        kw = a.keyword.value if a.keyword is not None else None
        if a.star or not _simple(a.value):
            return None
        if kw == "non_blocking":
            continue  # no copy, nothing to wait for
        what = kw if kw in ("dtype", "device") else _target_kind(a.value) if kw is None else None
        if what is None:
            return None  # copy=, memory_format=, or an argument whose name says nothing
        out.append((what, an.module.code_for_node(a.value)))
    whats = [w for w, _ in out]
    return out if out and len(set(whats)) == len(whats) else None


def _changes(targets: list[tuple[str, str]], tensor: str) -> str:
    return " or ".join(f"{tensor}.device.type != {v}" if w == "type" else f"{tensor}.{w} != {v}"
                       for w, v in targets)


def guard_test(an: Analysis, stmt: cst.SimpleStatementLine, attr: str, kind: str) -> Optional[str]:
    """The condition under which the conversion in ``stmt`` changes ``self.<attr>``, or None."""
    s = single(stmt)
    call = s.value if isinstance(s, (cst.Assign, cst.Expr)) else None
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            and _self_attr(call.func.value) == attr):
        return None  # a chain (``.float().contiguous()``) or another receiver
    targets = _targets(an, call)
    if targets is None:
        return None
    recv = f"self.{attr}"
    if kind != MODULE:
        return _changes(targets, recv)
    used = names_in(stmt)
    t = next(n for n in ("t", "p", "tensor", "_mend_t") if n not in used)
    return f"any({_changes(targets, t)} for {t} in (*{recv}.parameters(), *{recv}.buffers()))"


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


def _guarded(an: Analysis, stmt: cst.SimpleStatementLine, test: str) -> bool:
    block = an.parent(stmt)
    head = an.parent(block) if block is not None else None
    if not isinstance(head, cst.If) or len(head.body.body) != 1:
        return False
    flat = lambda c: re.sub(r"[\s()]", "", c)  # noqa: E731 (laid out across lines, or not)
    return flat(an.module.code_for_node(head.test)) == flat(test)


def _conversions(an: Analysis, ctx: Context) -> list[tuple[cst.SimpleStatementLine, str, bool]]:
    """``(statement, attribute, whether it assigns)`` for ``self.x = self.x.<conversion>``
    and a bare ``self.x.<conversion>(...)`` (which converts a module in place)."""
    out = []
    for n in an.findall(m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget()]) | m.Expr(value=m.Call())]),
                        ctx):
        s = single(n)
        if isinstance(s, cst.Assign):
            attr = _self_attr(s.targets[0].target)
            if attr is not None and _converts(s.value, attr):
                out.append((n, attr, True))
        elif isinstance(s.value.func, cst.Attribute) and s.value.func.attr.value in CONVERSIONS \
                and (attr := _self_attr(s.value.func.value)) is not None:
            out.append((n, attr, False))
    return out


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not (ctx.wants("GM606") or ctx.wants("GM607")):
        return result
    stmts = _conversions(an, ctx)
    if not stmts:
        return result
    kinds = _attr_kinds(an.module)
    for stmt, attr, assigns in stmts:
        start, end = an.span(stmt)
        if not ctx.covers(start, end):
            continue
        fn = an.enclosing_function(stmt)
        if fn is None or any(k in fn.name.value for k in _INIT_LIKE):
            continue
        cls = an.parent(an.parent(fn)) if an.parent(fn) is not None else None
        kind = kinds.get(cls.name.value, {}).get(attr) if isinstance(cls, cst.ClassDef) else None
        if ctx.lines is None and kind != BUFFER:
            continue  # with no break to go by, only an nn.Buffer's re-binding is known to break
        if not assigns and kind not in (MODULE, OWN_MODULE):
            continue  # a tensor's bare conversion converts nothing
        rule = "GM607" if kind in (MODULE, OWN_MODULE) else "GM606"
        if not ctx.wants(rule):
            continue
        if kind == OWN_MODULE:
            # a local would not help either: Module.to converts in place, and the break is inside it
            result.refusals.append(Refusal("GM607", start, f"module conversion not guarded: `self.{attr}`'s class "
                                           "(or a base in this file) overrides a method the conversion or the "
                                           "guard runs (`to`, `_apply`, `parameters`, ...), so neither is torch's "
                                           "own"))
            continue
        test = guard_test(an, stmt, attr, kind) if kind is not None else None
        if test is not None and _guarded(an, stmt, test):
            continue  # mend's guard is there already (a second `mend fix --write`)
        if test is not None:
            of = "a parameter or buffer of " if kind == MODULE else ""
            site = Site(rule, start, end, f"`self.{attr}` converted only when that changes it (the dtype or device "
                        f"of {of}`self.{attr}` differs)",
                        strategy="convert_guard")

            def build_guard(updated: cst.SimpleStatementLine, test=test):
                return cst.If(test=cst.parse_expression(test),
                              body=cst.IndentedBlock(body=[updated.with_changes(leading_lines=())]),
                              leading_lines=updated.leading_lines)

            result.edits.append(Edit(stmt, build_guard, site, needs_torch="torch." in test))
            continue
        if kind == MODULE:
            result.refusals.append(Refusal("GM607", start, "module conversion not guarded: its arguments do not say "
                                           "which dtype or device it converts to (a name or attribute ending in "
                                           "`dtype` / `device`, a `dtype=` / `device=` keyword, a torch dtype, or "
                                           "float() / half() / bfloat16() / double() / cpu() are read)"))
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

_GUARDED = _CTRL.replace(
    "        self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)\n",
    "        if (\n"
    "            self.pos_encoding.device != device\n"
    "            or self.pos_encoding.dtype != inputs_embeds.dtype\n"
    "        ):\n"
    "            self.pos_encoding = self.pos_encoding.to(\n"
    "                device=device,\n"
    "                dtype=inputs_embeds.dtype,\n"
    "            )\n")
# the target is another tensor: what it converts to is not in the source
_CTRL_LIKE = _CTRL.replace("self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)",
                           "self.pos_encoding.to(inputs_embeds)")

_ROUTER = '''import torch
from torch import nn


class Router(nn.Module):
    def __init__(self, hidden, experts):
        super().__init__()
        self.classifier = nn.Linear(hidden, experts, bias=False)
        self.dtype = torch.float32

    def forward(self, hidden_states):
        hidden_states = hidden_states.to(self.dtype)
        self.classifier = self.classifier.to(self.dtype)
        return self.classifier(hidden_states).softmax(-1)
'''
_ROUTER_GUARD = ("        if any(\n"
                 "            t.dtype != self.dtype\n"
                 "            for t in (*self.classifier.parameters(), *self.classifier.buffers())\n"
                 "        ):\n"
                 "            self.classifier = self.classifier.to(self.dtype)\n")

# safe: the conversion runs only when it changes something
CASES = [
    Case(_CTRL, _GUARDED),
    # a registered buffer (Dynamo's line: register_buffer alone does not break), no-argument conversion
    Case(_CTRL.replace("self.pos_encoding = nn.Buffer(torch.randn(n, d), persistent=False)",
                       "self.register_buffer('pos_encoding', torch.randn(n, d))")
         .replace("self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)", "self.pos_encoding.half()"),
         _CTRL.replace("self.pos_encoding = nn.Buffer(torch.randn(n, d), persistent=False)",
                       "self.register_buffer('pos_encoding', torch.randn(n, d))")
         .replace("        self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)\n",
                  "        if self.pos_encoding.dtype != torch.float16:\n"
                  "            self.pos_encoding = self.pos_encoding.half()\n"), lines={14}),
    # Switch Transformers' router (torch 2.11 breaks at the conversion on every call)
    Case(_ROUTER, _ROUTER.replace("        self.classifier = self.classifier.to(self.dtype)\n", _ROUTER_GUARD),
         lines={13}),
    # NLLB-MoE's: a bare conversion in a helper, under a Python check; the loop variable taken
    Case(_ROUTER + "\n    def cast(self, t):\n        if not hasattr(self.classifier, \"SCB\"):\n"
         "            self.classifier.to(t.dtype)\n",
         _ROUTER + "\n    def cast(self, t):\n        if not hasattr(self.classifier, \"SCB\"):\n"
         "            if any(\n"
         "                p.dtype != t.dtype\n"
         "                for p in (*self.classifier.parameters(), *self.classifier.buffers())\n"
         "            ):\n"
         "                self.classifier.to(t.dtype)\n", lines={18}),
    # device and dtype, positional
    Case(_ROUTER.replace(".to(self.dtype)\n        return", ".to(hidden_states.device, torch.bfloat16)\n        return"),
         _ROUTER.replace("        self.classifier = self.classifier.to(self.dtype)\n",
                         "        if any(\n"
                         "            t.device != hidden_states.device or t.dtype != torch.bfloat16\n"
                         "            for t in (*self.classifier.parameters(), *self.classifier.buffers())\n"
                         "        ):\n"
                         "            self.classifier = self.classifier.to(hidden_states.device, torch.bfloat16)\n"),
         lines={13}),
]
# a module class of the file's own, through a base of the file: torch's `to` still
_MY_LIN = ("class Base(nn.Module):\n    pass\n\n\nclass MyLin(Base):\n    def __init__(self, a, b):\n"
           "        super().__init__()\n        self.weight = nn.Parameter(torch.randn(b, a))\n\n"
           "    def forward(self, x):\n        return x @ self.weight.t()\n\n\n")
_OWN_ROUTER = _ROUTER.replace("class Router", _MY_LIN + "class Router").replace("nn.Linear(hidden, experts, bias=False)",
                                                                               "MyLin(hidden, experts)")
CASES += [Case(_OWN_ROUTER, _OWN_ROUTER.replace("        self.classifier = self.classifier.to(self.dtype)\n",
                                                _ROUTER_GUARD), lines={26})]
# with no break to go by, a module's conversion is left alone (it breaks on some torch versions only)
CASES += [Case(_ROUTER)]
CASES += [
    # what it converts to is not in the source; a copy; a call read twice; a module of the file's own
    Case(_ROUTER.replace(".to(self.dtype)\n        return", ".to(hidden_states)\n        return"), lines={13},
         reason="module conversion not guarded"),
    Case(_ROUTER.replace(".to(self.dtype)\n        return", ".to(self.dtype, copy=True)\n        return"), lines={13},
         reason="module conversion not guarded"),
    Case(_ROUTER.replace(".to(self.dtype)\n        return", ".to(self.get_dtype())\n        return"), lines={13},
         reason="module conversion not guarded"),
    # the file's module class (or its base) has its own conversion: neither a guard nor a local, even unsafe
    Case(_OWN_ROUTER.replace("class Base(nn.Module):\n    pass\n",
                             "class Base(nn.Module):\n    def _apply(self, fn, recurse=True):\n"
                             "        return super()._apply(fn, recurse)\n"), lines={27},
         reason="overrides a method the conversion", unsafe=True),
]

# unsafe (--unsafe-fixes): a buffer conversion the guard cannot state becomes a local
CASES += [
    Case(_CTRL_LIKE, _CTRL_LIKE.replace("        self.pos_encoding = self.pos_encoding.to(",
                                        "        pos_encoding = self.pos_encoding.to(")
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
    Case(_CTRL_LIKE.replace("        pos_embeds = self", "        if position_ids.numel():\n            self.pos_encoding = "
                            "self.pos_encoding.detach()\n        pos_embeds = self"),
         reason="assigned again", unsafe=True),
    Case(_CTRL_LIKE.replace("        pos_embeds = self.pos_encoding[position_ids, :]",
                            "        pos_embeds = self.lookup(position_ids)") + "\n    def lookup(self, ids):\n"
         "        return self.pos_encoding[ids]\n",
         reason="`self.lookup()` may read", unsafe=True),
    Case(_CTRL_LIKE.replace("        self.pos_encoding = self", "        with torch.no_grad():\n            self.pos_encoding = self"),
         reason="inside a loop, branch", unsafe=True),
    Case(_CTRL_LIKE.replace("        device = inputs_embeds.device\n", "        device = inputs_embeds.device\n"
                            "        look = lambda ids: self.pos_encoding[ids]\n")
         .replace("pos_embeds = self.pos_encoding[position_ids, :]", "pos_embeds = look(position_ids)"),
         reason="nested function", unsafe=True),
    Case(_CTRL_LIKE.replace("pos_embeds = self.pos_encoding[position_ids, :]", "pos_embeds = helper(self, position_ids)"),
         reason="`self` is passed on", unsafe=True),
    Case(_CTRL_LIKE.replace("self.pos_encoding[position_ids, :]", "(lambda: self.pos_encoding)()[position_ids, :]"),
         reason="nested function", unsafe=True),
    # not a buffer, and no break reported: nothing is planned
    Case(_CTRL.replace("nn.Buffer(torch.randn(n, d), persistent=False)", "torch.randn(n, d)"), unsafe=True),
    # accumulates across calls: not a conversion
    Case(_CTRL.replace("self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)",
                       "torch.cat([self.pos_encoding, inputs_embeds[0]])"), lines={14}, unsafe=True),
]
