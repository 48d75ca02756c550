"""The tensor-kind inference over the ``ast`` tree (the kinds and their tables are
:mod:`rewrites.tensors`): what an annotation, a ``torch.*`` / NumPy call and any expression
is (``kind``), and what a binding makes a name (``bind*``), statement by statement.

``KindInference`` is a mixin of :class:`rewrites.analyzer.FunctionContext`: it works on the
context's ``fa`` (the file's imports, classes, inferred returns), ``cls``, ``env`` (the kinds
bound so far), ``ctors``, ``scalar_tensors`` and ``local_callee``, and holds no state of its
own. Nothing here imports torch.
"""

from __future__ import annotations

import ast

from rewrites.file_index import _dotted
from rewrites.tensors import (BOOL, BOOL_METHODS, DATA_DEPENDENT, HOST, HOST_METHODS, META, META_ATTRS,
                              META_METHODS, MODULE, NON_TENSOR_METHODS, OTHER,
                              SCALAR_CONVERSIONS, TENSOR, TENSOR_ATTRS, TENSOR_ONLY_METHODS,
                              TENSORISH, TORCH_BOOL_FUNCS, TORCH_HOST_FUNCS,
                              TORCH_NON_TENSOR_FUNCS, TORCH_TENSOR_SUBMODULES)


def _annotation_kind(ann: ast.AST) -> int:
    """TENSOR for ``Tensor``-like annotations (``torch.FloatTensor``, ``Optional[Tensor]``,
    ``Tensor | None``, ``"torch.Tensor"``), BOOL for ``BoolTensor``, OTHER for any other."""
    t = type(ann)
    name = None
    if t is ast.Name:
        name = ann.id
    elif t is ast.Attribute:
        name = ann.attr
    elif t is ast.Constant:
        text = ann.value
        if isinstance(text, str) and "Tensor" in text:
            return BOOL if "BoolTensor" in text else TENSOR
        return OTHER
    elif t is ast.Subscript:  # Optional[Tensor], Union[Tensor, None]
        inner = ann.slice
        elts = inner.elts if type(inner) is ast.Tuple else (inner,)
        for e in elts:
            k = _annotation_kind(e)
            if k != OTHER:
                return k
        return OTHER
    elif t is ast.BinOp:  # Tensor | None
        k = _annotation_kind(ann.left)
        return k if k != OTHER else _annotation_kind(ann.right)
    if name and name.endswith("Tensor"):
        return BOOL if name == "BoolTensor" else TENSOR
    return OTHER


# NumPy calls whose result is no array (types, limits, contexts, the RNG's seeding)
_NUMPY_NON_ARRAY = frozenset({"dtype", "finfo", "iinfo", "errstate", "printoptions", "set_printoptions",
                              "seterr", "geterr", "result_type", "promote_types", "can_cast", "issubdtype",
                              "isscalar", "ndim", "shape", "size", "get_include", "info", "seed"})


def numpy_call_kind(qn: str) -> int:
    """A NumPy function's result in compiled code: Dynamo traces NumPy as tensors
    (``torch._numpy``), so a branch on ``np.lcm(a, b)`` or ``np.sqrt(16)`` is a data-dependent
    branch (``generic_jump NumpyNdarrayVariable``, measured on torch 2.13) even on Python numbers."""
    last = qn.rsplit(".", 1)[-1]
    return OTHER if last in _NUMPY_NON_ARRAY or last[:1].isupper() or last.startswith("_") else TENSOR


def torch_call_kind(qn: str) -> int:
    parts = qn.split(".")
    if len(parts) < 2:
        return OTHER
    sub = parts[1]
    last = parts[-1]
    if sub == "nn":
        if len(parts) >= 4 and parts[2] == "functional":
            return OTHER if last.startswith(("has_", "handle_", "_")) else TENSOR
        return OTHER
    if len(parts) == 2:
        if last in TORCH_HOST_FUNCS:
            return HOST
        if last in TORCH_BOOL_FUNCS:
            return BOOL
        if last in TORCH_NON_TENSOR_FUNCS or last.startswith(("is_", "_", "get_", "set_", "use_", "are_")) \
                or last[:1].isupper():
            return OTHER
        return TENSOR
    if sub in TORCH_TENSOR_SUBMODULES:
        return TENSOR
    return OTHER


