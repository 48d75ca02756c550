"""The runtime a fix copies into the file it rewrites: real modules (linted, tested by importing
them), read here as text, never imported by mend (they import torch)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from rewrites.fixes.base import Helper

_HERE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def helper(module: str, requires: tuple[str, ...] = ()) -> Helper:
    """The functions of ``runtime/<module>.py`` (from its first ``def`` to its end, as the
    file has them) as one helper, named after the first; ``requires``: the runtime modules
    whose functions it calls."""
    text = (_HERE / f"{module}.py").read_text(encoding="utf-8")
    first = next((n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)), None)
    if first is None:
        raise LookupError(f"rewrites/fixes/runtime/{module}.py defines no function")
    return Helper("\n".join(text.splitlines()[first.lineno - 1:]) + "\n", tuple(helper(r) for r in requires))
