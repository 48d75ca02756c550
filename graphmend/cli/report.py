"""``mend report RESULTS.json --format FMT [-o FILE]``: re-render a saved JSON report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from graphmend.cli.common import EXIT_CLEAN, VERBOSE_HELP, Format, fail, render_or_fail


def load_report(path: Path):
    """The ``Report`` saved in ``path``; any problem is one ``fail`` line naming the file."""
    from graphmend.core.model import Report
    from graphmend.core.sources import read_report_text

    try:
        text = read_report_text(path)
    except FileNotFoundError:
        raise fail(f"report file does not exist: {path}")
    except IsADirectoryError:
        raise fail(f"report file is a directory: {path}")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read report file {path}: {getattr(exc, 'strerror', None) or exc}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{path} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}")
    if not isinstance(data, dict) or "schema_version" not in data:
        raise fail(f"{path} is not a graphmend report (no schema_version)")
    try:
        return Report.from_dict(data)
    except ValueError as exc:
        raise fail(f"{path}: {exc}")
    except (TypeError, AttributeError, KeyError) as exc:
        raise fail(f"{path} does not match the report schema: {exc}")


def report(
    results: Path = typer.Argument(..., help="A report saved with --format json."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write here instead of stdout."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
) -> None:
    """Re-render a saved JSON report in another format (text, json, md, html, sarif, github)."""
    render_or_fail(load_report(results), format.value, output, verbose=verbose)
    raise typer.Exit(EXIT_CLEAN)
