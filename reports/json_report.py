"""The versioned JSON form of the data model (``schema_version``)."""

from __future__ import annotations

from graphmend.core.model import Report


def render_json(report: Report) -> str:
    return report.to_json(indent=2)
