"""The custom op a fix makes at a site (gm5_opaque, gm3_unbacked): its stem, helper and op
names, refused when the file already defines one, the names a module defines, the call laid
out as the formatter would, and whether a function is one of mend's own helpers."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis
from rewrites.fixes.conditions import Refuse
from rewrites.guards import MEND_HELPER_PREFIX


def _names(t: cst.CSTNode) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for el in t.elements for n in _names(el.value)]
    if isinstance(t, cst.StarredElement):
        return _names(t.value)
    return []


def _module_names(module: cst.Module) -> set[str]:
    out: set[str] = set()
    for s in module.body:
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            out.add(s.name.value)
        elif isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign):
                    for t in small.targets:
                        out.update(_names(t.target))
    return out


def _wrapped(head: str, items: list[str], tail: str, width: int = 88) -> str:
    """``head`` items ``tail`` laid out as the formatter would: one line, else the items on one
    indented line, else one per line."""
    one = f"{head}{', '.join(items)}{tail}"
    if len(one) <= width:
        return one
    inner = "    " + ", ".join(items)
    if len(inner) <= width:
        return f"{head}\n{inner}\n{tail}"
    return head + "\n" + "".join(f"    {i},\n" for i in items) + tail


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text) or "module"


def site_names(module: str, function: str, line: int, taken: set[str], what: str) -> tuple[str, str, str]:
    """The stem (``mend::<module>_<function>_<line>``), the helper's and the op's names of a
    custom op made at a site; a refusal when the file already defines one of them."""
    stem = f"{_ident(module)}_{function}_{line}"
    names = f"{MEND_HELPER_PREFIX}{stem}", f"{MEND_HELPER_PREFIX}{stem}_op"
    clash = sorted(set(names) & taken)
    if clash:
        raise Refuse(f"the name `{clash[0]}` is already defined in this file (a name collision: {what} is named "
                     "after its site)")
    return stem, *names


def _in_mend_helper(an: Analysis, fn: Optional[cst.CSTNode]) -> bool:
    """``fn`` is one of mend's helpers or defined inside one: repaired code, not a site."""
    while fn is not None:
        if isinstance(fn, cst.FunctionDef) and fn.name.value.startswith(MEND_HELPER_PREFIX):
            return True
        fn = an.parent(fn)
    return False
