"""``mend analyze PATH...``: static scan plus dynamic capture of every target found."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from graphmend.cli.common import (COMPILED_AUTOGRAD_HELP, EXECUTOR_HELP, EXIT_CLEAN, EXIT_FINDINGS, MEMORY_LIMIT_HELP,
                                  CALLS_HELP, FULLGRAPH_HELP, MODE_HELP, NESTED_HELP, RAY_ADDRESS_HELP, TRAIN_HELP, VERBOSE_HELP, Executor, Format,
                                  check_paths, target_paths, executor_choice, executor_scope, fail, load_checked_config,
                                  memory_limit_flag, nested_flag, progress_hook, render_or_fail, require_nested_support,
                                  require_torch, run_modes_flag, warn_refused_cache, wrote)


def analyze(
    paths: List[Path] = typer.Argument(..., help="Files or folders to analyse, or targets as FILE::FUNCTION."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    static_only: bool = typer.Option(False, "--static-only", help="Scan sources only: run no user code, never import torch."),
    dynamic_only: bool = typer.Option(False, "--dynamic-only", help="Run the targets only, no static scan."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Targets (and files) processed in parallel."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds per target (default 300, or [tool.mend] timeout)."),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help=MEMORY_LIMIT_HELP),
    executor: Optional[Executor] = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Rule codes or prefixes to report (GM1,GM201)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Rule codes or prefixes to drop."),
    all_functions: Optional[bool] = typer.Option(None, "--all-functions/--compiled-only",
                                                 help="Scan every function, not only the regions Dynamo traces."),
    train: bool = typer.Option(False, "--train", help=TRAIN_HELP),
    mode: Optional[str] = typer.Option(None, "--modes", help=MODE_HELP),
    calls: int = typer.Option(3, "--calls", min=1, help=CALLS_HELP),
    fullgraph: bool = typer.Option(False, "--fullgraph", help=FULLGRAPH_HELP),
    compiled_autograd: Optional[bool] = typer.Option(None, "--compiled-autograd", help=COMPILED_AUTOGRAD_HELP),
    nested_graph_breaks: Optional[str] = typer.Option(None, "--nested-graph-breaks", metavar="on|off",
                                                      help=NESTED_HELP),
    lower: bool = typer.Option(False, "--lower", help="Also compile each captured graph with Inductor for the CPU: "
                               "a graph it cannot lower (torch.compile raises there) is a GM608 issue naming "
                               "the op, the line and the reason. Slower: every graph is compiled."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr (a bar on a terminal, "
                               "a line per target otherwise)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
) -> None:
    """Find every graph break: static scan of the sources and dynamic capture of each target."""
    from graphmend.core.config import ConfigError
    from graphmend.pipeline import AnalyzeOptions, analyze as run_analyze

    if static_only and dynamic_only:
        raise fail("--static-only and --dynamic-only exclude each other")
    nested = nested_flag(nested_graph_breaks)
    if static_only and lower:
        raise fail("--lower compiles the captured graphs: it does nothing with --static-only")
    if static_only and fullgraph:
        raise fail("--fullgraph chooses how targets compile: it does nothing with --static-only")
    if static_only and nested is not None:
        raise fail("--nested-graph-breaks chooses how targets run: it does nothing with --static-only")
    paths, only = target_paths(paths)
    check_paths(paths)
    memory = memory_limit_flag(memory_limit)
    from graphmend.core.sources import iter_python_files

    if next(iter(iter_python_files(paths)), None) is None:
        raise fail(f"no Python files under {', '.join(str(p) for p in paths)}")
    config = load_checked_config(paths, select=select, ignore=ignore, all_functions=all_functions,
                                 modes=run_modes_flag(train, mode), compiled_autograd=compiled_autograd,
                                 memory_limit=memory, nested_graph_breaks=nested)
    tv = None if static_only else require_torch(
        "analyze", otherwise=f"or scan the sources alone, running nothing: mend analyze {' '.join(str(p) for p in paths)} --static-only")
    where, address = executor_choice(config, executor, ray_address, needs="a dynamic run (no --static-only)"
                                     if static_only else "")
    if not static_only:
        require_nested_support(config)
        warn_refused_cache()  # the captures it keeps for mend fix
    with executor_scope(where, address, jobs), progress_hook(quiet) as progress:
        try:
            report = run_analyze(paths, config, AnalyzeOptions(static=not dynamic_only, dynamic=not static_only,
                                                               jobs=jobs, timeout=timeout, only=only,
                                                               lower=lower, calls=calls, fullgraph=fullgraph),
                                 progress=progress, torch_version=tv)
        except ConfigError as exc:  # a suppression comment naming no rule
            raise fail(str(exc))
    render_or_fail(report, format.value, output, verbose=verbose)
    wrote(output, quiet)
    # a target that errored is a finding too: its breaks are unknown; a recompile's cause is one
    failed = (any(t.breaks or t.graph_break_count or t.error or t.lowering for t in report.targets)
              or bool(report.findings) or any(i.recompiles for i in report.issues))
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_CLEAN)
