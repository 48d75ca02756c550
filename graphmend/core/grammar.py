"""Syntax a newer Python reads: what a file that this Python's ``ast.parse`` rejects uses, when
that is all that is wrong with it. libcst's parser reads the newer grammar (whatever version
it is told), so a file it parses holding such a construct on the failing line is "newer
syntax", not a typo. Only called for a file that failed to parse: never on the common path.
"""

from __future__ import annotations

import re
import sys
from typing import Optional

PEP695 = "PEP 695 type parameters or a type statement, Python 3.12"
PEP701 = "an f-string that reuses its quote or holds a backslash in {...} (PEP 701, Python 3.12)"
# a text with none of these holds neither construct: libcst (a large import the static path
# otherwise never pays) is not asked about a plain typo
_MAYBE = re.compile(r"^[ \t]*type[ \t]+\w|(def|class)[ \t]+\w+[ \t]*\[|[fF][rRbB]?['\"]|[rR][fF]['\"]", re.M)


def newer_syntax(text: str, line: Optional[int]) -> Optional[str]:
    """The newer construct on ``line`` (where this Python's parser stopped), or None when the
    text does not parse with the newer grammar either or holds none there."""
    if sys.version_info >= (3, 12) or line is None:
        return None  # this Python already reads both
    if not _MAYBE.search(text):
        return None
    try:
        import libcst as cst
        from libcst.metadata import MetadataWrapper, PositionProvider

        wrapper = MetadataWrapper(cst.parse_module(text))
        positions = wrapper.resolve(PositionProvider)
    except Exception:  # (libcst's ParserSyntaxError, a recursion limit): a plain syntax error then
        return None
    module = wrapper.module

    def on_line(node) -> bool:
        pos = positions.get(node)
        return pos is not None and pos.start.line <= line <= pos.end.line

    for node, _ in positions.items():
        if isinstance(node, cst.TypeAlias) or (
                isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.type_parameters is not None):
            if on_line(node.type_parameters if not isinstance(node, cst.TypeAlias) else node):
                return PEP695
        elif isinstance(node, cst.FormattedString) and on_line(node):
            quote = node.start[len(node.prefix):]
            for part in node.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    code = module.code_for_node(part.expression)
                    if (quote if len(quote) == 3 else quote[0]) in code or "\\" in code:
                        return PEP701
    return None
