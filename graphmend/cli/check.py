"""``mend check [FILES...]``: the pre-commit / CI gate. Exit 1 on graph breaks the baseline
does not know (or a target that errored, or a file that could not be scanned), 0 otherwise.

Static mode never imports torch: this module, the baseline and the scan are torch-free.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import List, Optional

import typer

from graphmend.cli.common import (CALLS_HELP, COMPILED_AUTOGRAD_HELP, EXECUTOR_HELP, EXIT_CLEAN, EXIT_FINDINGS,
                                  Executor, Format, MEMORY_LIMIT_HELP, MODE_HELP, NESTED_HELP, RAY_ADDRESS_HELP, TRAIN_HELP,
                                  executor_choice, executor_scope, fail, load_checked_config, memory_limit_flag,
                                  nested_flag, progress_hook, render_or_fail, require_nested_support, require_torch,
                                  run_modes_flag, say)

# Formats whose renderer shows Report.check.new itself (reports/).
CHECK_AWARE_FORMATS = ("text", "md", "html", "github")


def check(
    files: Optional[List[Path]] = typer.Argument(None, help="Files (or folders) to check; non-.py files are ignored. "
                                                            "Default: the whole tree under the config root."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", "-b",
                                            help="Baseline file (default .mend-baseline.json beside pyproject.toml, "
                                                 "or [tool.mend] baseline)."),
    update_baseline: bool = typer.Option(False, "--update-baseline",
                                         help="Write what is found now as the baseline (pruning stale entries) and exit 0."),
    dynamic: bool = typer.Option(False, "--dynamic", help="Also run the targets and compare their dynamic breaks (needs torch)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Targets run in parallel (--dynamic)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds per target (--dynamic)."),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help=MEMORY_LIMIT_HELP + " (--dynamic)"),
    executor: Optional[Executor] = typer.Option(None, "--executor", help=EXECUTOR_HELP + " With --dynamic."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP + " With --dynamic."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Rule codes or prefixes to check (GM1,GM201)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Rule codes or prefixes to drop."),
    all_functions: Optional[bool] = typer.Option(None, "--all-functions/--compiled-only",
                                                 help="Scan every function, not only the regions Dynamo traces."),
    train: bool = typer.Option(False, "--train", help=TRAIN_HELP + " With --dynamic."),
    modes: Optional[str] = typer.Option(None, "--modes", help=MODE_HELP + " With --dynamic."),
    compiled_autograd: Optional[bool] = typer.Option(None, "--compiled-autograd", help=COMPILED_AUTOGRAD_HELP),
    nested_graph_breaks: Optional[str] = typer.Option(None, "--nested-graph-breaks", metavar="on|off",
                                                      help=NESTED_HELP + " With --dynamic."),
    calls: int = typer.Option(3, "--calls", min=1, help=CALLS_HELP + " With --dynamic: a new recompile fails the "
                              "gate as a new break does."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no summary line on stderr."),
) -> None:
    """Fail on graph breaks (and, with --dynamic, recompiles) that are not in the baseline: the
    pre-commit hook and CI gate."""
    from graphmend.baseline import BaselineError
    from graphmend.check import CheckOptions, run_check
    from graphmend.core.config import ConfigError
    from graphmend.core.sources import write_atomic

    nested = nested_flag(nested_graph_breaks)
    if (train or modes is not None or compiled_autograd or nested is not None) and not dynamic:
        raise fail("--train, --modes, --compiled-autograd and --nested-graph-breaks choose how targets run: "
                   "they need --dynamic")
    # a broken symlink is no usage error: it is reported as that file's error and the rest is checked
    missing = [p for p in files or () if not p.exists() and not p.is_symlink()]
    if missing:
        raise fail(f"no such file: {missing[0]}")
    config = load_checked_config(files or [], select=select, ignore=ignore, all_functions=all_functions,
                                 modes=run_modes_flag(train, modes), compiled_autograd=compiled_autograd,
                                 memory_limit=memory_limit_flag(memory_limit), nested_graph_breaks=nested)
    baseline_path = baseline if baseline is not None else config.root / config.baseline
    if baseline_path.is_dir():
        raise fail(f"--baseline {baseline_path} is a folder; give a file path")
    first_run = not baseline_path.exists() and not update_baseline
    tv = require_torch("check --dynamic") if dynamic else None
    where, address = executor_choice(config, executor, ray_address, needs="" if dynamic else "--dynamic")
    if dynamic:
        require_nested_support(config)

    with executor_scope(where, address, jobs), progress_hook(quiet) as progress:
        try:
            outcome = run_check(files if files else None, config, baseline_path,
                                CheckOptions(dynamic=dynamic, update=update_baseline, jobs=jobs, timeout=timeout,
                                             calls=calls),
                                torch_version=tv, progress=progress)
        except (BaselineError, ConfigError) as exc:  # ConfigError: a suppression comment naming no rule
            raise fail(str(exc))

    report, result = outcome.report, outcome.report.check
    if outcome.baseline_text is not None:
        try:
            write_atomic(baseline_path, outcome.baseline_text)
        except OSError as exc:
            raise fail(f"cannot write baseline {baseline_path}: {exc.strerror or exc}")
    if format.value in CHECK_AWARE_FORMATS:
        # These views list the new breaks in their "check" section; the same ones in
        # findings and targets' breaks would show each twice. SARIF and JSON keep them.
        report = dataclasses.replace(report, findings=[],
                                     targets=[dataclasses.replace(t, breaks=[]) for t in report.targets])
    render_or_fail(report, format.value, output)
    if not quiet:
        from reports.diagnostics import check_summary

        for line in check_summary(result, len(report.errors)):
            say(line)
        if first_run:
            gate = " ".join(["mend check", *(["--dynamic"] if dynamic else []), *(str(f) for f in files or ())])
            say(f"mend check: no baseline at {baseline_path} yet, so every break is new; accept today's with "
                f"`{gate} --update-baseline` (then commit {baseline_path.name}): later runs fail only on new ones")
    if result.failed_targets or report.errors:
        raise typer.Exit(EXIT_FINDINGS)
    if update_baseline:
        raise typer.Exit(EXIT_CLEAN)
    raise typer.Exit(EXIT_FINDINGS if result.new else EXIT_CLEAN)
