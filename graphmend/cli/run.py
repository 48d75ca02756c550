"""``mend run SCRIPT [ARGS...]``: run a program as ``python SCRIPT ARGS`` would and report
the graph breaks of every torch.compile region it executed (grouped by compiled function).

Where the report goes: ``--output`` in any format; else the text report to stderr (the
program's stdout stays its own), and a machine format (json, sarif, github, md, html) to
stdout, the program's own stdout sent to stderr meanwhile, so that
``mend run -f json train.py > out.json`` is valid JSON.

Exit code: the program's own when it failed; else 1 with ``--fail-on-breaks`` when a break
was recorded, else 0. 2 for mend's usage errors (and a ``--record`` folder it could not write).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from graphmend.cli.common import (EXIT_ERROR, EXIT_FINDINGS, VERBOSE_HELP, Format, fail, render_noted, require_torch,
                                  say)
from graphmend.core.modes import SCRIPT_MODE

RECORD_HELP = ("Also save, for every compiled function or module the program calls, its first call's inputs "
               "and module state in DIR, with a targets module that replays them (mend analyze DIR, "
               "mend fix --from-run DIR, mend bench DIR).")
MAX_BYTES_HELP = ("With --record: input tensors of one call beyond this many bytes (largest first), and a module "
                  "state beyond it, are not stored but regenerated from a seed (K/M/G, binary).")
FAIL_HELP = "Exit 1 when the program succeeded but a graph break was recorded (the program's own code when it failed)."


def run(
    ctx: typer.Context,
    script: Path = typer.Argument(..., help="The Python program to run; ARGS after it are its own."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="Report format: text goes to stderr, "
                                  "the others to stdout (the program's stdout then goes to stderr)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here instead."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No report (only --output, if given)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
    fail_on_breaks: bool = typer.Option(False, "--fail-on-breaks", help=FAIL_HELP),
    record: Optional[Path] = typer.Option(None, "--record", metavar="DIR", help=RECORD_HELP),
    record_max_bytes: str = typer.Option("64M", "--record-max-bytes", metavar="SIZE", help=MAX_BYTES_HELP),
    train: bool = typer.Option(False, "--train", hidden=True),
) -> None:
    """Run SCRIPT [ARGS...] like python would, recording every torch.compile graph break.

    Exits with the program's own code when it failed; else 0, or 1 with --fail-on-breaks when a
    break was recorded.
    """
    if train:
        raise fail("--train does not apply to mend run: the script decides whether it trains "
                   "(put --train after the script to pass it to the script)")
    if str(script).startswith("-") and not script.exists():
        # options after the script are the script's own; before it, only mend's are known
        raise fail(f"unknown option {script} for mend run (mend's options go before the script, the script's own after it)")
    if not script.exists():
        raise fail(f"script does not exist: {script}")
    if not script.is_file():
        raise fail(f"not a file: {script}")
    recording = _recording(record, record_max_bytes, script, list(ctx.args)) if record is not None else None
    tv = require_torch("run")
    from graphmend.core.config import find_pyproject
    from graphmend.core.model import new_report
    from graphmend.core.sources import report_root, write_atomic
    from tracer.run_script import run_script, short_names

    to_stdout = output is None and not quiet and format is not Format.text
    # the program may os.chdir: paths given here mean what they meant before it ran
    script_path, output = script.absolute(), output.absolute() if output is not None else None
    result = run_script(str(script), list(ctx.args), recording=recording, stdout_to_stderr=to_stdout)
    project = find_pyproject(script_path)
    report = new_report("run", root=report_root([script_path], project and project.parent),
                        torch_version=result.torch_version or tv)
    # the script chose how it ran (eval, train or both): mend did not set a run mode
    report.run_modes = [SCRIPT_MODE]
    for t in result.targets:
        t.run_mode = SCRIPT_MODE
    short_names(result.targets, report.root)
    report.targets.extend(result.targets)
    from graphmend.correlate import diagnose

    diagnose(report)
    if output is not None:
        text = render_noted(report, format.value, verbose=verbose)
        try:
            write_atomic(output, text if text.endswith("\n") else text + "\n")
        except OSError as exc:
            raise fail(f"cannot write --output {output}: {exc.strerror or exc}")
    elif not quiet:
        text = render_noted(report, format.value, verbose=verbose)
        stream = sys.stdout if to_stdout else sys.stderr
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()
    if recording is not None and not _finish(recording, record, quiet):
        raise typer.Exit(result.exit_code or EXIT_ERROR)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
    broke = any(t.breaks for t in result.targets)
    raise typer.Exit(EXIT_FINDINGS if fail_on_breaks and broke else 0)


def _recording(folder: Path, max_bytes: str, script: Path, argv: list[str]):
    """The folder checked before the program runs: a bad one costs no run."""
    from graphmend.core.config import ConfigError, parse_size
    from graphmend.core.recording import RecordError, Recording, prepare_dir

    try:
        limit = parse_size(max_bytes, "--record-max-bytes")
    except ConfigError as exc:
        raise fail(str(exc))
    try:
        prepare_dir(folder)
    except RecordError as exc:
        raise fail(str(exc))
    return Recording(folder, str(script), argv, max_bytes=limit, label=str(folder))


def _finish(recording, folder: Path, quiet: bool) -> bool:
    from graphmend.core.recording import TARGETS_FILE, RecordError

    try:
        recording.finish()
    except RecordError as exc:
        say(f"mend: error: {exc}")
        return False
    if quiet:
        return True
    for what, why in recording.skipped:
        say(f"mend: --record: not recorded: {what}: {why}")
    n = len(recording.targets)
    if not n:
        say(f"mend: --record: the program called no compiled function mend could record; "
            f"{folder / TARGETS_FILE} holds no target")
        return True
    trained = [t.what for t in recording.targets if t.mode == "train"]
    say(f"mend: recorded {n} compiled function(s) in {folder / TARGETS_FILE}; replay them with: "
        f"mend analyze {folder}, mend fix --from-run {folder}, mend bench {folder}")
    if trained:
        say(f"mend: the program ran {', '.join(trained)} in train mode (grad on): "
            "add --train to trace it as it ran")
    return True
