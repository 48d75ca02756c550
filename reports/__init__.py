"""Renderers over the data model, and only that: each takes a ``Report`` and returns text.

No renderer computes: totals come from ``Report.summary`` (``graphmend.model.summarize``,
filled here when a stage left it empty), correlation and ratios from the stages. Nothing in
``reports`` imports torch; each format's module is imported only when that format is asked for.
"""

from __future__ import annotations

import dataclasses
import importlib

from graphmend.model import Report, summarize

FORMATS = ("text", "json", "md", "html", "sarif", "github")

_RENDERERS = {
    "text": ("reports.text", "render_text"),
    "json": ("reports.json_report", "render_json"),
    "md": ("reports.markdown", "render_markdown"),
    "html": ("reports.html", "render_html"),
    "sarif": ("reports.sarif", "render_sarif"),
    "github": ("reports.github", "render_github"),
}


def with_summary(report: Report) -> Report:
    """``report`` with its totals filled in (a copy; the caller's object is left alone)."""
    if report.summary is not None:
        return report
    return dataclasses.replace(report, summary=summarize(report))


def render(report: Report, fmt: str, color: bool = False) -> str:
    if fmt not in _RENDERERS:
        raise ValueError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}")
    module, name = _RENDERERS[fmt]
    renderer = getattr(importlib.import_module(module), name)
    report = with_summary(report)
    return renderer(report, color=color) if fmt == "text" else renderer(report)
