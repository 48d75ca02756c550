"""Renderers over the data model, and only that: each takes a ``Report`` and returns text.

No renderer computes: totals come from ``Report.summary`` (``graphmend.core.model.summarize``,
filled here when a stage left it empty), issues, correlation and ratios from the stages (a
saved report without issues gets them from ``graphmend.correlate.with_issues``, which the
commands call before rendering). Nothing in ``reports`` imports a stage or torch; each
format's module is imported only when that format is asked for.
"""

from __future__ import annotations

import dataclasses
import importlib

from graphmend.core.model import Report, summarize

FORMATS = ("text", "json", "md", "html", "sarif", "github")

# Renderers that can also say something about the rendering itself (what a format's limits
# left out): they return (text, notes), and the command prints the notes on stderr.
_WITH_NOTES = {"sarif": ("reports.sarif", "sarif_with_notes")}

_RENDERERS = {
    "text": ("reports.text", "render_text"),
    "json": ("reports.json_report", "render_json"),
    "md": ("reports.markdown", "render_markdown"),
    "html": ("reports.html", "render_html"),
    "sarif": ("reports.sarif", "render_sarif"),
    "github": ("reports.github", "render_github"),
}


def with_summary(report: Report) -> Report:
    """``report`` with its totals filled in (a copy when they were missing; the caller's
    object is left alone): counted from what it holds, issues included."""
    if report.summary is not None:
        return report
    return dataclasses.replace(report, summary=summarize(report))


def render(report: Report, fmt: str, color: bool = False, verbose: bool = False) -> str:
    """``verbose``: the text view's details in full (Dynamo's explanations, hints, stacks,
    recompile guards); the other formats always carry everything."""
    return render_with_notes(report, fmt, color, verbose)[0]


def render_with_notes(report: Report, fmt: str, color: bool = False,
                      verbose: bool = False) -> tuple[str, list[str]]:
    """``render``, and the renderer's notes about the output (results left out to stay within
    a format's limits), which renderers never print themselves."""
    if fmt not in _RENDERERS:
        raise ValueError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}")
    report = with_summary(report)
    if fmt in _WITH_NOTES:
        module, name = _WITH_NOTES[fmt]
        text, notes = getattr(importlib.import_module(module), name)(report)
        return text, list(notes)
    module, name = _RENDERERS[fmt]
    renderer = getattr(importlib.import_module(module), name)
    return (renderer(report, color=color, verbose=verbose) if fmt == "text" else renderer(report)), []
