"""What an opaque region holds (gm5_opaque): its data-dependent op, the ``torch.zeros_like``
accumulator its output is shaped by, the names it writes and binds, what it may not contain,
and the op schema's kind of each input it reads."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis, single
from rewrites.fixes.conditions import Refuse
from rewrites.fixes.facts import FunctionFacts
from rewrites.fixes.gm5_masks import maskish
from rewrites.fixes.judgements import code, full_name
from rewrites.fixes.op_sites import _names

_DATA_DEPENDENT = {"nonzero": "GM501", "argwhere": "GM501", "where": "GM501", "tolist": "GM302"}
_INPLACE_WRITES = frozenset({"index_add_", "index_copy_", "index_put_", "scatter_add_", "scatter_", "masked_scatter_",
                             "index_fill_", "masked_fill_", "copy_", "add_"})
_INT_METHODS = frozenset({"size", "dim", "numel", "item"})
_INT_CALLS = frozenset({"len", "int", "math.prod"})


def _data_dependent(node: cst.CSTNode, bindings=None) -> Optional[tuple[str, str]]:
    """The first data-dependent op under ``node``: (its name, the rule it breaks as). With
    the function's ``bindings``, a read through a boolean mask (``h[lang_mask]``, the mask a
    comparison or a name bound to one: X-MOD's language adapters) counts as well."""
    found: list[tuple[str, str]] = []

    written: set[int] = set()  # ``out[m] = v`` writes through the mask: a fixed shape

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            written.add(id(n.target))

        def visit_Subscript(self, n: cst.Subscript) -> None:
            if bindings is not None and id(n) not in written and any(
                    isinstance(e.slice, cst.Index) and maskish(e.slice.value, bindings) for e in n.slice):
                found.append((code(n), "GM502"))

        def visit_Call(self, n: cst.Call) -> None:
            f = n.func
            name = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else ""
            if name not in _DATA_DEPENDENT:
                return
            if name == "where" and not (full_name(f) == "torch.where" and len(n.args) == 1):
                return
            found.append((name, _DATA_DEPENDENT[name]))

    node.visit(V())
    return found[0] if found else None


def _zeros_like(stmt: cst.CSTNode) -> Optional[tuple[str, str, Optional[str]]]:
    """``A = torch.zeros_like(X)`` -> (A, X, None); ``torch.zeros_like(X, dtype=torch.float32,
    device=X.device)`` (gpt-oss's experts accumulate in float32) -> (A, X, "torch.float32"):
    a dtype written as a torch constant, a device that is X's own."""
    s = single(stmt)
    if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name)):
        return None
    v = s.value
    if not (isinstance(v, cst.Call) and full_name(v.func) == "torch.zeros_like" and v.args
            and v.args[0].keyword is None and isinstance(v.args[0].value, cst.Name)):
        return None
    like, dtype = v.args[0].value.value, None
    for a in v.args[1:]:
        kw = a.keyword.value if a.keyword is not None else None
        if kw == "dtype" and code(a.value) == f"{like}.dtype" or kw == "device" and code(a.value) == f"{like}.device":
            continue  # X's own (gpt-oss, DBRX)
        if kw == "dtype" and (full_name(a.value) or "").startswith("torch."):
            dtype = full_name(a.value)
        else:
            return None
    return s.targets[0].target.value, like, dtype


def _writes(loop: cst.For) -> set[str]:
    """Names the loop writes into in place (``A.index_add_(...)``, ``A[i] = ...``)."""
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            f = n.func
            if isinstance(f, cst.Attribute) and f.attr.value in _INPLACE_WRITES and isinstance(f.value, cst.Name):
                out.add(f.value.value)

        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            if isinstance(n.target, cst.Subscript) and isinstance(n.target.value, cst.Name):
                out.add(n.target.value.value)

    loop.visit(V())
    return out


def _bound(stmts: list[cst.CSTNode]) -> set[str]:
    """Names the statements bind (assignments, loop targets, ``with ... as``, augmented)."""
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            out.update(_names(n.target))

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            out.update(_names(n.target))

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            out.update(_names(n.target))

        def visit_For(self, n: cst.For) -> None:
            out.update(_names(n.target))

        def visit_AsName(self, n: cst.AsName) -> None:
            out.update(_names(n.name))

        def visit_NamedExpr(self, n: cst.NamedExpr) -> None:
            out.update(_names(n.target))

        def visit_CompFor(self, n: cst.CompFor) -> bool:
            return True

    for s in stmts:
        s.visit(V())
    return out


