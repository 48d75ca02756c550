"""The calls a function makes, as the compiled-region analysis (:mod:`rewrites.regions`)
needs them: the region edges (``self.method(...)``, ``obj.method(...)`` on an object built in
the function, plain calls through the imports) and the compiled roots (``torch.compile(fn)``
in any spelling, ``functools.partial``, what a ``mend_target*`` function returns).

``CallEdges`` is a mixin of :class:`rewrites.analyzer.FunctionContext`: it writes the
context's ``edges`` and its file's ``index.roots`` / ``local_roots``, reading ``fa``, ``cls``
and ``ctors``. Nothing here imports torch.
"""

from __future__ import annotations

import ast

from rewrites.file_index import COMPILE_NAMES, PARTIAL_NAMES, _dotted


class CallEdges:
    """Region edges and compile roots, noted call by call (a FunctionContext's part)."""

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
