"""GM702: a Python number an object keeps as an attribute and changes on every call.

Dynamo guards on the value of every Python number it reads (``self.step == 3``), so a
training-step counter, or a temperature annealed each call, compiles a new graph per value
until the recompile limit sends the function to eager. A tensor's value is no guard: the
attribute is held in a 0-d tensor in the methods that change it, and a property keeps the old
name a Python number for every other reader (the class's other methods, the user's code)::

    self.step = 0                  ->  self._step = torch.tensor(0)
    self.step += 1                 ->  self._step = self._step + 1
    w = min(1.0, self.step / 100)  ->  w = min(1.0, self._step.double() / 100)

    @property
    def step(self):
        return self._step.item()

The update re-binds the attribute, as ``+=`` on a number does (never in place: a replica made
by ``DataParallel`` shares the original's tensors, and an in-place update would count there).
An int is held as int64 and read as float64 where the expression it is in divides or meets a
float literal, so the value is the one Python's float arithmetic gives; a float is held as
float64. Dynamo turns ``min`` / ``max`` of a tensor into ``clamp``.

Rewritten only where Dynamo recompiled on the attribute's value (``Context.state_lines``), and
only when every read in the methods rewritten stays arithmetic until it meets a tensor (a
comparison, an index, a size, a call other than ``min`` / ``max`` would put a tensor where a
number was: refused, naming the line), the attribute is bound once in ``__init__`` to a number
literal, and it is updated with a number of its own kind. The 0-d tensor is a plain attribute,
as the number was: in no ``state_dict``, untouched by ``.to()`` / ``.half()``; on a GPU it stays on
the CPU (a CPU scalar is legal beside CUDA tensors).

The caveat, which no check on a CPU can show: under CUDA graphs (``torch.compile(...,
mode="reduce-overhead")`` on a GPU) the tensor a call stores is an output of the recorded graph,
which the next call overwrites, and that call raises ("accessing tensor output of CUDAGraphs that
has been overwritten by a subsequent run"; measured on an H100, torch 2.11). Updating it in place
instead would reach the original module through a DataParallel replica. So the fix is planned
only with ``--unsafe-fixes`` and is partially verified: ``mend fix --write --unsafe-fixes``
writes it, a plain ``--write`` names it.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Plan, Refusal, Site, offer_unsafe, single
from rewrites.fixes.conditions import Refuse
from rewrites.fixes.facts import name_nodes
from rewrites.fixes.judgements import code, full_name, is_number_literal, strip_parens, tensorish

RULES = ("GM702",)
UNSAFE_RULES = ("GM702",)  # caveated: planned only with --unsafe-fixes
ORDER = 110
CAVEAT = ("under CUDA graphs (torch.compile mode=\"reduce-overhead\" on a GPU) the tensor a call stores is an "
          "output of the recorded graph, which the next call overwrites: that call raises")

_ARITH = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)
_INT_UPDATES = (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign)
_FLOAT_UPDATES = _INT_UPDATES + (cst.DivideAssign,)
_BINARY = {cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
           cst.DivideAssign: cst.Divide}


def _self_attr(node: cst.CSTNode, name: Optional[str] = None) -> Optional[str]:
    """``self.<attr>`` -> attr (only ``name``, when given)."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        if name is None or node.attr.value == name:
            return node.attr.value
    return None


def _enclosing(an: Analysis, node: cst.CSTNode, kind) -> Optional[cst.CSTNode]:
    p = an.parent(node)
    while p is not None and not isinstance(p, kind):
        p = an.parent(p)
    return p


