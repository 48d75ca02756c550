"""``mend run SCRIPT [ARGS...]``: run a program as ``python SCRIPT ARGS`` would and report
the graph breaks of every torch.compile region it executed (grouped by compiled function).

Where the report goes: ``--output`` in any format; else the text report to stderr (the
program's stdout stays its own), and a machine format (json, sarif, github, md, html) to
stdout, the program's own stdout sent to stderr meanwhile, so that
``mend run -f json train.py > out.json`` is valid JSON.

Exit code: the program's own when it failed; else 1 with ``--fail-on-breaks`` when a break
was recorded, else 0. 2 for mend's usage errors.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from graphmend.cli.common import EXIT_FINDINGS, Format, fail, require_torch, write_atomic
from graphmend.modes import SCRIPT_MODE

FAIL_HELP = "Exit 1 when the program succeeded but a graph break was recorded (the program's own code when it failed)."


def run(
    ctx: typer.Context,
    script: Path = typer.Argument(..., help="The Python program to run; ARGS after it are its own."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="Report format: text goes to stderr, "
                                  "the others to stdout (the program's stdout then goes to stderr)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here instead."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No report (only --output, if given)."),
    fail_on_breaks: bool = typer.Option(False, "--fail-on-breaks", help=FAIL_HELP),
    train: bool = typer.Option(False, "--train", hidden=True),
) -> None:
    """Run SCRIPT [ARGS...] like python would, recording every torch.compile graph break.

    Exits with the program's own code when it failed; else 0, or 1 with --fail-on-breaks when a
    break was recorded.
    """
    if train:
        raise fail("--train does not apply to mend run: the script decides whether it trains "
                   "(put --train after the script to pass it to the script)")
    if not script.exists():
        raise fail(f"script does not exist: {script}")
    if not script.is_file():
        raise fail(f"not a file: {script}")
    tv = require_torch("run")
    from graphmend.model import new_report
    from reports import render
    from tracer.run_script import run_script

    to_stdout = output is None and not quiet and format is not Format.text
    result = run_script(str(script), list(ctx.args), stdout_to_stderr=to_stdout)
    report = new_report("run", root=str(Path.cwd()), torch_version=result.torch_version or tv)
    # the script chose how it ran (eval, train or both): mend did not set a run mode
    report.run_modes = [SCRIPT_MODE]
    for t in result.targets:
        t.run_mode = SCRIPT_MODE
    report.targets.extend(result.targets)
    try:
        if output is not None:
            text = render(report, format.value)
            try:
                write_atomic(output, text if text.endswith("\n") else text + "\n")
            except OSError as exc:
                raise fail(f"cannot write --output {output}: {exc.strerror or exc}")
        elif not quiet:
            text = render(report, format.value, color=False)
            stream = sys.stdout if to_stdout else sys.stderr
            stream.write(text if text.endswith("\n") else text + "\n")
            stream.flush()
    except ValueError as exc:
        raise fail(str(exc))
    if result.exit_code:
        raise typer.Exit(result.exit_code)
    broke = any(t.breaks for t in result.targets)
    raise typer.Exit(EXIT_FINDINGS if fail_on_breaks and broke else 0)
