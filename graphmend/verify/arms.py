"""Which way did each rewritten condition go in the ORIGINAL program?

``instrument(source, conditions)`` wraps each condition expression (given by its position
in the original source) as ``__mend_arm__("line:col", <cond>)``. The wrapper records
``bool(<cond>)`` and returns the value unchanged, so the program computes what it did
(the condition's truth value is taken twice: harmless for tensors). Line numbers stay.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

HOOK = "__mend_arm__"


def instrument(source: str, conditions: Iterable[tuple[int, int, int, int]]) -> str:
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    wanted = {tuple(c) for c in conditions}
    if not wanted:
        return source
    wrapper = MetadataWrapper(cst.parse_module(source))
    pos = wrapper.resolve(PositionProvider)
    targets = {}
    for node, r in pos.items():
        key = (r.start.line, r.start.column, r.end.line, r.end.column)
        if key in wanted and isinstance(node, cst.BaseExpression) and key not in targets.values():
            targets[id(node)] = key

    class T(cst.CSTTransformer):
        def on_leave(self, original_node, updated_node):  # type: ignore[override]
            key = targets.get(id(original_node))
            if key is None:
                return updated_node
            return cst.Call(func=cst.Name(HOOK), args=[
                cst.Arg(cst.SimpleString(repr(f"{key[0]}:{key[1]}"))),
                cst.Arg(updated_node.with_changes(lpar=[], rpar=[]) if hasattr(updated_node, "lpar") else updated_node)])

    return wrapper.module.visit(T()).code


class ArmRecorder:
    """Installed as ``builtins.__mend_arm__``; counts True/False per (file, condition)."""

    def __init__(self) -> None:
        self.seen: dict[str, set[bool]] = defaultdict(set)
        self.log: list[tuple[str, bool]] = []  # every evaluation, in order (``one_way_since`` reads a window of it)

    def __call__(self, key: str, value: Any) -> Any:
        import os
        import sys

        file = os.path.realpath(sys._getframe(1).f_code.co_filename)
        try:
            took = bool(value)
            self.seen[f"{file}:{key}"].add(took)
            self.log.append((f"{file}:{key}", took))
        except Exception:
            pass  # a value with no truth value: the program raises on its own below
        return value

    def install(self) -> None:
        import builtins

        setattr(builtins, HOOK, self)

    def one_way_since(self, start: int, keys: Iterable[str]) -> bool:
        """Whether some condition of ``keys`` evaluated after ``log[start]`` went one way only
        there (the calls of that window never met its other arm)."""
        wanted = set(keys)
        window: dict[str, set[bool]] = defaultdict(set)
        for key, took in self.log[start:]:
            if key in wanted:
                window[key].add(took)
        return any(len(sides) == 1 for sides in window.values())

    def missing(self, keys: Iterable[str], reached_only: bool = False) -> list[str]:
        """``reached_only``: leave out conditions this run never evaluated (another
        target's code in the same file)."""
        out = []
        for k in keys:
            got = self.seen.get(k, set())
            if reached_only and not got:
                continue
            for side in (True, False):
                if side not in got:
                    out.append(f"{k} never {'taken' if side else 'skipped'}")
        return out
