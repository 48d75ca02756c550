"""One file, one pass: the stdlib ``ast`` tree walked function by function, statement by
statement, with the tensor-kind inference of :mod:`rewrites.kinds` (its tables:
:mod:`rewrites.tensors`) and the detectors of every rule family (``rewrites.rules.HOOKS``).
Also collects what the compiled-region analysis (:mod:`rewrites.regions`) needs: imports,
classes (:mod:`rewrites.file_index`), call edges and compile roots (:mod:`rewrites.call_edges`).

Nothing here imports torch or libcst; everything returned is picklable (worker processes).
"""

from __future__ import annotations

import ast
from typing import Optional

from rewrites.call_edges import CallEdges
from rewrites.file_index import (COMPILE_NAMES, DISABLE_NAMES, LOCAL_MODULE_SUFFIXES, TARGET_PREFIX, ClassInfo,
                                 FileIndex, RawFinding, _dotted)
from rewrites.guards import compiled_value, eager_operands, flag_wrapper, is_mend_helper, terminates
from rewrites.kinds import KindInference, _annotation_kind, numpy_call_kind, torch_call_kind
from rewrites.tensors import BOOL, DATA_DEPENDENT, HOST, MODULE, OTHER, TENSOR, TENSOR_PARAM_NAMES, TENSORISH


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


class FunctionContext(KindInference, CallEdges):
    """The state while one function is walked; what detectors query and report through.
    Its tensor-kind inference and binding are :class:`rewrites.kinds.KindInference`, its
    region edges and compile roots :class:`rewrites.call_edges.CallEdges`."""

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
    def report(self, code: str, node: ast.AST, *, variant: str = "", needs_root: bool = False, **fields) -> None:
        """A finding of ``code`` at ``node``: its message and fix hint are the rule record's
        templates (of ``variant``, when the rule words its findings several ways) filled with
        ``fields``."""
        enabled = self.fa.enabled
        if (enabled is not None and code not in enabled) or self.eager:
            return
        from rewrites.rules import RULES_BY_CODE

        message, fix_hint = RULES_BY_CODE[code].render(variant, **fields)
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
