"""torch's graph-break registry (``torch/_dynamo/graph_break_registry.json``, 2.8+):
gb_type -> id (``GB0170``). Read from the installed torch's files without importing it."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Optional


@functools.lru_cache(maxsize=1)
def _registry() -> dict[str, str]:
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return {}
    locations = list(getattr(spec, "submodule_search_locations", None) or []) if spec else []
    for loc in locations:
        path = Path(loc) / "_dynamo" / "graph_break_registry.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        out: dict[str, str] = {}
        for gb_id, entries in data.items():
            for entry in entries if isinstance(entries, list) else [entries]:
                gb_type = entry.get("Gb_type") if isinstance(entry, dict) else None
                if gb_type:
                    out.setdefault(gb_type, gb_id)  # the first (current) entry wins
        return out
    return {}


def registry_id(gb_type: Optional[str]) -> Optional[str]:
    """The registry id of ``gb_type``, or None when this torch ships no registry or lacks it."""
    if not gb_type:
        return None
    reg = _registry()
    return reg.get(gb_type) or reg.get(gb_type.strip())
