"""Which functions Dynamo traces: the compiled regions of the analysed tree.

Roots: ``forward`` of every ``nn.Module`` subclass (a base resolving to ``torch.nn.*``, a
class of the tree that is one, or an unresolvable base named ``*Module`` /
``*PreTrainedModel``), functions decorated with ``torch.compile`` in any spelling,
functions / modules / methods passed to ``torch.compile(...)``, and what a ``mend_target*``
function returns (the analyzer's ``note_root`` records them all). The region is everything
reachable from the roots through ``self.method(...)``, ``obj.method(...)`` on an object built or
annotated in the function, and plain calls, across the files of the tree where the import
resolves (relative and absolute imports, package re-exports).
"""

from __future__ import annotations

from typing import Iterable, Optional

from rewrites.file_index import MODULE_NAME_SUFFIXES, FileIndex

Key = tuple[str, str]  # (file path, "Class.method" | "function")


class Regions:
    def __init__(self, indexes: Iterable[FileIndex]):
        self.by_module: dict[str, FileIndex] = {}
        for idx in indexes:
            self.by_module.setdefault(idx.module, idx)
        self._lookup_cache: dict[str, Optional[tuple[FileIndex, tuple[str, ...]]]] = {}
        self._module_cache: dict[tuple[str, str], bool] = {}
        self.roots: set[Key] = set()
        self.region: set[Key] = set()
        self._compute()

    # -- name resolution across files ----------------------------------------------------------------
    def _lookup(self, dotted: str) -> Optional[tuple[FileIndex, tuple[str, ...]]]:
        if dotted in self._lookup_cache:
            return self._lookup_cache[dotted]
        parts = dotted.split(".")
        found = None
        # the tree's module names may lack the leading packages of an absolute import: strip them
        for start in range(len(parts)):
            for cut in range(len(parts), start, -1):
                idx = self.by_module.get(".".join(parts[start:cut]))
                if idx is not None:
                    found = (idx, tuple(parts[cut:]))
                    break
            if found:
                break
        self._lookup_cache[dotted] = found
        return found

    def resolve(self, dotted: str, depth: int = 0) -> Optional[tuple[str, FileIndex, str]]:
        """("func" | "class" | "method", file index, local name) for a dotted name of the tree."""
        hit = self._lookup(dotted)
        if hit is None or depth > 8:
            return None
        idx, rest = hit
        if not rest:
            return None
        head = rest[0]
        if head in idx.classes:
            if len(rest) == 1:
                return ("class", idx, head)
            if len(rest) == 2:
                m = self.find_method(idx, head, rest[1])
                return ("method", m[0], m[1]) if m else None
            return None
        if head in idx.functions and len(rest) == 1:
            return ("func", idx, head)
        target = idx.imports.get(head)
        if target is not None and target != dotted:
            return self.resolve(".".join((target, *rest[1:])), depth + 1)
        return None

    def _base_class(self, idx: FileIndex, base: str) -> Optional[tuple[FileIndex, str]]:
        if base in idx.classes:
            return idx, base
        r = self.resolve(base)
        if r is not None and r[0] == "class":
            return r[1], r[2]
        return None

    def is_module_class(self, idx: FileIndex, cls: str, seen: Optional[set] = None) -> bool:
        key = (idx.path, cls)
        if key in self._module_cache:
            return self._module_cache[key]
        seen = seen or set()
        if key in seen:
            return False
        seen.add(key)
        result = False
        for base in idx.classes[cls].bases:
            last = base.rsplit(".", 1)[-1]
            if base.startswith("torch.nn.") and last[:1].isupper():
                result = True
            else:
                found = self._base_class(idx, base)
                if found is not None:
                    result = self.is_module_class(found[0], found[1], seen)
                else:
                    result = last.endswith(MODULE_NAME_SUFFIXES)
            if result:
                break
        self._module_cache[key] = result
        return result

    def find_method(self, idx: FileIndex, cls: str, name: str, depth: int = 0) -> Optional[tuple[FileIndex, str]]:
        info = idx.classes.get(cls)
        if info is None or depth > 20:
            return None
        if name in info.methods:
            return idx, f"{cls}.{name}"
        for base in info.bases:
            found = self._base_class(idx, base)
            if found is not None and found != (idx, cls):
                m = self.find_method(found[0], found[1], name, depth + 1)
                if m is not None:
                    return m
        return None

    # -- the closure -------------------------------------------------------------------------------------
    def _compute(self) -> None:
        roots: set[Key] = set()
        for idx in self.by_module.values():
            for cls, info in idx.classes.items():
                if "forward" in info.methods and self.is_module_class(idx, cls):
                    roots.add((idx.path, f"{cls}.forward"))
            for dotted in idx.roots:
                r = self.resolve(dotted)
                if r is None:
                    continue
                kind, ridx, name = r
                if kind == "class":
                    m = self.find_method(ridx, name, "forward") or self.find_method(ridx, name, "__call__")
                    if m:
                        roots.add((m[0].path, m[1]))
                else:
                    roots.add((ridx.path, name))
        self.roots = roots
        by_path = {idx.path: idx for idx in self.by_module.values()}
        region: set[Key] = set()
        todo = list(roots)
        while todo:
            key = todo.pop()
            if key in region:
                continue
            region.add(key)
            idx = by_path.get(key[0])
            if idx is None:
                continue
            for kind, what in idx.edges.get(key[1], ()):
                nxt: Optional[Key] = None
                if kind == "self":
                    if "." in key[1]:
                        m = self.find_method(idx, key[1].split(".", 1)[0], what)
                        if m:
                            nxt = (m[0].path, m[1])
                else:
                    r = self.resolve(what)
                    if r is not None and r[0] in ("func", "method"):
                        nxt = (r[1].path, r[2])
                if nxt is not None and nxt not in region and nxt[1] not in by_path.get(nxt[0], idx).disabled:
                    todo.append(nxt)
        self.region = region
