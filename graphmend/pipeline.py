"""Wiring the stages for ``mend analyze``: discover -> static scan -> dynamic capture ->
correlate -> one Report. Stages return data; nothing here prints."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from graphmend.config import Config
from graphmend.discovery import discover
from graphmend.model import Report, new_report
from graphmend.sources import analysed_root

# (description, total) -> advance(item, outcome=None); outcome: what the item produced (the
# model's objects), for the CLI's progress line
ProgressHook = Callable[[str, int], Callable[..., None]]


@dataclass
class AnalyzeOptions:
    static: bool = True
    dynamic: bool = True
    jobs: int = 1
    timeout: Optional[float] = None


def analyze(paths: Sequence[str | os.PathLike[str]], config: Config, options: AnalyzeOptions,
            progress: Optional[ProgressHook] = None, torch_version: Optional[str] = None) -> Report:
    root = analysed_root(paths)
    report = new_report("analyze", root=root, torch_version=torch_version if options.dynamic else None)
    report.run_modes = list(config.modes)
    if options.static:
        from rewrites.scan import scan_paths

        scan = scan_paths(paths, config, jobs=options.jobs)
        report.findings.extend(scan.findings)
        report.errors.extend(scan.errors)
        report.files_scanned = scan.files_scanned
    if options.dynamic:
        found = discover(paths, config)
        # syntax / encoding errors are reported once: by the scan when it ran
        seen = {(e.file, e.message) for e in report.errors}
        report.errors.extend(e for e in found.errors if (e.file, e.message) not in seen)
        if not options.static:
            report.files_scanned = len(found.files)
        if found.targets:
            from tracer.capture import capture_targets

            advance = progress("capturing", len(found.targets)) if progress else None
            report.targets.extend(capture_targets(
                found.targets, jobs=options.jobs, timeout=options.timeout or config.timeout, on_done=advance,
                modes=config.modes, compiled_autograd=config.compiled_autograd,
                memory_limit=config.memory_limit))
    if options.static and options.dynamic:
        from graphmend.correlate import correlate

        correlate(report)
    return report
