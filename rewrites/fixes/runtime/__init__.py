"""The runtime a fix copies into the file it rewrites: real modules (linted, tested by importing
them), read here as text, never imported by mend (they import torch)."""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path
from typing import Optional

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


def custom_op_lacking(what: str) -> Optional[str]:
    """Why the installed torch cannot hold a runtime's custom op (None: it can), ``what`` naming
    the op in the reason. Read from torch when the process has imported it, else from its
    version: the planner imports no torch (``torch.library.custom_op`` came in 2.4)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return None if hasattr(getattr(torch, "library", None), "custom_op") else \
            f"this torch has no `torch.library.custom_op` ({what} is one)"
    from graphmend.core.env import torch_version

    v = torch_version()
    nums = [int(x) for x in re.findall(r"\d+", v or "")[:2]]
    if len(nums) < 2 or tuple(nums) < (2, 4):
        return (f"torch {v or '(not installed)'} is older than 2.4, which added `torch.library.custom_op` "
                f"({what} is one)")
    return None
