"""``mend sweep LIBRARY``: every architecture of an installed library that builds from its
config class, in eval and/or train mode, in one report (graphmend.sweep)."""

from __future__ import annotations

import shlex
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from graphmend.cli.common import (CALLS_HELP, EXECUTOR_HELP, EXIT_CLEAN, EXIT_FINDINGS, FULLGRAPH_HELP, MEMORY_LIMIT_HELP, MODE_HELP,
                                  RAY_ADDRESS_HELP, TRAIN_HELP, Executor, emit, executor_choice, executor_scope,
                                  fail, memory_limit_flag, progress_hook, require_torch, run_modes_flag, wrote)


class SweepFormat(str, Enum):
    text = "text"
    json = "json"
    md = "md"
    html = "html"


def _names(values: Optional[List[str]]) -> list[str]:
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def sweep(
    library: str = typer.Argument(..., help="The library whose models to run: transformers, timm, torchvision, torchaudio or diffusers."),
    only: Optional[List[str]] = typer.Option(None, "--only", help="Models to run (BertModel,WhisperModel or "
                                             "repeated; for transformers also a model type, bert: its base model "
                                             "on tokens); one the enumeration leaves out runs when named."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N architectures."),
    every: Optional[int] = typer.Option(None, "--every", min=1, help="Every Nth architecture of the enumeration "
                                        "(a fixed sample; before --limit)."),
    fix: bool = typer.Option(False, "--fix", help="Then mend fix (verification only, nothing written) over every "
                             "breaking model and mode, and the population table: per modality, models built, pairs "
                             "that break, Dynamo's logged breaks, breaks removed by verified fixes, pairs brought "
                             "to zero (partially verified fixes counted apart)."),
    format: SweepFormat = typer.Option(SweepFormat.text, "--format", "-f", help="Output format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    md: Optional[Path] = typer.Option(None, "--md", help="Also write the Markdown dashboard here."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write the HTML dashboard here."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="A previous sweep's JSON: exit 1 on regressions "
                                            "(one graph before and breaks now, more graphs, or no longer runs)."),
    targets_dir: Optional[Path] = typer.Option(None, "--targets-dir", help="Write the generated targets here and keep "
                                               "them (mend analyze DIR/hf_bert.py gives that model's counts)."),
    force: bool = typer.Option(False, "--force", help="Let --targets-dir name a folder that is not empty (its files "
                               "of the same names are overwritten)."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Architectures captured in parallel."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1,
                                            help="Seconds per architecture and mode (default 300)."),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help=MEMORY_LIMIT_HELP),
    executor: Optional[Executor] = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    calls: int = typer.Option(3, "--calls", min=1, help=CALLS_HELP),
    fullgraph: bool = typer.Option(False, "--fullgraph", help=FULLGRAPH_HELP),
    train: bool = typer.Option(False, "--train", help=TRAIN_HELP),
    mode: Optional[str] = typer.Option(None, "--modes", help=MODE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    list_only: bool = typer.Option(False, "--list", help="Print what the sweep would run (library, model, modality, "
                                   "modes) and exit, running nothing."),
) -> None:
    """Build every model class of LIBRARY tiny from its config with inputs of its modality, capture each, report
    breaks and root causes."""
    from graphmend.core.config import Config, ConfigError
    from graphmend.core.sources import read_report_text
    from graphmend.core.tables import SweepReport
    from graphmend.sweep.stage import LIBRARIES, SweepError, SweepOptions, plan, run_sweep

    if library not in LIBRARIES:
        raise fail(f"unknown library {library!r}: mend sweep knows {', '.join(sorted(LIBRARIES))}")
    if list_only:
        if format not in (SweepFormat.text, SweepFormat.json):
            raise fail("--list prints text or JSON (-f text, -f json)")
        try:
            modes = Config().with_flags(modes=run_modes_flag(train, mode)).modes
            p = plan(SweepOptions(library=library, only=_names(only), limit=limit, every=every))
        except (SweepError, ConfigError) as exc:
            raise fail(str(exc))
        from reports.sweep import render_plan

        emit(render_plan(p.library, p.version, p.selection, p.listing(modes), p.skipped,
                         format.value), output)
        raise typer.Exit(EXIT_CLEAN)
    if fix and fullgraph:
        raise fail("--fix repairs the breaks of the default compile, which --fullgraph stops at the first of: "
                   "give one of them")
    if targets_dir is not None:
        from graphmend.core.sources import OutputDirError, prepare_output_dir

        try:
            prepare_output_dir(targets_dir, "--targets-dir", force=force)
        except OutputDirError as exc:
            raise fail(str(exc))
    prior = None
    if baseline is not None:
        try:
            prior = SweepReport.from_json(read_report_text(baseline))
        except OSError as exc:
            raise fail(f"cannot read --baseline {baseline}: {exc.strerror or exc}")
        except (ValueError, TypeError) as exc:
            raise fail(f"--baseline {baseline}: {exc}")
        if prior.fullgraph != fullgraph:  # a break means another thing there: nothing to compare
            how = "with" if prior.fullgraph else "without"
            raise fail(f"--baseline {baseline} was swept {how} --fullgraph: sweep it again {how} it to compare")
    try:
        config = Config().with_flags(modes=run_modes_flag(train, mode), memory_limit=memory_limit_flag(memory_limit))
    except ConfigError as exc:
        raise fail(str(exc))
    tv = require_torch("sweep")
    where, address = executor_choice(config, executor, ray_address)
    options = SweepOptions(library=library, only=_names(only), limit=limit, every=every, fix=fix, jobs=jobs,
                           timeout=timeout, collect={"calls": calls, "fullgraph": fullgraph}, executor=where,
                           targets_dir=targets_dir.resolve() if targets_dir else None,
                           command=" ".join(["mend"] + [shlex.quote(a) for a in sys.argv[1:]]))
    with executor_scope(where, address, jobs), progress_hook(quiet) as progress:
        try:
            report = run_sweep(options, config, progress=progress, torch_version=tv, baseline=prior,
                               baseline_name=str(baseline) if baseline else None)
        except SweepError as exc:
            raise fail(str(exc))
    from reports.sweep import render_sweep

    emit(render_sweep(report, format.value), output)
    wrote(output, quiet)
    for path, fmt in ((md, "md"), (html, "html")):
        if path is not None:
            emit(render_sweep(report, fmt), path)
            wrote(path, quiet)
    raise typer.Exit(EXIT_FINDINGS if report.regressions else EXIT_CLEAN)
