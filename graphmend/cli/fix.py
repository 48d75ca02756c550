"""``mend fix PATH...``: verified source repairs as a unified diff; ``--write`` applies them."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from graphmend.cli.common import (CALLS_HELP, EXECUTOR_HELP, EXIT_CLEAN, EXIT_FINDINGS, Executor, MEMORY_LIMIT_HELP,
                                  RAY_ADDRESS_HELP, TRAIN_HELP, check_paths, target_paths, emit, executor_choice, executor_scope,
                                  fail, load_checked_config, memory_limit_flag, progress_hook, render_or_fail,
                                  require_torch,
                                  rule_codes_flag, run_modes_flag, say, warn_refused_cache, wrote)


class FixFormat(str, Enum):
    diff = "diff"
    json = "json"
    sarif = "sarif"
    github = "github"


def fix(
    paths: Optional[List[Path]] = typer.Argument(None, help="Files or folders whose targets and sources to repair, "
                                                 "or targets as FILE::FUNCTION (with --from-run: default, the "
                                                 "recorded program's folder)."),
    write: bool = typer.Option(False, "--write", help="Apply the verified fixes to the files under PATH (atomically)."),
    rule: Optional[List[str]] = typer.Option(None, "--rule", help="Only these rule codes or prefixes (GM101,GM201)."),
    format: FixFormat = typer.Option(FixFormat.diff, "--format", "-f", help="diff (default), json (the Report), "
                                 "sarif (verified fixes as SARIF fixes on their results) or github (annotations)."),
    patch: Optional[Path] = typer.Option(None, "--patch", help="Write verified fixes to installed packages as one "
                                         "git-style diff here (apply with patch -p1 -d <site-packages>)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the diff / JSON here instead of stdout."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Targets captured and verified in parallel."),
    calls: int = typer.Option(3, "--calls", min=1, help=CALLS_HELP + " The patched program is re-traced over the "
                              "same calls: a fix may not make it recompile more, and a fix for a recompile must "
                              "make it recompile less."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds per worker (default 300)."),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help=MEMORY_LIMIT_HELP),
    executor: Optional[Executor] = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    no_follow: bool = typer.Option(False, "--no-follow", help="Do not fix breaks in files outside PATH."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also offer fixes that keep the outputs but "
                                      "change the program's cost (GM501/GM502 dense expert dispatch), or whose "
                                      "documented caveat no check can show (a warning lost under torch.compile, "
                                      "a masked max on an empty mask); verified the same way."),
    accept_partial: bool = typer.Option(False, "--accept-partial", help="Also apply the 'partially verified' "
                                        "fixes: every check that ran passed, but one that could show a difference "
                                        "did not run (the original raises or is not deterministic in that mode)."),
    train: bool = typer.Option(False, "--train", help=TRAIN_HELP + " The breaks to fix are the ones a train step hits."),
    modes: Optional[str] = typer.Option(None, "--modes", help="The one run mode breaks are captured and re-traced in: "
                                        "eval (default) or train; verification checks both either way."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress (a bar on a terminal, a line per "
                               "target otherwise), no listing on stderr."),
    from_run: Optional[Path] = typer.Option(None, "--from-run", metavar="DIR", help="Also verify on the targets "
                                            "`mend run --record DIR SCRIPT` recorded: the program's own inputs."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Capture and verify every target again, reusing no "
                                  "earlier verdict (kept under $MEND_CACHE_DIR, else ~/.cache/graphmend)."),
    bench: bool = typer.Option(False, "--bench", help="Time each target compiled before and after its verified fixes "
                               "(each arm in its own worker); fixes that make it slower beyond noise are "
                               "'regresses', not written."),
    bench_modes: Optional[str] = typer.Option(None, "--bench-modes", metavar="MODES", help="--bench: the "
                                              "torch.compile modes timed, comma-separated (default: default; "
                                              "also reduce-overhead, max-autotune)."),
    bench_device: Optional[str] = typer.Option(None, "--bench-device", metavar="DEVICE", help="--bench: cpu or "
                                               "cuda (default: cuda when torch sees one, else cpu)."),
    allow_slower: bool = typer.Option(False, "--allow-slower", help="--bench: also write the fixes measured slower."),
) -> None:
    """Propose source fixes for graph breaks; only fixes that pass verification are offered."""
    from graphmend.core.config import ConfigError
    from graphmend.fixing import FixOptions, diff_bytes, run_fix
    from graphmend.core.sources import SourceError, write_bytes_atomic, write_source
    from graphmend.core.model import REGRESSES, REJECTED, UNVERIFIED

    recorded: list[str] = []
    if from_run is not None:
        paths, recorded = _from_run(from_run, paths)
    if not paths:
        raise fail("give the files or folders to fix (PATH...), or --from-run DIR")
    paths, only = target_paths(paths)
    check_paths(paths)
    rules = tuple(rule_codes_flag(rule, "--rule") or ())
    memory = memory_limit_flag(memory_limit)
    config = load_checked_config(paths, modes=run_modes_flag(train, modes), memory_limit=memory)
    if recorded:
        # as [tool.mend] targets, named relative to the config root that resolves them
        config = config.with_flags(targets=[*config.targets, *(
            f"{Path(os.path.relpath(file, config.root)).as_posix()}:{fn}" for file, fn in
            (r.rsplit(":", 1) for r in recorded))])
    if len(config.modes) != 1:
        raise fail(f"mend fix captures and re-traces in one run mode, not {','.join(config.modes)}: "
                   "pass --train or --modes eval")
    gate_modes, device = _bench_flags(bench, bench_modes, bench_device, allow_slower)
    where, address = executor_choice(config, executor, ray_address)
    require_torch("fix")
    if device == "auto":
        import torch  # require_torch imported it already

        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not __import__("torch").cuda.is_available():
        raise fail("--bench-device cuda: no CUDA device is available to this torch")
    warn_refused_cache(not no_cache)
    with executor_scope(where, address, jobs), progress_hook(quiet) as progress:
        cost = None
        if bench:
            from graphmend.bench.gate import GateOptions, cost_gate

            cost = cost_gate(config, GateOptions(modes=gate_modes, device=device, run_mode=config.modes[0],
                                                 timeout=timeout, cache=not no_cache), progress)
        try:
            run = run_fix(paths, config, FixOptions(rules=rules, jobs=jobs, timeout=timeout, follow=not no_follow,
                                                    unsafe=unsafe_fixes, cache=not no_cache,
                                                    allow_slower=allow_slower, accept_partial=accept_partial,
                                                    only=only, calls=calls),
                          progress=progress, cost=cost)
        except ConfigError as exc:  # a suppression comment naming no rule
            raise fail(str(exc))
    report = run.report
    in_tree, out_tree = run.in_tree_patches(), run.out_of_tree_patches()
    labels = {p: run.candidates[p].label for p in run.patches}
    if format is FixFormat.json:
        from reports.json_report import render_json

        emit(render_json(report), output)
    elif format in (FixFormat.sarif, FixFormat.github):
        render_or_fail(report, format.value, output)
    else:
        # bytes: each file's part in its own encoding, line endings and BOM, so that it applies
        text = b"".join(diff_bytes(run.candidates[p].source, t, labels[p]) for p, t in sorted(run.patches.items()))
        if text or output is not None:
            emit(text, output)
    if not quiet:
        from reports.diagnostics import fix_listing

        sys.stderr.write(fix_listing(report))
        if run.reused:
            say(f"mend: {len(run.reused)} of {len(report.fix_targets)} target(s) unchanged since an earlier "
                "run: their verdicts were reused (--no-cache verifies again)")
    wrote(output, quiet)
    written = 0
    if write:
        # one file that cannot be written never stops the others: each says why, exit 1
        with progress_hook(quiet) as progress:
            advance = progress("writing", len(in_tree)) if in_tree else None
            for path, text in sorted(in_tree.items()):
                try:
                    write_source(run.candidates[path].source, text)
                except SourceError as exc:
                    say(f"mend: {os.path.relpath(path)}: {exc.message}")
                    continue
                finally:
                    if advance:
                        advance(labels[path])
                written += 1
        if not quiet and written:
            say(f"mend: wrote {written} file(s)")
        if run.held and not quiet:
            say(f"mend: {run.held} partially verified fix(es) not written (a check did not run); "
                "--accept-partial writes them")
        if out_tree and not quiet:
            say(f"mend: {len(out_tree)} verified fix(es) are in installed packages, never written in place; "
                "use --patch FILE")
    if patch is not None:
        diff = b"".join(diff_bytes(run.candidates[p].source, t, labels[p]) for p, t in sorted(out_tree.items()))
        try:
            write_bytes_atomic(patch, diff)
        except OSError as exc:
            raise fail(f"cannot write --patch {patch}: {exc.strerror or exc}")
        if not quiet:
            roots = sorted({run.candidates[p].import_root or "" for p in out_tree})
            say(f"mend: wrote {patch} ({len(out_tree)} file(s)); apply with: patch -p1 -d {roots[0] if roots else '<dir>'} < {patch}")
    if report.targets and all(t.error for t in report.targets):
        # a broken environment must not look like a clean run
        first = report.targets[0]
        say(f"mend: no target ran: all {len(report.targets)} failed ({first.name}: {first.error})")
        raise typer.Exit(EXIT_FINDINGS)
    unapplied = (len(in_tree) - written) + (0 if patch is not None else len(out_tree))
    # a candidate fix that was rejected, left unverified or held back is a finding, as an unapplied one is
    failed = run.held > 0 or any(f.status in (REJECTED, UNVERIFIED) or (f.status == REGRESSES and not allow_slower)
                                 for f in report.fixes)
    raise typer.Exit(EXIT_FINDINGS if unapplied > 0 or failed else EXIT_CLEAN)


GATE_MODES = ("default", "reduce-overhead", "max-autotune")


def _bench_flags(bench: bool, modes: Optional[str], device: Optional[str],
                 allow_slower: bool) -> tuple[list[str], str]:
    """The cost gate's modes and device ("auto": decided once torch is imported); a flag
    that needs --bench, or a bad value, is a usage error naming it."""
    for flag, given in (("--bench-modes", modes is not None), ("--bench-device", device is not None),
                        ("--allow-slower", allow_slower)):
        if given and not bench:
            raise fail(f"{flag} applies only with --bench (the cost gate)")
    chosen = [m.strip() for m in (modes or "default").split(",") if m.strip()]
    bad = [m for m in chosen if m not in GATE_MODES]
    if bad or not chosen:
        raise fail(f"--bench-modes: {'unknown mode(s) ' + ', '.join(bad) if bad else 'give a mode'}; "
                   f"choose from {', '.join(GATE_MODES)}")
    if device is not None and device not in ("cpu", "cuda"):
        raise fail(f"--bench-device: {device!r} is not cpu or cuda")
    return list(dict.fromkeys(chosen)), device or "auto"


def _from_run(folder: Path, paths: Optional[List[Path]]) -> tuple[List[Path], list[str]]:
    """The paths to fix (given, else the recorded program's folder) and the recorded targets
    as ``file:function``; a folder with no recording is a usage error."""
    from graphmend.core.recording import RecordError, recorded_targets, source_root

    try:
        targets_file, manifest = recorded_targets(folder)
    except RecordError as exc:
        raise fail(str(exc))
    functions = [t.get("function") for t in manifest.get("targets", []) if isinstance(t, dict)]
    refs = [f"{targets_file.resolve()}:{fn}" for fn in functions if isinstance(fn, str) and fn.isidentifier()]
    if not refs:
        raise fail(f"--from-run {folder}: the recording holds no target (see {targets_file})")
    return (list(paths) if paths else [source_root(folder, manifest)]), refs
