"""``mend corpus [PATH]``: analyze + fix over the corpus, written as the docs/corpus.md table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from graphmend.cli.common import EXIT_CLEAN, EXIT_FINDINGS, fail, load_checked_config, progress_hook, require_torch, say


def corpus(
    path: Path = typer.Argument(Path("corpus"), help="The corpus folder (with manifest.toml)."),
    output: Path = typer.Option(Path("docs/corpus.md"), "--output", "-o", help="Where the markdown table goes."),
    skip_hf: bool = typer.Option(False, "--skip-hf", help="Leave out the transformers models (hf = true files)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds per worker (default 300)."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Targets captured and verified in parallel."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no summary on stderr."),
) -> None:
    """Regenerate the corpus table: breaks by category before, after `mend fix`, why the rest stay.

    Exit 1 when a target's outputs changed or a fixable site was not removed, else 0."""
    from graphmend.core.sources import write_atomic
    from graphmend.corpus_table import CorpusError, build_table
    from reports.corpus_md import render

    if not path.is_dir():
        raise fail(f"path is not a folder: {path}")
    config = load_checked_config([path])
    require_torch("corpus")
    with progress_hook(quiet) as progress:
        try:
            table, _ = build_table(path, config, skip_hf=skip_hf, timeout=timeout, progress=progress, jobs=jobs)
        except CorpusError as exc:
            raise fail(str(exc))
    try:
        write_atomic(output, render(table))
    except OSError as exc:
        raise fail(f"cannot write --output {output}: {exc.strerror or exc}")
    t = table.totals
    if not quiet and t is not None:
        say(f"mend: wrote {output}: breaks {t.breaks_before} -> {t.breaks_after}"
            + (f", fixable removed {t.fixable_removed}/{t.fixable}" if t.fixable is not None else "")
            + f", outputs equal: {t.outputs_equal}")
    bad = t is not None and (t.outputs_equal is False or (t.fixable is not None and t.fixable_removed != t.fixable))
    raise typer.Exit(EXIT_FINDINGS if bad else EXIT_CLEAN)