class KindInference:
    """The kind of an expression, and the kinds a statement binds (a FunctionContext's part)."""

    # -- the tensor-kind inference ------------------------------------------------------------------
    def kind(self, e: ast.AST) -> int:
        t = type(e)
        if t is ast.Name:
            return self.env.get(e.id, OTHER)
        if t is ast.Attribute:
            attr = e.attr
            if attr in META_ATTRS:
                return META
            v = e.value
            if type(v) is ast.Name and v.id == "self":
                return self.cls.attr_kinds.get(attr, OTHER) if self.cls is not None else OTHER
            if attr in TENSOR_ATTRS or attr in ("values", "indices"):  # .max(-1).values
                return TENSOR if self.kind(v) in TENSORISH else OTHER
            return OTHER
        if t is ast.Call:
            return self._call_kind(e)
        if t is ast.Compare:
            for op in e.ops:
                if type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn):
                    return OTHER
            if any(type(c) in (ast.List, ast.Tuple) and any(self.kind(x) in TENSORISH for x in c.elts)
                   for c in (e.left, *e.comparators)):
                # `list(t.size()) == [b, n, s]` with a tensor `n`: the element comparison is a
                # tensor, and the list's == reads it into Python (Dynamo: list_richcompare_nonconst)
                return HOST
            best = self.kind(e.left)
            for c in e.comparators:
                k = self.kind(c)
                if k in TENSORISH:
                    return BOOL
                if k == HOST or (k == META and best != HOST):
                    best = k
            if best in TENSORISH:
                return BOOL
            return best if best in (HOST, META) else OTHER
        if t is ast.BinOp:
            a, b = self.kind(e.left), self.kind(e.right)
            if a in TENSORISH or b in TENSORISH:
                if a == BOOL and b in (BOOL, OTHER) and type(e.op) in (ast.BitAnd, ast.BitOr, ast.BitXor):
                    return BOOL
                return TENSOR
            if a == HOST or b == HOST:
                return HOST
            return META if META in (a, b) else OTHER
        if t is ast.UnaryOp:
            k = self.kind(e.operand)
            if type(e.op) is ast.Not:
                return HOST if k in DATA_DEPENDENT else OTHER
            return k
        if t is ast.Subscript:
            k = self.kind(e.value)
            if k == BOOL:
                return BOOL
            return k if k in (TENSOR, META, MODULE, HOST) else OTHER
        if t is ast.BoolOp:
            best = OTHER
            for v in e.values:
                k = self.kind(v)
                if k in TENSORISH:
                    return TENSOR
                if k == HOST or (k == META and best != HOST):
                    best = k
            return best
        if t is ast.IfExp:
            a, b = self.kind(e.body), self.kind(e.orelse)
            return a if a in TENSORISH else b if b in TENSORISH else a if a != OTHER else b
        if t is ast.NamedExpr:
            return self.kind(e.value)
        if t is ast.Starred:
            return self.kind(e.value)
        return OTHER

    def _call_kind(self, e: ast.Call) -> int:
        f = e.func
        tf = type(f)
        if tf is ast.Attribute:
            m = f.attr
            if m in META_METHODS:
                return META
            if m in HOST_METHODS:
                return HOST
            recv = f.value
            if type(recv) is ast.Name:
                root = self.fa.imports.get(recv.id)
                if root is not None:  # a module function: torch.x(...), F.x(...), np.x(...)
                    qn = root + "." + m
                    if qn.startswith("numpy."):
                        return numpy_call_kind(qn)
                    return self._torch_kind(qn, e) if qn.startswith("torch.") else OTHER
                if recv.id == "self":
                    k = self.cls.attr_kinds.get(m, OTHER) if self.cls is not None else OTHER
                    if k == MODULE:
                        return TENSOR
                    callee = self.local_callee(e)
                    return self.fa.inferred_returns.get(callee, OTHER) if callee else OTHER
            elif type(recv) is ast.Attribute:
                qn = self.fa.resolve(f)
                if qn is not None:
                    if qn.startswith("numpy."):
                        return numpy_call_kind(qn)
                    return torch_call_kind(qn) if qn.startswith("torch.") else OTHER
            rk = self.kind(recv)
            if rk in TENSORISH:
                if m in NON_TENSOR_METHODS or m.startswith("get_"):  # get_seq_length(): a mis-annotated cache
                    return OTHER
                return BOOL if m in BOOL_METHODS else TENSOR
            if rk == MODULE:
                return TENSOR if m in ("forward", "__call__") else OTHER
            if m in BOOL_METHODS and not e.args and m not in ("eq", "ne", "gt", "lt", "ge", "le"):
                return BOOL
            if m in TENSOR_ONLY_METHODS and rk not in (META, HOST):
                # tensor-only names on an unknown receiver; max/min/to/view need a hint
                if m in ("max", "min", "to", "view", "cpu", "cuda", "int", "long", "float", "double",
                         "repeat", "sort", "type_as", "expand", "narrow", "reshape", "flatten"):
                    return TENSOR if rk in TENSORISH else OTHER
                return TENSOR
            return OTHER
        if tf is ast.Name:
            n = f.id
            k = self.env.get(n)
            if k == MODULE:
                return TENSOR
            root = self.fa.imports.get(n)
            if root is not None:
                if root.startswith("numpy."):
                    return numpy_call_kind(root)
                return self._torch_kind(root, e) if root.startswith("torch.") else OTHER
            if k is None and n in self.fa.returns:  # def box_iou(...) -> Tensor
                return self.fa.returns[n]
            if k is None and n in self.fa.inferred_returns:  # every `return` of it is a tensor
                return self.fa.inferred_returns[n]
            if n in SCALAR_CONVERSIONS:
                if e.args:
                    ak = self.kind(e.args[0])
                    if ak in DATA_DEPENDENT:
                        return HOST
                    return META if ak == META else OTHER
                return OTHER
            if n == "len":
                return META
            if n in ("abs", "max", "min", "sum", "round"):
                best = OTHER
                for a in e.args:
                    ak = self.kind(a)
                    if ak in TENSORISH:
                        return TENSOR
                    if ak in (HOST, META) and best != HOST:
                        best = ak
                return best
            return OTHER
        if tf is ast.Subscript:
            return TENSOR if self.kind(f) == MODULE else OTHER
        return OTHER

    def _torch_kind(self, qn: str, e: ast.Call) -> int:
        k = torch_call_kind(qn)
        if k == TENSOR:  # torch.zeros(n, dtype=torch.bool): a mask
            for kw in e.keywords:
                if kw.arg == "dtype" and self.fa.resolve(kw.value) == "torch.bool":
                    return BOOL
        return k

    # -- binding ------------------------------------------------------------------------------------
    def bind(self, target: ast.AST, k: int) -> None:
        t = type(target)
        if t is ast.Name:
            # A value read into Python (.item()) broke the graph where it was read; later
            # uses see a plain Python number.
            self.env[target.id] = OTHER if k == HOST else k
        elif t is ast.Tuple or t is ast.List:
            for elt in target.elts:
                self.bind(elt.value if type(elt) is ast.Starred else elt, k)
        elif t is ast.Starred:
            self.bind(target.value, k)

    def _scalar_tensor(self, value: ast.AST) -> bool:
        """``order[0]``, ``scores.argmax()``, ``torch.argmax(scores)``: one element picked out of a
        tensor by its data or position, a 0-d tensor (for a 1-D source)."""
        t = type(value)
        if t is ast.Subscript:
            sl = value.slice
            if type(sl) is ast.UnaryOp and type(sl.op) is ast.USub:
                sl = sl.operand
            return type(sl) is ast.Constant and type(sl.value) is int and self.kind(value.value) == TENSOR
        if t is ast.Call and not value.keywords:
            f = value.func
            if type(f) is ast.Attribute and f.attr in ("argmax", "argmin"):
                qn = self.fa.resolve(f)
                if qn in ("torch.argmax", "torch.argmin"):
                    return len(value.args) == 1
                return not value.args and self.kind(f.value) in TENSORISH
        return False

    def bind_assign(self, targets: list[ast.AST], value: ast.AST) -> None:
        for tg in targets:
            if type(tg) is ast.Name:
                self.scalar_tensors.discard(tg.id)
        if len(targets) == 1 and type(targets[0]) is ast.Name and self._scalar_tensor(value):
            self.scalar_tensors.add(targets[0].id)
        if type(value) is ast.Tuple and len(targets) == 1 and type(targets[0]) in (ast.Tuple, ast.List) \
                and len(targets[0].elts) == len(value.elts):
            for tg, v in zip(targets[0].elts, value.elts):
                self.bind(tg, self.kind(v))
            return
        if type(value) is ast.Call and len(targets) == 1 and type(targets[0]) in (ast.Tuple, ast.List):
            kinds = self.fa.tuple_returns.get(self.local_callee(value) or "")
            if kinds is not None and len(kinds) == len(targets[0].elts):  # a, b = self.helper(x)
                for tg, k in zip(targets[0].elts, kinds):
                    self.bind(tg, k)
                return
        k = self.kind(value)
        for tg in targets:
            self.bind(tg, k)
        if type(value) is ast.Call and len(targets) == 1 and type(targets[0]) is ast.Name:
            parts = _dotted(value.func)
            if parts and parts[-1][:1].isupper():
                self.ctors[targets[0].id] = self.fa.resolve(value.func) or ".".join(parts)

    def _elem_kind(self, it: ast.AST) -> int:
        k = self.kind(it)
        if k == MODULE:
            return MODULE
        if k in TENSORISH:
            return TENSOR
        return META if k == META else OTHER

    def bind_for(self, target: ast.AST, it: ast.AST) -> None:
        if type(it) is ast.Call and type(it.func) is ast.Name and type(target) in (ast.Tuple, ast.List):
            name = it.func.id
            if name == "enumerate" and it.args and len(target.elts) == 2:
                self.bind(target.elts[0], OTHER)
                self.bind(target.elts[1], self._elem_kind(it.args[0]))
                return
            if name == "zip" and len(it.args) == len(target.elts):
                for tg, a in zip(target.elts, it.args):
                    self.bind(tg, self._elem_kind(a))
                return
        self.bind(target, self._elem_kind(it))