def _statement(an: Analysis, node: cst.CSTNode) -> cst.CSTNode:
    p = node
    while p is not None and not isinstance(p, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        p = an.parent(p)
    return p


def _methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    return [f for f in cls.body.body if isinstance(f, cst.FunctionDef)]


def _occurrences(node: cst.CSTNode, name: str) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> None:
            if _self_attr(n, name):
                found.append(n)

    node.visit(V())
    return found


class _State:
    """One attribute of one class, and the edits that hold it in a tensor."""

    def __init__(self, an: Analysis, cls: cst.ClassDef, name: str, init: cst.FunctionDef, bound: cst.Assign):
        self.an, self.cls, self.name, self.init, self.bound = an, cls, name, init, bound
        self.kind = "int" if isinstance(_unsigned(bound.value), cst.Integer) else "float"
        self.held = f"_{name}"
        self.reads: dict[int, tuple[cst.Attribute, bool]] = {}  # id -> (node, read as float64)
        self.writes: list[cst.CSTNode] = []  # the statement lines that re-bind it

    # -- what the methods do with it -----------------------------------------------------

    def check(self, methods: list[cst.FunctionDef]) -> None:
        if any(_self_attr(n, self.held) for n in _all_attrs(self.cls)):
            raise Refuse(f"the class already has an attribute `self.{self.held}` to hold it in")
        for f in _methods(self.cls):
            if f.name.value in (self.name, "__getattr__", "__setattr__", "__getattribute__"):
                raise Refuse(f"the class defines `{f.name.value}`: a property `{self.name}` would change it")
        for stmt in self.cls.body.body:
            s = single(stmt)
            if isinstance(s, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value in
                                                 ("__slots__", self.name) for t in s.targets):
                raise Refuse(f"the class body binds `{code(s.targets[0].target)}`")
        for fn in methods:
            for node in _occurrences(fn, self.name):
                self._use(fn, node)

    def _use(self, fn: cst.FunctionDef, node: cst.Attribute) -> None:
        parent = self.an.parent(node)
        line = self.an.span(node)[0]
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            ok = _FLOAT_UPDATES if self.kind == "float" else _INT_UPDATES
            if not isinstance(parent.operator, ok) or not self._number(parent.value):
                raise Refuse(f"`self.{self.name}` is updated at line {line} with "
                             f"`{code(parent.operator).strip()} {code(parent.value)}`, which could change "
                             f"its type ({'an int' if self.kind == 'int' else 'a float'} here)")
            self.writes.append(_statement(self.an, parent))
            return
        if isinstance(parent, cst.AssignTarget):
            stmt = self.an.parent(parent)
            if not isinstance(stmt, cst.Assign) or len(stmt.targets) != 1:
                raise Refuse(f"`self.{self.name}` is bound with others at line {line}")
            if not (self._number(stmt.value) or self._arithmetic_of_itself(stmt.value)):
                raise Refuse(f"`self.{self.name}` is bound at line {line} to `{code(stmt.value)}`, not arithmetic "
                             f"on itself and {self.kind} literals")
            self.writes.append(_statement(self.an, stmt))
            return
        self.reads[id(node)] = (node, self._read(fn, node, set()))

    def _number(self, e: cst.BaseExpression) -> bool:
        e = _unsigned(strip_parens(e))
        return isinstance(e, cst.Float if self.kind == "float" else (cst.Integer,)) or \
            self.kind == "float" and isinstance(e, cst.Integer)

    def _arithmetic_of_itself(self, e: cst.BaseExpression) -> bool:
        """Arithmetic (``min`` / ``max`` included) on the attribute and literals of its kind."""
        e = strip_parens(e)
        if _self_attr(e, self.name) or self._number(e):
            return True
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
            return self._arithmetic_of_itself(e.expression)
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, _ARITH):
            if self.kind == "int" and isinstance(e.operator, cst.Divide):
                return False
            return self._arithmetic_of_itself(e.left) and self._arithmetic_of_itself(e.right)
        if isinstance(e, cst.Call) and full_name(e.func) in ("min", "max") and len(e.args) >= 2:
            return all(a.keyword is None and not a.star and self._arithmetic_of_itself(a.value) for a in e.args)
        return False

    def _read(self, fn: cst.FunctionDef, node: cst.CSTNode, seen: set[str]) -> bool:
        """Follow a read up its expression (and into a local it is bound to) until it meets a
        tensor; raise where a number's other uses are met first. Returns whether the path
        divides or meets a float literal (an int is then read in float64)."""
        facts_tensors = _tensor_names(self.an, fn)
        floaty = False
        cur = node
        while True:
            parent = self.an.parent(cur)
            if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, _ARITH):
                other = parent.right if parent.left is cur else parent.left
                if tensorish(strip_parens(other), facts_tensors):
                    return floaty  # it meets a tensor: the expression was a tensor already
                floaty |= isinstance(parent.operator, cst.Divide) or _has_float(other)
                cur = parent
            elif isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, (cst.Minus, cst.Plus)):
                cur = parent
            elif isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
                call = self.an.parent(parent)
                if not (isinstance(call, cst.Call) and full_name(call.func) in ("min", "max") and len(call.args) >= 2):
                    raise Refuse(f"`self.{self.name}` reaches a call at line {self.an.span(parent)[0]} "
                                 f"(`{code(call)[:60]}`) as a Python number")
                floaty |= any(_has_float(a.value) for a in call.args if a is not parent)
                cur = call
            elif isinstance(parent, (cst.Comma, cst.LeftParen, cst.RightParen)):
                cur = parent  # parentheses are the expression's own
            elif isinstance(parent, cst.Assign) and parent.value is cur and len(parent.targets) == 1 \
                    and isinstance(parent.targets[0].target, cst.Name):
                local = parent.targets[0].target.value
                return self._local(fn, local, seen) or floaty
            elif isinstance(parent, cst.Assign) and parent.value is cur and _self_attr(parent.targets[0].target,
                                                                                      self.name):
                return floaty  # its own update
            else:
                where = self.an.span(cur)[0]
                context = parent
                while context is not None and not isinstance(context, cst.BaseExpression):
                    context = self.an.parent(context)  # a comparison's, not its operand's
                context = context if context is not None else cur
                raise Refuse(f"`self.{self.name}` is used as a Python number at line {where} "
                             f"(`{code(context).splitlines()[0][:70]}`): a tensor there would change "
                             "what the code does")

    def _local(self, fn: cst.FunctionDef, local: str, seen: set[str]) -> bool:
        if local in seen:
            return False
        seen.add(local)
        bindings = [n for n in _names(fn, local) if isinstance(self.an.parent(n), cst.AssignTarget)]
        if len(bindings) != 1 or any(isinstance(self.an.parent(n), (cst.Param,)) for n in _names(fn, local)):
            raise Refuse(f"`{local}`, which holds `self.{self.name}`'s value, is bound more than once")
        floaty = False
        for n in _names(fn, local):
            if isinstance(self.an.parent(n), cst.AssignTarget):
                continue
            floaty |= self._read(fn, n, seen)
        return floaty

    # -- the edits ------------------------------------------------------------------------

    def edits(self, site: Site) -> list[Edit]:
        held, kind = self.held, self.kind
        dtype = ", dtype=torch.float64" if kind == "float" else ""
        out: list[Edit] = []

        def init_build(updated: cst.SimpleStatementLine):
            value = updated.body[0].value
            new = cst.parse_statement(f"self.{held} = torch.tensor({code(value)}{dtype})")
            comment = cst.EmptyLine(comment=cst.Comment(
                "# a 0-d tensor: torch.compile guards on a Python number's value, not on a tensor's"))
            return new.with_changes(leading_lines=[*updated.leading_lines, comment])

        out.append(Edit(_statement(self.an, self.bound), init_build, site))
        prop = cst.parse_module(
            f"@property\ndef {self.name}(self):\n"
            f'    """A Python {kind} to every reader; the methods torch.compile runs use the tensor."""\n'
            f"    return self.{held}.item()\n\n"
            f"@{self.name}.setter\ndef {self.name}(self, value):\n"
            f"    self.{held} = torch.tensor(value{dtype})\n").body

        def init_fn(updated: cst.FunctionDef):
            blank = [cst.EmptyLine(indent=False)]
            return cst.FlattenSentinel([updated, *(s.with_changes(leading_lines=blank) for s in prop)])

        out.append(Edit(self.init, init_fn))
        for node, floaty in self.reads.values():
            text = f"self.{held}.double()" if floaty and kind == "int" else f"self.{held}"
            out.append(Edit(node, lambda _u, text=text: cst.parse_expression(text)))
        out += [Edit(stmt, self._write) for stmt in self.writes]
        return out

    def _write(self, updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        held = f"self.{self.held}"
        w = updated.body[0]
        if isinstance(w, cst.AugAssign):
            value = cst.BinaryOperation(cst.parse_expression(held), _BINARY[type(w.operator)](), w.value)
        else:
            value = w.value
            bare = _unsigned(strip_parens(value))
            if isinstance(bare, (cst.Integer, cst.Float)):
                dtype = ", dtype=torch.float64" if self.kind == "float" else ""
                value = cst.parse_expression(f"torch.tensor({code(value)}{dtype})")
            elif _has_min_max(value):  # min / max hand back the number itself in eager code
                dtype = "torch.float64" if self.kind == "float" else "torch.int64"
                value = cst.parse_expression(f"torch.as_tensor({code(value)}, dtype={dtype})")
        return updated.with_changes(body=[cst.Assign([cst.AssignTarget(cst.parse_expression(held))], value)])


def _unsigned(e: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
        e = e.expression
    return e


def _has_float(e: cst.CSTNode) -> bool:
    found = []

    class V(cst.CSTVisitor):
        def visit_Float(self, n: cst.Float) -> None:
            found.append(n)

    e.visit(V())
    return bool(found)


def _has_min_max(e: cst.CSTNode) -> bool:
    found = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if full_name(n.func) in ("min", "max"):
                found.append(n)

    e.visit(V())
    return bool(found)


def _all_attrs(node: cst.CSTNode) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> None:
            found.append(n)

    node.visit(V())
    return found


def _names(fn: cst.FunctionDef, name: str) -> list[cst.Name]:
    return [n for n in name_nodes(fn.body) if n.value == name]


def _tensor_names(an: Analysis, fn: cst.FunctionDef) -> frozenset[str]:
    from rewrites.fixes.facts import FunctionFacts

    return FunctionFacts(an, fn).tensor_names(10**9)


def _candidate(an: Analysis, node: cst.Attribute) -> Optional[tuple[cst.ClassDef, cst.FunctionDef, cst.Assign]]:
    """The class, its ``__init__`` and the one binding there of ``node``'s attribute to a number
    literal, when the class's other methods bind it again (what makes it change per call)."""
    name = _self_attr(node)
    cls = _enclosing(an, node, cst.ClassDef)
    if name is None or cls is None:
        return None
    init = next((f for f in _methods(cls) if f.name.value == "__init__"), None)
    if init is None:
        return None
    in_init = [n for n in _occurrences(init, name) if isinstance(an.parent(n), (cst.AssignTarget, cst.AugAssign))]
    bound = [an.parent(an.parent(n)) for n in in_init if isinstance(an.parent(n), cst.AssignTarget)]
    if len(in_init) != 1 or len(bound) != 1 or not isinstance(bound[0], cst.Assign) or \
            len(bound[0].targets) != 1 or not is_number_literal(bound[0].value) or \
            _enclosing(an, bound[0], cst.FunctionDef) is not init:
        return None
    rebound = any(isinstance(an.parent(n), (cst.AssignTarget, cst.AugAssign))
                  for f in _methods(cls) if f is not init for n in _occurrences(f, name))
    return (cls, init, bound[0]) if rebound else None


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not ctx.state_lines or not ctx.wants("GM702"):
        return result
    done: set[tuple[int, str]] = set()
    for node in an.findall(cst.Attribute, ctx):
        start, end = an.span(_statement(an, node))
        if not (set(range(start, end + 1)) & ctx.state_lines) or not ctx.covers(start, end):
            continue
        found = _candidate(an, node)
        if found is None or (id(found[0]), node.attr.value) in done:
            continue
        cls, init, bound = found
        name = node.attr.value
        done.add((id(cls), name))
        state = _State(an, cls, name, init, bound)
        # the methods that change it, and the ones Dynamo recompiled in: the others keep the number
        methods = [f for f in _methods(cls) if f is not init and (
            any(isinstance(an.parent(n), (cst.AssignTarget, cst.AugAssign)) for n in _occurrences(f, name))
            or any(an.span(f)[0] <= line <= an.span(f)[1] for line in ctx.state_lines))]
        try:
            state.check(methods)
        except Refuse as why:
            result.refusals.append(Refusal("GM702", start, f"`self.{name}` is not held in a tensor: {why}"))
            continue
        if not offer_unsafe(ctx, result, "GM702", start, cost=CAVEAT,
                            what=f"Holding `self.{name}` in a 0-d tensor behind a property"):
            continue
        site = Site("GM702", start, end, f"`self.{name}`, a Python {state.kind} that changes between calls -> the "
                    f"0-d tensor `self.{state.held}` in the methods that change it; `self.{name}` stays a Python "
                    f"{state.kind} (a property) to every other reader", strategy="state_tensor", caveat=CAVEAT)
        result.edits += state.edits(site)
    return result


_COUNTER = '''import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.step = 0

    def forward(self, x):
        self.step += 1
        warmup = min(1.0, self.step / 100)
        return self.proj(x) * warmup
'''
_TEMPERATURE = '''import torch
from torch import nn


class Annealed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.temperature = 1.0

    def forward(self, x):
        logits = self.proj(x) / self.temperature
        self.temperature = max(0.5, self.temperature * 0.9)
        return torch.softmax(logits, dim=-1)
'''


CASES = [
    Case(_COUNTER, _COUNTER.replace("        self.step = 0\n", """\
        # a 0-d tensor: torch.compile guards on a Python number's value, not on a tensor's
        self._step = torch.tensor(0)

    @property
    def step(self):
        \"\"\"A Python int to every reader; the methods torch.compile runs use the tensor.\"\"\"
        return self._step.item()

    @step.setter
    def step(self, value):
        self._step = torch.tensor(value)
""").replace("self.step += 1", "self._step = self._step + 1").replace(
        "self.step / 100", "self._step.double() / 100"), lines={12}, hints=("state",), unsafe=True),
    Case(_TEMPERATURE, _TEMPERATURE.replace("        self.temperature = 1.0\n", """\
        # a 0-d tensor: torch.compile guards on a Python number's value, not on a tensor's
        self._temperature = torch.tensor(1.0, dtype=torch.float64)

    @property
    def temperature(self):
        \"\"\"A Python float to every reader; the methods torch.compile runs use the tensor.\"\"\"
        return self._temperature.item()

    @temperature.setter
    def temperature(self, value):
        self._temperature = torch.tensor(value, dtype=torch.float64)
""").replace("self.proj(x) / self.temperature", "self.proj(x) / self._temperature").replace(
        "        self.temperature = max(0.5, self.temperature * 0.9)\n", """\
        self._temperature = torch.as_tensor(
            max(0.5, self._temperature * 0.9),
            dtype=torch.float64,
        )
"""), lines={12}, hints=("state",), unsafe=True),
]

# left alone: a length cache compared in a branch (a tensor there would be a data-dependent branch)
CASES.append(Case('''import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self):
        super().__init__()
        self.cached = 0

    def forward(self, x):
        if x.shape[1] > self.cached:
            self.cached = x.shape[1]
        return x
''', lines={11}, hints=("state",), reason="used as a Python number at line 11"))
# left alone: bound in __init__ to something other than a number literal
CASES.append(Case('''class Counter:
    def __init__(self, start):
        self.n = start

    def tick(self, x):
        self.n += 1
        return x * self.n
''', lines={6}, hints=("state",)))