class Unmovable(cst.CSTVisitor):
    """Collects, in ``why``, what statements moved into a module-level function of their own
    would not run alike there: a ``yield``, an ``await``, ``global`` / ``nonlocal``, a nested
    function (what it closes over stays behind)."""

    def __init__(self) -> None:
        super().__init__()
        self.why: list[str] = []

    def visit_Yield(self, n) -> None:
        self.why.append("it yields")

    def visit_Await(self, n) -> None:
        self.why.append("it awaits")

    def visit_Global(self, n) -> None:
        self.why.append("it declares a global")

    def visit_Nonlocal(self, n) -> None:
        self.why.append("it declares a nonlocal")

    def visit_FunctionDef(self, n) -> bool:
        self.why.append("it defines a function")
        return False


def _check_body(stmts: list[cst.CSTNode], inputs: set[str], acc: str) -> None:
    """Refuse what an opaque region cannot hold."""

    class V(Unmovable):
        def visit_Return(self, n) -> None:
            self.why.append("it returns from the function")

        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            self._target(n.target)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            self._target(n.target)

        def _target(self, t: cst.CSTNode) -> None:
            if isinstance(t, cst.Attribute):
                self.why.append(f"it assigns `{code(t)}` (state outside the region)")
            elif isinstance(t, cst.Subscript):
                root = t.value
                while isinstance(root, (cst.Subscript, cst.Attribute)):
                    root = root.value
                if isinstance(root, cst.Name) and root.value != acc and root.value in inputs:
                    self.why.append(f"it writes into `{root.value}`, an input of the region")
            elif isinstance(t, (cst.Tuple, cst.List)):
                for el in t.elements:
                    self._target(el.value)

        def visit_Call(self, n: cst.Call) -> None:
            f = n.func
            if (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value in inputs
                    and f.value.value != acc and (f.attr.value.endswith("_") and not f.attr.value.startswith("_")
                                                  or f.attr.value in ("append", "extend", "update", "pop"))):
                self.why.append(f"it mutates `{f.value.value}`, an input of the region (`{code(f)}`)")

    v = V()
    for s in stmts:
        s.visit(v)
    if v.why:
        raise Refuse(v.why[0])


def _kind(an: Analysis, fn: cst.FunctionDef, facts: FunctionFacts, name: str, before: int) -> str:
    """The op schema's type of a region input: "tensor", "int", "float" or "bool"."""
    params = {p.name.value: p for p in [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]}
    value: Optional[cst.BaseExpression] = None
    tuple_value = False
    last = -1
    for a in _assigns(fn):
        line = an.span(a)[0]
        if line >= before or line < last:
            continue
        for t in a.targets:
            if name in _names(t.target):
                value, tuple_value, last = a.value, not isinstance(t.target, cst.Name), line
    if value is None and name in params:
        p = params[name]
        ann = full_name(p.annotation.annotation) if p.annotation else None
        if ann in ("int", "float", "bool"):
            return ann
        if p.default is not None and isinstance(p.default, (cst.Integer, cst.Float)):
            return "int" if isinstance(p.default, cst.Integer) else "float"
        return "tensor"
    if value is None:
        return "tensor"
    if tuple_value:
        # ``b, s, h = x.shape`` / ``x.size()``: numbers
        if isinstance(value, cst.Attribute) and value.attr.value == "shape":
            return "int"
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size":
            return "int"
        return "tensor"
    return _value_kind(value)


def _value_kind(v: cst.BaseExpression) -> str:
    if isinstance(v, cst.Integer):
        return "int"
    if isinstance(v, cst.Float):
        return "float"
    if isinstance(v, cst.Subscript) and isinstance(v.value, cst.Attribute) and v.value.attr.value == "shape":
        return "int"
    if isinstance(v, cst.Call):
        fn = full_name(v.func) or ""
        if fn in _INT_CALLS or (isinstance(v.func, cst.Attribute) and v.func.attr.value in _INT_METHODS
                                and not fn.startswith("torch.")):
            return "int"
        if fn == "float":
            return "float"
        if fn == "bool":
            return "bool"
    return "tensor"


def _assigns(node: cst.CSTNode) -> list[cst.Assign]:
    """Every assignment under ``node`` (a function, a statement), in source order."""
    out: list[cst.Assign] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            out.append(n)

    node.visit(V())
    return out
