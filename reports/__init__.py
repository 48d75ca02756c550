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
    """``report`` with its issues and totals filled in (a copy; the caller's object is left
    alone). Issues are missing from a report saved before schema 1.1 or built without the
    stage: merged here from its findings and breaks alone, reading no file."""
    if not report.issues and (report.findings or any(t.breaks for t in report.targets)):
        from graphmend.correlate import diagnose

        report = dataclasses.replace(report, issues=[], summary=None)
        diagnose(report, read_sources=False)
    if report.summary is not None:
        return report
    return dataclasses.replace(report, summary=summarize(report))


def render(report: Report, fmt: str, color: bool = False, verbose: bool = False) -> str:
    """``verbose``: the text view's details in full (Dynamo's explanations, hints, stacks,
    recompile guards); the other formats always carry everything."""
    if fmt not in _RENDERERS:
        raise ValueError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}")
    module, name = _RENDERERS[fmt]
    renderer = getattr(importlib.import_module(module), name)
    report = with_summary(report)
    return renderer(report, color=color, verbose=verbose) if fmt == "text" else renderer(report)
