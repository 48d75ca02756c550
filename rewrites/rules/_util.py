"""Small helpers the detectors share."""

from __future__ import annotations

import ast


def snippet(node: ast.AST, limit: int = 60) -> str:
    """A short source rendering of ``node`` for messages."""
    try:
        text = ast.unparse(node)
    except Exception:  # unparse of exotic nodes; the message stays useful without it
        return "..."
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_raise_only(body: list[ast.stmt]) -> bool:
    return len(body) == 1 and type(body[0]) is ast.Raise
