"""Renderers over the data model, and only that: each takes a ``Report`` and returns text.

No renderer computes (counts, ratios, correlation happen in the stages); none imports torch.
"""

from __future__ import annotations

from typing import Callable

from graphmend.model import Report

FORMATS = ("text", "json", "md", "html", "sarif", "github")


def render(report: Report, fmt: str, color: bool = False) -> str:
    if fmt == "json":
        from reports.json_report import render_json

        return render_json(report)
    if fmt == "text":
        from reports.text import render_text

        return render_text(report, color=color)
    renderer = _optional(fmt)
    if renderer is None:
        raise ValueError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return renderer(report)


def _optional(fmt: str) -> Callable[[Report], str] | None:
    import importlib

    modules = {"md": ("reports.markdown", "render_markdown"), "html": ("reports.html", "render_html"),
               "sarif": ("reports.sarif", "render_sarif"), "github": ("reports.github", "render_github")}
    if fmt not in modules:
        return None
    mod, fn = modules[fmt]
    try:
        return getattr(importlib.import_module(mod), fn)
    except ModuleNotFoundError:
        return None
