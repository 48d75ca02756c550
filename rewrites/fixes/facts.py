"""Facts about one function read from its source: the names bound before a line, used after
it, and the ones guessed to hold tensors or submodules (``FunctionFacts``); the names an
expression reads (``names_in``); the attributes of self that hold a Python number
(``number_attrs``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from rewrites.fixes.judgements import full_name, is_number_literal, strip_parens, tensorish
from rewrites.tensors import TENSOR_PARAM_NAMES

if TYPE_CHECKING:  # for annotations only: base is never imported at run time (no cycle)
    from rewrites.fixes.base import Analysis


def name_nodes(node: cst.CSTNode) -> list[cst.Name]:
    """The ``Name`` nodes of ``node`` that name variables, in source order (bound or read; an
    attribute's name and a keyword argument's are not variables)."""
    out: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False  # ``x.attr``: attr is not a variable

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False  # keyword names are not variables

    node.visit(V())
    return out


def names_in(node: cst.CSTNode) -> set[str]:
    return {n.value for n in name_nodes(node)}


class FunctionFacts:
    """Names bound in a function before a line, used after a line, and guessed tensors."""

    def __init__(self, analysis: Analysis, fn: Optional[cst.FunctionDef]):
        self.analysis = analysis
        self.fn = fn
        self.bindings: list[tuple[str, int, Optional[cst.BaseExpression]]] = []  # (name, line, value)
        self.uses: list[tuple[str, int]] = []
        self.params: set[str] = set()
        self.tensor_params: set[str] = set()
        # parameters annotated, or defaulted to, a Python number / string / bool (``min_len: int
        # = 2``, ``beta=0.5``): a condition reading only them and ``self`` is a Python value
        self.python_params: set[str] = set()
        # of those, the numbers (``int`` / ``float``, or a number default): a divisor among them
        # is a Python number, the same on both paths of a torch.where
        self.number_params: set[str] = set()
        # names bound only by ``for layer in self.layers`` (or ``enumerate(self.layers)``):
        # submodules, whose calls give tensors (``module_call``)
        self.module_names: frozenset[str] = frozenset()
        if fn is None:
            return
        for p in [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]:
            self.params.add(p.name.value)
            ann = full_name(p.annotation.annotation) if p.annotation else ""
            if ann and ann.split(".")[-1] in ("Tensor", "FloatTensor", "LongTensor", "BoolTensor"):
                self.tensor_params.add(p.name.value)
            elif not ann and p.name.value in TENSOR_PARAM_NAMES:
                self.tensor_params.add(p.name.value)
            elif ann in ("int", "float", "bool", "str") or not ann and p.default is not None and (
                    is_number_literal(p.default) or isinstance(p.default, cst.SimpleString)
                    or isinstance(p.default, cst.Name) and p.default.value in ("True", "False")):
                self.python_params.add(p.name.value)
                if ann in ("int", "float") or not ann and p.default is not None and is_number_literal(p.default):
                    self.number_params.add(p.name.value)
        for p in (fn.params.star_arg, fn.params.star_kwarg):
            if isinstance(p, cst.Param):
                self.params.add(p.name.value)
        facts = self

        class V(cst.CSTVisitor):
            def visit_Assign(self, n: cst.Assign) -> None:
                line = analysis.span(n)[0]
                for t in n.targets:
                    for name in _target_names(t.target):
                        facts.bindings.append((name, line, n.value if isinstance(t.target, cst.Name) else None))

            def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
                if n.value is not None:
                    for name in _target_names(n.target):
                        facts.bindings.append((name, analysis.span(n)[0], n.value))

            def visit_AugAssign(self, n: cst.AugAssign) -> None:
                for name in _target_names(n.target):
                    facts.bindings.append((name, analysis.span(n)[0], None))

            def visit_For(self, n: cst.For) -> None:
                for name in _target_names(n.target):
                    facts.bindings.append((name, analysis.span(n)[0], None))
                loop_modules.extend(_submodule_loop_names(n))

            def visit_WithItem(self, n: cst.WithItem) -> None:
                if n.asname is not None:
                    for name in _target_names(n.asname.name):
                        facts.bindings.append((name, analysis.span(n)[0], None))

            def visit_Name(self, n: cst.Name) -> None:
                facts.uses.append((n.value, analysis.span(n)[0]))

        loop_modules: list[str] = []
        fn.body.visit(V())
        bound = [n for n, _, _ in self.bindings]
        self.python_params -= set(bound)  # rebound in the body: it may hold anything later
        self.number_params -= set(bound)
        self.module_names = frozenset(n for n in loop_modules if bound.count(n) == loop_modules.count(n))

    def defined_before(self, name: str, line: int) -> bool:
        return name in self.params or any(n == name and l < line for n, l, _ in self.bindings)

    def used_after(self, name: str, line: int) -> bool:
        return any(n == name and l > line for n, l in self.uses)

    def tensor_names(self, before: int) -> frozenset[str]:
        """Parameters annotated as tensors, and names last bound before ``before`` to a
        tensor-looking value (iterated so ``a = t * 2; b = a + 1`` marks both)."""
        known = set(self.tensor_params)
        for _ in range(3):
            for name, line, value in self.bindings:
                if line < before and value is not None and tensorish(value, frozenset(known), self.module_names):
                    known.add(name)
        return frozenset(known)


def _submodule_loop_names(n: cst.For) -> list[str]:
    """``for layer in self.layers`` / ``for i, layer in enumerate(self.layers)`` -> [layer]:
    iterating an attribute of self (an ``nn.ModuleList`` / ``nn.Sequential`` in model code)."""
    it, target = n.iter, n.target
    if isinstance(it, cst.Call) and full_name(it.func) == "enumerate" and it.args \
            and isinstance(target, cst.Tuple) and len(target.elements) == 2:
        it, target = it.args[0].value, target.elements[1].value
    name = full_name(it) or ""
    if name.startswith("self.") and name.count(".") == 1 and isinstance(target, cst.Name):
        return [target.value]
    return []


def _target_names(t: cst.CSTNode) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        out = []
        for el in t.elements:
            out.extend(_target_names(el.value))
        return out
    if isinstance(t, cst.StarredElement):
        return _target_names(t.value)
    return []


def number_attrs(an: "Analysis", node: cst.CSTNode) -> frozenset[str]:
    """``self.x`` for the attributes of the class enclosing ``node`` that hold a Python number:
    bound once in the class, in ``__init__``, to a number built from literals, ``__init__``'s
    number parameters (``penalty: float = 1.3``), ``int()`` / ``float()`` / ``math.*`` calls
    and arithmetic on those (``self.scale = head_dim ** -0.5``)."""
    p = an.parent(node)
    while p is not None and not isinstance(p, cst.ClassDef):
        p = an.parent(p)
    if p is None:
        return frozenset()
    init = next((f for f in p.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"), None)
    if init is None:
        return frozenset()
    params = FunctionFacts(an, init).number_params

    def number(e: cst.BaseExpression) -> bool:
        e = strip_parens(e)
        if is_number_literal(e) or isinstance(e, cst.Name) and e.value in params:
            return True
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
            return number(e.expression)
        if isinstance(e, cst.BinaryOperation) and not isinstance(e.operator, cst.MatrixMultiply):
            return number(e.left) and number(e.right)
        if isinstance(e, cst.Call):
            fn = full_name(e.func) or ""
            return fn in ("int", "float") or fn.startswith("math.") and all(number(a.value) for a in e.args)
        return False

    bound: dict[str, list[Optional[cst.BaseExpression]]] = {}

    class V(cst.CSTVisitor):
        def __init__(self, in_init: bool) -> None:
            self.in_init = in_init

        def _bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
            for t in [target, *(e.value for e in getattr(target, "elements", []))]:
                if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                    bound.setdefault(t.attr.value, []).append(value if self.in_init and t is target else None)

        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                self._bind(t.target, n.value)

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            self._bind(n.target, n.value)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            self._bind(n.target, None)

    for f in p.body.body:
        if isinstance(f, cst.FunctionDef):
            f.visit(V(f is init))
    return frozenset(f"self.{a}" for a, vs in bound.items() if len(vs) == 1 and vs[0] is not None and number(vs[0]))
