"""``mend check`` as a stage: scan (and optionally run) what was asked, compare with the
baseline, return a Report whose ``check`` says what is new. Prints nothing, writes nothing:
the command decides about output and the baseline file.

Static mode imports neither torch nor the tracer; ``dynamic`` imports the tracer lazily.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from graphmend.baseline import (Key, compare, dump_baseline, entries_from_findings, entries_from_targets,
                                load_baseline, origin_mode, origin_nested, relative_file, updated_baseline)
from graphmend.collect import CollectOptions, collect
from graphmend.core.config import Config
from graphmend.core.model import CheckEntry, FileError, Finding, Report, new_report
from graphmend.core.sources import SkippedFile, file_kind_problem, is_excluded, iter_python_files, report_root


@dataclass
class CheckOptions:
    dynamic: bool = False
    update: bool = False
    jobs: int = 1
    timeout: Optional[float] = None
    calls: int = 1  # calls per target and mode (--dynamic): later ones surface recompiles


@dataclass
class CheckOutcome:
    report: Report  # findings / targets' breaks hold only the NEW ones; check holds the verdict
    baseline_path: Path
    baseline_text: Optional[str] = None  # the baseline to write (options.update)
    new_findings: list[Finding] = field(default_factory=list)


def python_files(paths: Sequence[Path], config: Config, skipped: Optional[list[SkippedFile]] = None) -> list[Path]:
    """What ``mend check FILES`` looks at: .py files (pre-commit passes any staged name),
    folders walked, config excludes applied to files given directly too (as ruff's
    force-exclude), so a hook never checks what the project excluded. A name that is no
    readable regular file (a dangling symlink, a FIFO) goes to ``skipped``."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(iter_python_files([p], config.exclude, skipped))
        elif p.suffix == ".py":
            try:
                # the folder resolved, not the name: a symlink is excluded by its own name
                rel = (Path(os.path.realpath(p.parent)) / p.name).relative_to(config.root.resolve())
            except ValueError:
                rel = Path(p.name)
            if config.exclude and is_excluded(rel, config.exclude):
                continue
            why = file_kind_problem(p)
            if why:
                if skipped is not None:
                    skipped.append(SkippedFile(os.path.abspath(p), why))
                continue
            out.append(p)
    # A file named twice (or inside a folder also named) is one file: its breaks count once.
    seen: set[Path] = set()
    return [p for p in out if not (p.resolve() in seen or seen.add(p.resolve()))]


def run_check(files: Optional[Sequence[Path]], config: Config, baseline_path: Path, options: CheckOptions,
              torch_version: Optional[str] = None,
              progress: Optional[Callable[[str, int], Callable[..., None]]] = None) -> CheckOutcome:
    """``files`` None: the whole tree under ``config.root``. Raises BaselineError."""
    base_dir = baseline_path.resolve().parent
    baseline = load_baseline(baseline_path)
    whole_tree = files is None
    # Absolute paths in, absolute paths in the findings (the model's rule for `file`).
    skipped: list[SkippedFile] = []
    scan_targets = [p.resolve() for p in ([config.root] if whole_tree else python_files(files, config, skipped))]
    report = new_report("check", root=report_root([config.root], config.project_root), torch_version=torch_version)
    report.run_modes = list(config.modes)
    report.errors.extend(FileError(file=s.path, message=s.message) for s in skipped)

    current: list[CheckEntry] = []
    by_entry: dict[int, Finding] = {}
    failed_targets: list[str] = []
    if scan_targets:
        got = collect([str(p) for p in scan_targets], config,
                      CollectOptions(dynamic=options.dynamic, jobs=options.jobs, timeout=options.timeout,
                                     calls=options.calls if options.dynamic else 1), progress)
        # a target that cannot even be called fails the check: it is no file's error
        report.errors.extend(e for e in got.errors if not e.target)
        failed_targets.extend(e.message for e in got.errors if e.target)
        report.files_scanned, report.targets, report.nested_graph_breaks = \
            got.files_scanned, got.targets, got.nested_graph_breaks
        for entry, finding in entries_from_findings(got.findings, base_dir):
            current.append(entry)
            by_entry[id(entry)] = finding
        failed_targets.extend(t.error if t.name in t.error else f"target {t.name} failed: {t.error}"
                              for t in report.targets if t.error)
        current.extend(entries_from_targets(report.targets))

    checked = {relative_file(str(p), base_dir) for p in (iter_python_files(scan_targets) if not whole_tree else ())}

    # A file that could not be scanned says nothing about its breaks: its entries are
    # neither stale nor pruned by --update-baseline.
    unscanned = {relative_file(e.file, base_dir) for e in report.errors if e.file}

    # the nesting the targets ran with; when none ran, the one asked for (else torch's default, off)
    nested = bool(report.nested_graph_breaks if report.nested_graph_breaks is not None else config.nested_graph_breaks)

    def in_scope(key: Key) -> bool:
        file, origin = key[0], key[1]
        if origin != "static" and (not options.dynamic or origin_mode(origin) not in config.modes
                                   or origin_nested(origin) != nested):
            return False  # a static run (or one in another run mode or nesting) says nothing about these
        if origin == "static" and file in unscanned:
            return False
        return whole_tree or file in checked

    result = compare(current, baseline, base_dir, in_scope, baseline_name=_display(baseline_path))
    result.failed_targets = failed_targets
    report.check = result
    outcome = CheckOutcome(report=report, baseline_path=baseline_path)
    if options.update:
        outcome.baseline_text = dump_baseline(updated_baseline(current, baseline, base_dir, in_scope))
        result.updated = True
    # The report's findings and breaks are the new ones only, so the formats that read
    # them (SARIF, JSON) show exactly what fails the check.
    new_ids = {id(e) for e in result.new}
    outcome.new_findings = [by_entry[id(e)] for e in current if id(e) in new_ids and id(e) in by_entry]
    report.findings = list(outcome.new_findings)
    # one run has one nesting setting, so (file, line, rule, mode) is a site of it
    new_sites = {(e.file, e.line, e.rule, e.run_mode) for e in result.new if e.origin == "dynamic"}
    report.targets = [dataclasses.replace(t, breaks=[
        b for b in t.breaks
        if (str(Path(b.file).resolve()) if b.file else "<unknown>", b.line, b.rule, t.run_mode) in new_sites],
        recompiles=[r for r in t.caused_recompiles if _recompile_site(r, t.run_mode) in new_sites])
        for t in report.targets]
    return outcome


def _recompile_site(r, mode: Optional[str]) -> tuple:
    """(file, line, rule, mode) of a recompile as its baseline entry places it."""
    file, line = r.place
    return (str(Path(file).resolve()) if file else "<unknown>", line, r.rule, mode)


def _display(path: Path) -> str:
    """The baseline as the user named it: relative to the working folder when under it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path.resolve())
