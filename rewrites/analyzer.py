"""One file, one pass: the stdlib ``ast`` tree walked function by function, statement by
statement, with the tensor-kind inference of :mod:`rewrites.tensors` and the detectors of
every rule family (``rewrites.rules.HOOKS``). Also collects what the compiled-region
analysis (:mod:`rewrites.regions`) needs: imports, classes, call edges, compile roots.

Nothing here imports torch or libcst; everything returned is picklable (worker processes).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

from rewrites.guards import compiled_value, eager_operands, flag_wrapper, is_mend_helper, terminates
from rewrites.tensors import (BOOL, BOOL_METHODS, DATA_DEPENDENT, HOST, HOST_METHODS, META, META_ATTRS,
                              META_METHODS, MODULE, NON_TENSOR_METHODS, OTHER,
                              SCALAR_CONVERSIONS, TENSOR, TENSOR_ATTRS, TENSOR_ONLY_METHODS,
                              TENSOR_PARAM_NAMES, TENSORISH, TORCH_BOOL_FUNCS, TORCH_HOST_FUNCS,
                              TORCH_NON_TENSOR_FUNCS, TORCH_TENSOR_SUBMODULES)

COMPILE_NAMES = frozenset({"torch.compile", "torch._dynamo.optimize"})
PARTIAL_NAMES = frozenset({"functools.partial"})
TARGET_PREFIX = "mend_target"  # graphmend.core.discovery: what it returns is compiled
DISABLE_NAMES = frozenset({"torch._dynamo.disable", "torch.compiler.disable", "torch._disable_dynamo",
                           "torch._dynamo.eval_frame.disable"})
# Unresolvable base classes with these name endings count as nn.Module subclasses.
MODULE_NAME_SUFFIXES = ("Module", "PreTrainedModel")
LOCAL_MODULE_SUFFIXES = ("Module", "PreTrainedModel", "Layer", "Block")


class RawFinding(NamedTuple):
    code: str
    line: int
    col0: int  # 0-based UTF-8 byte offset, as ast gives it
    end_line: Optional[int]
    end_col0: Optional[int]
    message: str
    fix_hint: str
    func_key: str  # outermost function ("Class.method" / "func"): the region unit
    function: str  # full qualified name (nested functions included)
    stmt_line: int  # first line of the enclosing statement (suppressions)
    needs_root: bool  # only reported when the function is itself a compiled root


@dataclass
class ClassInfo:
    name: str
    bases: list[str]  # dotted names (resolved through imports) or local class names
    methods: set[str] = field(default_factory=set)
    attr_kinds: dict[str, int] = field(default_factory=dict)
    attr_types: dict[str, str] = field(default_factory=dict)  # self.x = Cls(...): dotted Cls
    buffers: set[str] = field(default_factory=set)  # self.x = nn.Buffer(...) (GM606)
    module_like: bool = False  # decided locally (for the tensor-name heuristic)


@dataclass
class FileIndex:
    """What the cross-file region analysis needs to know about one file."""

    path: str
    module: str  # dotted name relative to the scanned root
    imports: dict[str, str] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)
    edges: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    roots: set[str] = field(default_factory=set)  # dotted names: functions, classes, "Cls.method"
    disabled: set[str] = field(default_factory=set)  # func keys


def _dotted(node: ast.AST) -> Optional[list[str]]:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is ast.Name:
        parts.append(node.id)
        parts.reverse()
        return parts
    return None


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


class FileAnalysis:
    def __init__(self, tree: ast.Module, path: str, module: str, is_package: bool,
                 enabled: Optional[frozenset[str]], hooks: dict[type, tuple], want_compile: bool):
        self.tree = tree
        self.enabled = enabled
        self.hooks = hooks
        self.findings: list[RawFinding] = []
        self.index = FileIndex(path=path, module=module)
        self.is_package = is_package
        self.imports = self.index.imports
        self.want_compile = want_compile
        self.local_roots: set[str] = set()  # func keys compiled in this file (tensor-name heuristic)
        self.flag_wrappers: set[str] = set()  # functions that only return is_compiling() (rewrites.guards)
        self.returns: dict[str, int] = {}  # module-level function -> TENSOR / BOOL from its `-> Tensor`
        # inferred from the file itself (``_infer_signatures``): what a function or method of this
        # file returns, a tuple's kinds element by element, and the kinds of its parameters where
        # every call of it in the file passes a tensor (func key -> ...)
        self.inferred_returns: dict[str, int] = {}
        self.tuple_returns: dict[str, tuple[int, ...]] = {}
        self.param_kinds: dict[str, dict[str, int]] = {}

    # -- resolution ---------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> Optional[str]:
        """The dotted name a Name/Attribute chain refers to through this file's imports."""
        parts = _dotted(node)
        if parts is None:
            return None
        root = self.imports.get(parts[0])
        if root is None:
            return None
        return root if len(parts) == 1 else root + "." + ".".join(parts[1:])

    def _absolute(self, module: Optional[str], level: int) -> str:
        if not level:
            return module or ""
        parts = self.index.module.split(".") if self.index.module else []
        if not self.is_package:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: max(0, len(parts) - (level - 1))]
        if module:
            parts = parts + module.split(".")
        return ".".join(parts)

    def _collect_imports(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            t = type(s)
            if t is ast.Import:
                for a in s.names:
                    if a.asname:
                        self.imports[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.imports[top] = top
            elif t is ast.ImportFrom:
                base = self._absolute(s.module, s.level)
                for a in s.names:
                    if a.name != "*":
                        self.imports[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
            elif t is ast.If or t is ast.Try or (hasattr(ast, "TryStar") and t is getattr(ast, "TryStar")):
                self._collect_imports(s.body)
                self._collect_imports(s.orelse)
                for h in getattr(s, "handlers", ()):
                    self._collect_imports(h.body)

    # -- the pass ------------------------------------------------------------------------------
    def run(self) -> None:
        body = self.tree.body
        self._collect_imports(body)
        mod = self.index.module
        funcs = []
        for s in body:
            t = type(s)
            if t is ast.FunctionDef or t is ast.AsyncFunctionDef:
                self.index.functions.add(s.name)
                funcs.append((s, None))
                if s.returns is not None and _annotation_kind(s.returns) in TENSORISH:
                    self.returns[s.name] = _annotation_kind(s.returns)
            elif t is ast.ClassDef:
                info = self._class_info(s)
                self.index.classes[s.name] = info
                for m in s.body:
                    if type(m) is ast.FunctionDef or type(m) is ast.AsyncFunctionDef:
                        info.methods.add(m.name)
                        funcs.append((m, info))
        for s, info in funcs:
            key = f"{info.name}.{s.name}" if info else s.name
            for d in s.decorator_list:
                qn = self.resolve(d.func if type(d) is ast.Call else d)
                if qn in COMPILE_NAMES:
                    self.index.roots.add(f"{mod}.{key}" if mod else key)
                    self.local_roots.add(key)
                elif qn in DISABLE_NAMES:
                    self.index.disabled.add(key)
        for s, info in funcs:
            if info is None and s.name.startswith(TARGET_PREFIX):
                self._target_roots(s)
            elif info is None and flag_wrapper(s, lambda n: self.resolve(n) or ".".join(_dotted(n) or ())):
                self.flag_wrappers.add(s.name)
        if self.want_compile:
            # module-level torch.compile(f) / torch.compile(Model()) calls
            ctx = FunctionContext(self, None, "<module>", "<module>", {}, False)
            for s in body:
                if type(s) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                    for n in ast.walk(s):
                        if type(n) is ast.Call:
                            ctx.note_compile(n)
                    if type(s) is ast.Assign and type(s.value) is ast.Call:  # model = Net(); torch.compile(model.step)
                        ctx.bind_assign(s.targets, s.value)
        self._infer_signatures(funcs)
        for s, info in funcs:
            key = f"{info.name}.{s.name}" if info else s.name
            if key in self.index.disabled:
                continue  # Dynamo never traces it: calls to it are GM605
            if info is None and is_mend_helper(s):
                continue  # mend's own repaired form (rewrites.guards)
            heuristic = (info is not None and info.module_like) or key in self.local_roots or s.name == "forward"
            ctx = FunctionContext(self, info, key, key, {}, heuristic)
            ctx.run_function(s)

    def _infer_signatures(self, funcs: list) -> None:
        """What this file's functions return and take, read from the file: a silent walk of
        every function (no detector runs) records the kind of each ``return`` and, at each call
        of a function or ``self.<method>`` of the file, the kinds of its arguments. Twice, so
        that a value returned by one helper and handed to another is seen (Longformer's
        ``max_num_global_attn_indices``: ``num.max()`` returned by ``_get_global_attn_indices``,
        then a parameter of ``_compute_attn_output_with_global_indices``). A return kind needs
        every ``return`` of the function to agree; a parameter kind, every call in the file."""
        by_key = {(f"{info.name}.{s.name}" if info else s.name): (s, info) for s, info in funcs}
        hooks, self.hooks = self.hooks, {}
        try:
            for _ in range(2):
                rets: dict[str, list] = {}
                calls: dict[str, list[dict[str, int]]] = {}
                numpy: set[str] = set()  # functions with a path that returns a NumPy value

                def on_return(node: ast.Return, ctx: "FunctionContext") -> None:
                    if ctx.qualname == ctx.func_key:
                        rets.setdefault(ctx.func_key, []).append(ctx.value_kinds(node.value))
                        if ctx.numpy_valued(node.value):
                            numpy.add(ctx.func_key)

                def on_call(node: ast.Call, ctx: "FunctionContext") -> None:
                    callee = ctx.local_callee(node)
                    if callee in by_key:
                        # `self.m(x)` binds self; `Cls.m(obj, x)` passes it (a static method takes none)
                        bound = type(node.func) is ast.Attribute and node.func.value.id == "self"
                        calls.setdefault(callee, []).append(_argument_kinds(by_key[callee][0], node, ctx, bound))

                self.hooks = {ast.Return: (on_return,), ast.Call: (on_call,)}
                for key, (fn, info) in by_key.items():
                    heuristic = (info is not None and info.module_like) or key in self.local_roots \
                        or fn.name == "forward"
                    ctx = FunctionContext(self, info, key, key, {}, heuristic)
                    ctx.eager = True  # nothing is reported, no region edge is drawn
                    ctx.run_function(fn)
                self.inferred_returns, self.tuple_returns = {}, {}
                for key, kinds in rets.items():
                    if key in numpy:
                        # Reformer's chunk length: a config int on one path, `np.lcm(...)` on another
                        # (the one its default config takes); a NumPy value is a tensor to Dynamo
                        self.inferred_returns[key] = TENSOR
                    elif all(type(k) is int for k in kinds) and all(k in TENSORISH for k in kinds):
                        self.inferred_returns[key] = BOOL if all(k == BOOL for k in kinds) else TENSOR
                    elif all(type(k) is tuple for k in kinds) and len({len(k) for k in kinds}) == 1:
                        self.tuple_returns[key] = tuple(
                            (BOOL if all(k[i] == BOOL for k in kinds) else TENSOR)
                            if all(k[i] in TENSORISH for k in kinds) else OTHER for i in range(len(kinds[0])))
                self.param_kinds = {}
                for key, sites in calls.items():
                    names = set().union(*sites)
                    tensor = {n: TENSOR for n in names if all(site.get(n) in TENSORISH for site in sites)}
                    if tensor:
                        self.param_kinds[key] = tensor
        finally:
            self.hooks = hooks

    def _target_roots(self, fn: ast.AST) -> None:
        """What a ``mend_target*`` function returns is what mend compiles: the callable of its
        ``(fn, args[, kwargs])`` tuple or of its ``Target(fn, ...)``. Read before the walk, so the
        returned function is walked as a root (its tensor-named parameters are tensors)."""
        ctx = FunctionContext(self, None, fn.name, fn.name, {}, False)
        ctx.edges = set()
        for n in ast.walk(fn):
            t = type(n)
            if t is ast.Assign and len(n.targets) == 1 and type(n.targets[0]) is ast.Name \
                    and type(n.value) is ast.Call:
                parts = _dotted(n.value.func)
                if parts and parts[-1][:1].isupper():
                    ctx.ctors[n.targets[0].id] = self.resolve(n.value.func) or ".".join(parts)
            elif t is ast.Return and n.value is not None:
                v = n.value
                if type(v) is ast.Tuple and v.elts:
                    ctx.note_root(v.elts[0])
                elif type(v) is ast.Call and (_dotted(v.func) or [""])[-1] == "Target":
                    fn_arg = v.args[0] if v.args else next((k.value for k in v.keywords if k.arg == "fn"), None)
                    if fn_arg is not None:
                        ctx.note_root(fn_arg)

    def _class_info(self, cls: ast.ClassDef) -> ClassInfo:
        bases = []
        module_like = False
        for b in cls.bases:
            parts = _dotted(b)
            if parts is None:
                continue
            qn = self.resolve(b)
            name = qn or ".".join(parts)
            bases.append(name)
            local = self.index.classes.get(name)
            if (qn and qn.startswith("torch.nn.") and qn.rsplit(".", 1)[1][:1].isupper()) \
                    or (local is not None and local.module_like) or parts[-1].endswith(LOCAL_MODULE_SUFFIXES):
                module_like = True
        info = ClassInfo(name=cls.name, bases=bases, module_like=module_like)
        for b in bases:  # inherit attribute kinds from classes of this file
            local = self.index.classes.get(b)
            if local is not None:
                info.attr_kinds.update(local.attr_kinds)
                info.attr_types.update(local.attr_types)
                info.buffers |= local.buffers
        for m in cls.body:
            if type(m) is ast.FunctionDef and ("init" in m.name or "build" in m.name or m.name == "setup"):
                self._attr_kinds(m, info)
        return info

    def _attr_kinds(self, fn: ast.FunctionDef, info: ClassInfo) -> None:
        # statements only (no expression walk): self.x = Ctor(...), self.register_buffer("x", ...)
        todo = list(fn.body)
        while todo:
            n = todo.pop()
            t = type(n)
            if t is ast.Assign:
                value = n.value
                if type(value) is not ast.Call:
                    continue
                k = self._constructor_kind(value)
                if k == OTHER:
                    continue
                for tgt in n.targets:
                    if type(tgt) is ast.Attribute and type(tgt.value) is ast.Name and tgt.value.id == "self":
                        info.attr_kinds[tgt.attr] = k
                        if _dotted(value.func)[-1] == "Buffer":
                            info.buffers.add(tgt.attr)
                        if k == MODULE and type(value.func) is ast.Name:
                            name = value.func.id
                            if name in self.index.classes or name in self.index.functions:
                                mod = self.index.module
                                info.attr_types[tgt.attr] = f"{mod}.{name}" if mod else name
                            elif name in self.imports:
                                info.attr_types[tgt.attr] = self.imports[name]
            elif t is ast.Expr:
                c = n.value
                if type(c) is ast.Call and type(c.func) is ast.Attribute \
                        and c.func.attr in ("register_buffer", "register_parameter") \
                        and c.args and type(c.args[0]) is ast.Constant and isinstance(c.args[0].value, str):
                    info.attr_kinds[c.args[0].value] = TENSOR
            elif t in (ast.If, ast.For, ast.With, ast.Try):
                todo.extend(n.body)
                todo.extend(getattr(n, "orelse", ()))

    def _constructor_kind(self, call: ast.Call) -> int:
        parts = _dotted(call.func)
        if parts is None:
            return OTHER
        qn = self.resolve(call.func) or ".".join(parts)
        last = parts[-1]
        if last in ("Parameter", "Buffer"):
            return TENSOR
        if qn.startswith("torch."):
            if qn.startswith("torch.nn.") and last[:1].isupper():
                return MODULE
            k = torch_call_kind(qn)
            return TENSOR if k in TENSORISH else OTHER
        if last[:1].isupper() and not last.isupper() and not last.endswith(("Config", "Error", "Exception")):
            local = self.index.classes.get(last)
            if local is not None and not local.module_like:
                return OTHER
            return MODULE
        return OTHER


def _argument_kinds(fn: ast.AST, call: ast.Call, ctx: "FunctionContext", bound: bool) -> dict[str, int]:
    """The kind of each argument of ``call`` by the parameter of ``fn`` it binds (``self`` /
    ``cls`` left out of a call through ``self``; a ``*args`` call binds nothing after it)."""
    a = fn.args
    params = [p.arg for p in (*a.posonlyargs, *a.args)]
    decorators = {(_dotted(d) or [""])[-1] for d in fn.decorator_list}
    if params and (bound and "staticmethod" not in decorators or "classmethod" in decorators):
        params = params[1:]
    out: dict[str, int] = {}
    for i, arg in enumerate(call.args):
        if type(arg) is ast.Starred:
            break
        if i < len(params):
            out[params[i]] = ctx.kind(arg)
    named = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    for kw in call.keywords:
        if kw.arg is not None and kw.arg in named:
            out[kw.arg] = ctx.kind(kw.value)
    return out


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


class FunctionContext:
    """The state while one function is walked; what detectors query and report through."""

    def __init__(self, fa: FileAnalysis, cls: Optional[ClassInfo], func_key: str, qualname: str,
                 env: dict[str, int], heuristic: bool):
        self.fa = fa
        self.cls = cls
        self.func_key = func_key
        self.qualname = qualname
        self.env = env
        self.heuristic = heuristic  # unannotated tensor-named params are tensors
        self.ctors: dict[str, str] = {}  # name -> dotted class it was constructed from
        self.scalar_tensors: set[str] = set()  # names bound to a 0-d tensor read from data (GM303 as an index)
        self.stmt: Optional[ast.stmt] = None
        self.in_test = False  # the node is (inside) the condition of if/while/assert/ternary
        self.eager = False  # the node is in code torch.compile never traces (rewrites.guards): no finding
        self.if_tests: list[ast.expr] = []  # the conditions of the ``if`` bodies the statement is in
        self.function_node: Optional[ast.AST] = None
        self.edges = fa.index.edges.setdefault(func_key, set()) if func_key != "<module>" else set()

    # -- reporting ------------------------------------------------------------------------------
    def report(self, code: str, node: ast.AST, message: str, fix_hint: str = "", needs_root: bool = False) -> None:
        enabled = self.fa.enabled
        if (enabled is not None and code not in enabled) or self.eager:
            return
        stmt = self.stmt
        self.fa.findings.append(RawFinding(
            code, node.lineno, node.col_offset, getattr(node, "end_lineno", None),
            getattr(node, "end_col_offset", None), message, fix_hint, self.func_key, self.qualname,
            stmt.lineno if stmt is not None else node.lineno, needs_root))

    def resolve(self, node: ast.AST) -> Optional[str]:
        return self.fa.resolve(node)

    def name_of(self, node: ast.AST) -> Optional[str]:
        """Dotted name through the imports, else as written (a fragment without its imports)."""
        parts = _dotted(node)
        if parts is None:
            return None
        if len(parts) == 1 and parts[0] in self.fa.flag_wrappers:
            return "torch.compiler.is_compiling"  # def _compiling(): return torch.compiler.is_compiling()
        return self.fa.resolve(node) or ".".join(parts)

    def run_eager(self, stmts: list[ast.stmt]) -> None:
        """A block compiled code never runs: walked (names still bind), nothing reported."""
        outer, self.eager = self.eager, True
        try:
            self.run_block(stmts)
        finally:
            self.eager = outer

    def value_kinds(self, value: Optional[ast.AST]):
        """A returned value's kind, or a tuple display's kinds element by element."""
        if value is None:
            return OTHER
        if type(value) is ast.Tuple and not any(type(e) is ast.Starred for e in value.elts):
            return tuple(self.kind(e) for e in value.elts)
        return self.kind(value)

    def numpy_valued(self, value: Optional[ast.AST]) -> bool:
        """``np.<f>(...)`` whose result is an array or NumPy scalar."""
        if type(value) is not ast.Call:
            return False
        qn = self.fa.resolve(value.func) or ""
        return qn.startswith("numpy.") and numpy_call_kind(qn) == TENSOR

    def local_callee(self, call: ast.Call) -> Optional[str]:
        """The func key of this file's function or method that ``call`` calls, if it is one:
        ``helper(...)``, ``self.method(...)``, ``Cls.method(...)``."""
        f = call.func
        if type(f) is ast.Name:
            return f.id if f.id in self.fa.index.functions and f.id not in self.env else None
        if type(f) is ast.Attribute and type(f.value) is ast.Name:
            owner = f.value.id
            if owner == "self" and self.cls is not None:
                for cls in self._class_chain():
                    if f.attr in cls.methods:
                        return f"{cls.name}.{f.attr}"
                return None
            cls = self.fa.index.classes.get(owner)
            if cls is not None and f.attr in cls.methods and owner not in self.env:
                return f"{owner}.{f.attr}"
        return None

    def _class_chain(self) -> list:
        """This class and its bases defined in the file, nearest first."""
        out, todo = [], [self.cls]
        while todo:
            c = todo.pop(0)
            if c is None or c in out:
                continue
            out.append(c)
            todo.extend(self.fa.index.classes.get(b) for b in c.bases)
        return out

    def is_data_dependent(self, node: ast.AST) -> bool:
        return self.kind(node) in DATA_DEPENDENT

    def is_tensor(self, node: ast.AST) -> bool:
        return self.kind(node) in TENSORISH

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

    # -- calls: region edges, compile roots ---------------------------------------------------------
    def note_call(self, n: ast.Call) -> None:
        f = n.func
        tf = type(f)
        if tf is ast.Attribute:
            v = f.value
            if type(v) is ast.Name:
                if v.id == "self":
                    self.edges.add(("self", f.attr))
                    if self.cls is not None and f.attr in self.cls.attr_types:  # self.proj(x): its forward
                        self.edges.add(("name", self.cls.attr_types[f.attr] + ".forward"))
                    return
                if v.id in self.ctors:  # solver = Solver(...); solver.step(...), or solver: Solver
                    self.edges.add(("name", f"{self._local_or_import(self.ctors[v.id])}.{f.attr}"))
                root = self.fa.imports.get(v.id)
                if root is not None:
                    qn = root + "." + f.attr
                    if qn in COMPILE_NAMES:
                        self.note_compile(n)
                    elif not qn.startswith(("torch.", "numpy.", "math.", "os.", "sys.")):
                        self.edges.add(("name", qn))
            elif type(v) is ast.Attribute and type(v.value) is ast.Name and v.value.id == "self" \
                    and self.cls is not None and v.attr in self.cls.attr_types:  # self.cache.update(...)
                self.edges.add(("name", f"{self.cls.attr_types[v.attr]}.{f.attr}"))
            elif f.attr == "compile" and self.fa.want_compile:
                self.note_compile(n)
        elif tf is ast.Name:
            name = f.id
            if name in self.fa.index.functions:
                mod = self.fa.index.module
                self.edges.add(("name", f"{mod}.{name}" if mod else name))
            else:
                root = self.fa.imports.get(name)
                if root is not None:
                    if root in COMPILE_NAMES:
                        self.note_compile(n)
                    elif not root.startswith(("torch.", "numpy.", "math.")):
                        self.edges.add(("name", root))

    def note_compile(self, n: ast.Call) -> None:
        """``torch.compile(fn)`` / ``torch.compile(model.step, mode=...)`` / ``torch.compile(model=fn)``
        / ``torch.compile(backend=...)(fn)``: what it wraps is a compiled root."""
        f = n.func
        if type(f) is ast.Call and self.fa.resolve(f.func) in COMPILE_NAMES and not f.args:
            if n.args:
                self.note_root(n.args[0])
            return
        if self.fa.resolve(f) not in COMPILE_NAMES:
            return
        a = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "model"), None)
        if a is not None:
            self.note_root(a)

    def note_root(self, a: ast.AST) -> None:
        """``a`` is compiled: a function or class of the tree (maybe a constructed one), a method of
        an object built from one (``solver.step``, ``self.train_step``), or one wrapped by
        ``torch.compile`` / ``functools.partial``."""
        mod = self.fa.index.module
        local = (lambda name: f"{mod}.{name}" if mod else name)
        ta = type(a)
        if ta is ast.Call:
            qn = self.fa.resolve(a.func)
            if (qn in COMPILE_NAMES or qn in PARTIAL_NAMES) and a.args:
                self.note_root(a.args[0])
                return
            a = a.func
            ta = type(a)
        if ta is ast.Name:
            name = a.id
            if name in self.fa.index.functions or name in self.fa.index.classes:
                self.fa.index.roots.add(local(name))
                self.fa.local_roots.add(name)
            elif name in self.ctors:
                self.fa.index.roots.add(self._local_or_import(self.ctors[name]))
            elif name in self.fa.imports:
                self.fa.index.roots.add(self.fa.imports[name])
        elif ta is ast.Attribute:
            parts = _dotted(a)
            cls = self.ctors.get(parts[0]) if parts else None  # torch.compile(model.forward), solver.step
            if parts is None and type(a.value) is ast.Call:  # torch.compile(Solver(cfg).step)
                made = _dotted(a.value.func)
                if made and made[-1][:1].isupper():
                    parts, cls = ["", a.attr], self.fa.resolve(a.value.func) or ".".join(made)
            if parts and parts[0] == "self" and len(parts) == 2 and self.cls is not None:  # compile(self.step)
                key = f"{self.cls.name}.{parts[1]}"
                self.fa.index.roots.add(local(key))
                self.fa.local_roots.add(key)
            elif cls is not None:
                self.fa.index.roots.add(self._local_or_import(cls) + "." + ".".join(parts[1:]))
                if cls in self.fa.index.classes and len(parts) == 2:
                    self.fa.local_roots.add(f"{cls}.{parts[1]}")
            elif parts:
                qn = self.fa.resolve(a)
                if qn:
                    self.fa.index.roots.add(qn)

    def _local_or_import(self, dotted: str) -> str:
        mod = self.fa.index.module
        if dotted in self.fa.index.classes or dotted in self.fa.index.functions:
            return f"{mod}.{dotted}" if mod else dotted
        return dotted

    # -- the walk -------------------------------------------------------------------------------------
    def run_function(self, fn: ast.AST) -> None:
        self.function_node = fn
        args = fn.args
        env = self.env
        heuristic = self.heuristic
        inferred = self.fa.param_kinds.get(self.func_key, {}) if self.qualname == self.func_key else {}
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is None:
                continue
            if a.annotation is not None:
                env[a.arg] = _annotation_kind(a.annotation)
                parts = _dotted(a.annotation)
                if parts and parts[-1][:1].isupper() and env[a.arg] == OTHER:  # scheduler: DDIMScheduler
                    self.ctors[a.arg] = self.fa.resolve(a.annotation) or ".".join(parts)
            elif heuristic and a.arg in TENSOR_PARAM_NAMES:
                env[a.arg] = TENSOR
            else:
                # every call of it in this file passes a tensor there (_infer_signatures)
                env[a.arg] = inferred.get(a.arg, OTHER)
        if args.vararg is not None and env.get(args.vararg.arg) in TENSORISH:
            env[args.vararg.arg] = OTHER  # *args: a tuple of tensors, not a tensor
        if self.cls is not None and (args.posonlyargs or args.args):
            first = (args.posonlyargs or args.args)[0].arg
            env[first] = OTHER
        self.run_block(fn.body)

    def run_block(self, stmts: list[ast.stmt]) -> None:
        hooks = self.fa.hooks
        visit = self.visit_expr
        for i, s in enumerate(stmts):
            self.stmt = s
            t = type(s)
            conditional = t is ast.If or t is ast.While or t is ast.Assert
            # decided: which arm compiled code takes; the statement's own hooks see a condition
            # compiled code decides on the flags alone, reading nothing else first
            decided = compiled_value(s.test, self.name_of, first=False) if conditional else None
            hs = hooks.get(t)
            if hs:
                outer = self.eager
                self.eager = outer or (decided is not None and compiled_value(s.test, self.name_of) is not None)
                for h in hs:
                    h(s, self)
                self.eager = outer
            if t is ast.Assign:
                visit(s.value)
                for tg in s.targets:
                    if type(tg) is not ast.Name:
                        visit(tg)
                self.bind_assign(s.targets, s.value)
            elif t is ast.Expr or t is ast.Return:
                if s.value is not None:
                    visit(s.value)
            elif t is ast.If:
                visit(s.test, True)
                self.if_tests.append(s.test)
                (self.run_eager if decided is False else self.run_block)(s.body)
                self.if_tests.pop()
                (self.run_eager if decided is True else self.run_block)(s.orelse)
                if decided is not None and terminates(s.body if decided else s.orelse):
                    # `if torch.compiler.is_compiling(): return y`: compiled code leaves here
                    self.run_eager(stmts[i + 1:])
                    return
            elif t is ast.For or t is ast.AsyncFor:
                visit(s.iter)
                self.bind_for(s.target, s.iter)
                self.run_block(s.body)
                self.run_block(s.orelse)
            elif t is ast.While:
                visit(s.test, True)
                (self.run_eager if decided is False else self.run_block)(s.body)
                self.run_block(s.orelse)
            elif t is ast.AugAssign:
                visit(s.value)
                visit(s.target)
                if type(s.target) is ast.Name:
                    k0, k1 = self.env.get(s.target.id, OTHER), self.kind(s.value)
                    self.env[s.target.id] = TENSOR if (k0 in TENSORISH or k1 in TENSORISH) else \
                        HOST if HOST in (k0, k1) else k0
            elif t is ast.AnnAssign:
                if s.value is not None:
                    visit(s.value)
                    k = self.kind(s.value)
                    ak = _annotation_kind(s.annotation)
                    self.bind(s.target, ak if ak in TENSORISH else k)
            elif t is ast.With or t is ast.AsyncWith:
                for item in s.items:
                    visit(item.context_expr)
                    if item.optional_vars is not None:
                        self.bind(item.optional_vars, OTHER)
                self.run_block(s.body)
            elif t is ast.Try or t.__name__ == "TryStar":
                self.run_block(s.body)
                for h in s.handlers:
                    self.stmt = h
                    if h.name:
                        self.env[h.name] = OTHER
                    self.run_block(h.body)
                self.run_block(s.orelse)
                self.run_block(s.finalbody)
            elif t is ast.Assert:
                visit(s.test, True)
                if s.msg is not None:
                    visit(s.msg)
            elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
                for d in s.decorator_list:
                    visit(d)
                inner = FunctionContext(self.fa, self.cls, self.func_key, f"{self.qualname}.{s.name}",
                                        dict(self.env), self.heuristic)
                inner.edges = self.edges
                inner.ctors = self.ctors
                inner.eager = self.eager
                inner.run_function(s)
                self.stmt = s
                self.env[s.name] = OTHER
            elif t is ast.ClassDef:
                pass  # classes defined inside functions are not analysed
            elif t is ast.Raise:
                if s.exc is not None:
                    visit(s.exc)
            elif t is ast.Delete:
                for tg in s.targets:
                    visit(tg)
            elif t.__name__ == "Match":
                visit(s.subject)
                for case in s.cases:
                    if case.guard is not None:
                        visit(case.guard, True)
                    self.run_block(case.body)
            # Pass, Break, Continue, Global, Nonlocal, Import: nothing to see

    def visit_expr(self, node: ast.AST, in_test: bool = False) -> None:
        hooks = self.fa.hooks
        outer = self.eager
        stack = [(node, in_test, outer)]
        pop, push = stack.pop, stack.append
        fields_of = _EXPR_FIELDS
        leaves = _LEAVES
        Call, IfExp, Lambda, BoolOp = ast.Call, ast.IfExp, ast.Lambda, ast.BoolOp
        while stack:
            n, t, e = pop()
            tp = type(n)
            if tp is Call:
                if e:  # not traced: no region edge, but a torch.compile call there still makes a root
                    if self.fa.want_compile:
                        self.note_compile(n)
                else:
                    self.note_call(n)
            hs = hooks.get(tp)
            if tp is IfExp:
                decided = compiled_value(n.test, self.name_of)
                if hs:
                    self.in_test, self.eager = t, e or decided is not None
                    for h in hs:
                        h(n, self)
                push((n.test, True, e))
                push((n.body, t, e or decided is False))
                push((n.orelse, t, e or decided is True))
                continue
            if hs:
                self.in_test, self.eager = t, e
                for h in hs:
                    h(n, self)
            if tp is BoolOp:
                cut = eager_operands(n, self.name_of)  # `not is_compiling() and <eager only>`
                for i, c in enumerate(n.values):
                    if type(c) not in leaves:
                        push((c, t, e or i >= cut))
                continue
            if tp is Lambda:
                push((n.body, False, e))
                continue
            if tp is Call and type(n.func) is ast.Attribute and n.func.attr.startswith("_check"):
                # torch._check(cond, lambda: msg): the message runs only when the check fails
                push((n.func, t, e))
                for c in n.args:
                    if type(c) is not Lambda and type(c) not in leaves:
                        push((c, t, e))
                continue
            for name in fields_of.get(tp, ()):
                v = getattr(n, name)
                if v is None:
                    continue
                if type(v) is list:
                    for c in v:
                        if c is not None and type(c) not in leaves:
                            push((c, t, e))
                elif type(v) not in leaves:
                    push((v, t, e))
        self.eager = outer


# Leaves carry nothing a detector looks at; ctx/op fields are never expressions.
_LEAVES = frozenset({ast.Name, ast.Constant})
_SKIP_FIELDS = frozenset({"ctx", "op", "ops", "conversion", "format_spec", "type_comment", "is_async"})


def _expr_fields() -> dict[type, tuple[str, ...]]:
    out: dict[type, tuple[str, ...]] = {}
    for name in dir(ast):
        cls = getattr(ast, name)
        if isinstance(cls, type) and issubclass(cls, ast.AST) and cls._fields:
            if issubclass(cls, (ast.expr, ast.keyword, ast.comprehension, ast.slice if hasattr(ast, "slice") else ast.expr)):
                out[cls] = tuple(f for f in cls._fields if f not in _SKIP_FIELDS)
    out[ast.FormattedValue] = ("value",)
    return out


_EXPR_FIELDS = _expr_fields()
