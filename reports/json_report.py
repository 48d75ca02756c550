"""The versioned JSON form of the data model (``schema_version``).

File paths under ``Report.root`` are written relative to it (posix), as every other format
shows them; a path outside it (an installed package) stays absolute. Read back, the report
renders the same: the renderers take a relative path as already under the root."""

from __future__ import annotations

import json
from typing import Any

from graphmend.core.model import Report
from reports.wording import rel

# the model's fields that hold a file path (Frame.file, Issue.file, Recompile.guard_file, ...)
_PATH_KEYS = ("file", "guard_file")


def _relative(data: Any, root: str) -> Any:
    if isinstance(data, dict):
        return {k: rel(v, root) if k in _PATH_KEYS and isinstance(v, str) else _relative(v, root)
                for k, v in data.items()}
    if isinstance(data, list):
        return [_relative(v, root) for v in data]
    return data


def render_json(report: Report) -> str:
    data = report.to_dict()
    return json.dumps(_relative(data, report.root) if report.root else data, indent=2)
