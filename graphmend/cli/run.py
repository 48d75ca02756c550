"""``mend run SCRIPT [ARGS...]``: run a program as ``python SCRIPT ARGS`` would and report
the graph breaks of every torch.compile region it executed (grouped by compiled function).

The program's stdout/stderr and exit status are its own; the report goes to stderr, or to
``--output`` in any ``--format``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from graphmend.cli.common import Format, fail, render_noted, require_torch, write_atomic
from graphmend.modes import SCRIPT_MODE


def run(
    ctx: typer.Context,
    script: Path = typer.Argument(..., help="The Python program to run; ARGS after it are its own."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="Report format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here instead of stderr."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No report on stderr (only --output, if given)."),
    train: bool = typer.Option(False, "--train", hidden=True),
) -> None:
    """Run SCRIPT [ARGS...] like python would, recording every torch.compile graph break."""
    if train:
        raise fail("--train does not apply to mend run: the script decides whether it trains "
                   "(put --train after the script to pass it to the script)")
    if not script.exists():
        raise fail(f"script does not exist: {script}")
    if not script.is_file():
        raise fail(f"not a file: {script}")
    tv = require_torch("run")
    from graphmend.config import find_pyproject
    from graphmend.model import new_report
    from graphmend.sources import report_root
    from tracer.run_script import run_script

    result = run_script(str(script), list(ctx.args))
    project = find_pyproject(script)
    report = new_report("run", root=report_root([script], project and project.parent),
                        torch_version=result.torch_version or tv)
    # the script chose how it ran (eval, train or both): mend did not set a run mode
    report.run_modes = [SCRIPT_MODE]
    for t in result.targets:
        t.run_mode = SCRIPT_MODE
    report.targets.extend(result.targets)
    from graphmend.correlate import diagnose

    diagnose(report)
    if output is not None:
        text = render_noted(report, format.value)
        try:
            write_atomic(output, text if text.endswith("\n") else text + "\n")
        except OSError as exc:
            raise fail(f"cannot write --output {output}: {exc.strerror or exc}")
    elif not quiet:
        text = render_noted(report, format.value)
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()
    raise typer.Exit(result.exit_code)
