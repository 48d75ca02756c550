"""Python source text that ``mend run --record`` writes into a target file: string literals
as the formatters write them, comments and docstrings that hold any text (a path, a reason, a
folder's name) without ending early or making the file unwritable, wrapped lines, snake-case
names.
"""

from __future__ import annotations

import re
from typing import Optional


def _q(text: str) -> str:
    """A string literal in double quotes, as the formatters write it."""
    r = repr(text)
    if r.startswith("'") and '"' not in text:
        r = '"' + r[1:-1].replace("\\'", "'") + '"'
    return r


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escape(ch: str) -> str:
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def _comment(text: str) -> str:
    """``text`` (a path, a reason) fit for a ``#`` comment: a newline in it would end the
    comment and start code, a lone surrogate (a name that is not UTF-8) make the file unwritable."""
    return _UNPRINTABLE.sub(lambda m: _escape(m.group()), text)


def _docstring(text: str) -> str:
    """``text`` as the inside of a ``\"\"\"`` docstring whose value is ``text`` itself: a folder
    named ``a\"\"\"; import os`` must not end the string and run, nor ``\\N`` make it a SyntaxError."""
    return _comment(text.replace("\\", "\\\\").replace('"', '\\"'))


def _wrap(text: str, first: str, rest: Optional[str] = None) -> list[str]:
    """``text`` as lines of at most 88 characters, the first prefixed ``first``."""
    import textwrap

    return textwrap.wrap(text, 88, initial_indent=first, subsequent_indent=first if rest is None else rest,
                         break_long_words=False, break_on_hyphens=False)


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    s = re.sub(r"\W+", "_", s).strip("_").lower()
    return s or "fn"
