"""What one file's pass records and the names it keys on: ``RawFinding`` (one detector's
report), ``ClassInfo`` and ``FileIndex`` (what the cross-file region analysis,
:mod:`rewrites.regions`, reads of a file), the dotted names that make a compiled root or a
disabled function, and ``_dotted`` (a Name/Attribute chain as its parts).

Plain data: nothing here imports torch, and everything is picklable (worker processes).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

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
