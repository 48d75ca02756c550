"""An import overlay: patched source text served for given files, nothing written to disk.

``install_overlay({"/abs/path/mod.py": "new source", ...})`` puts a finder first on
``sys.meta_path``. Whenever the normal machinery would load one of those files -- the
target's own module, a sibling, or a module of an installed package such as
``transformers/models/x/modeling_x.py`` -- the module is compiled from the given text
instead, under the file's own path (so tracebacks, Dynamo's break locations and
``inspect`` name the real file, with the patched line numbers). No ``.pyc`` is read or
written for overlaid files, and ``linecache`` is seeded with the patched lines.

Call it in a worker BEFORE the target (or the package) is imported; a module already in
``sys.modules`` is not reloaded. Torch-free.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import os
import sys
from typing import Optional


def _key(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


class OverlayLoader(importlib.machinery.SourceFileLoader):
    """A SourceFileLoader whose source is the patched text and that never touches bytecode."""

    def __init__(self, fullname: str, path: str, source: str):
        super().__init__(fullname, path)
        self._source = source

    def get_data(self, path):  # type: ignore[override]
        if _key(path) == _key(self.path):
            return self._source.encode("utf-8")
        return super().get_data(path)

    def get_source(self, fullname):  # type: ignore[override]
        return self._source

    def get_code(self, fullname):  # type: ignore[override]
        # compile from the patched text; the cached .pyc belongs to the file on disk
        return compile(self._source, self.path, "exec", dont_inherit=True)

    def set_data(self, *args, **kwargs):  # type: ignore[override]
        return None  # never write bytecode


class OverlayFinder(importlib.abc.MetaPathFinder):
    def __init__(self, patches: dict[str, str]):
        self.patches = {_key(p): text for p, text in patches.items()}
        self.served: list[str] = []  # module names loaded from the overlay (for reports/tests)

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[override]
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, OverlayFinder):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            try:
                spec = find(fullname, path, target)
            except Exception:  # another finder failing on a name it does not serve: the next one decides
                continue
            if spec is None:
                continue
            origin = spec.origin
            if not origin or not spec.has_location:
                return None
            text = self.patches.get(_key(origin))
            if text is None:
                return None  # let the normal machinery load it
            loader = OverlayLoader(fullname, origin, text)
            new = importlib.util.spec_from_file_location(
                fullname, origin, loader=loader,
                submodule_search_locations=spec.submodule_search_locations)
            self.served.append(fullname)
            return new
        return None


_installed: Optional[OverlayFinder] = None


def install_overlay(patches: dict[str, str]) -> OverlayFinder:
    """Serve ``patches`` (absolute path -> new source) from now on in this process."""
    global _installed
    if _installed is not None:
        _installed.patches.update({_key(p): t for p, t in patches.items()})
        finder = _installed
    else:
        finder = OverlayFinder(patches)
        sys.meta_path.insert(0, finder)
        _installed = finder
    from graphmend.core.sources import split_lines

    for path, text in patches.items():
        lines = split_lines(text)  # Python's own line breaks: a form feed does not end a line
        # mtime None: linecache.checkcache leaves the entry alone (not re-read from disk)
        linecache.cache[path] = (len(text), None, lines, path)
        if _key(path) != path:
            linecache.cache[_key(path)] = (len(text), None, lines, _key(path))
    return finder
