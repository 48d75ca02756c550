"""What analyze, fix and check start from: the static scan of the files, the targets found
there, each file's errors once, and the dynamic capture of every target in the run modes
the config asks for. ``pipeline.analyze``, ``fixing.run_fix`` and ``check.run_check`` call
``collect``; each builds its own report from what it returns. Nothing here prints.

The scan and the capture are imported when they run: a static run never loads the tracer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from graphmend.core.cache import Cache
from graphmend.core.config import Config
from graphmend.core.discovery import TargetSpec, discover
from graphmend.core.model import FileError, Finding, TargetResult, nested_setting

# (description, total) -> advance(item, outcome=None); outcome: what the item produced (the
# model's objects), for the CLI's progress line
ProgressHook = Callable[[str, int], Callable[..., None]]


@dataclass
class CollectOptions:
    static: bool = True  # scan the sources
    dynamic: bool = True  # discover the targets and capture them
    jobs: int = 1  # targets captured in parallel
    scan_jobs: int = 1  # scan workers (analyze's --jobs; fix and check scan in one process)
    timeout: Optional[float] = None  # per target and run mode (default: config.timeout)
    only: tuple[str, ...] = ()  # target function names kept (all when empty)
    cache: Optional[Cache] = None  # earlier captures reused, new ones kept (mend fix)
    lower: bool = False  # each captured graph also compiled by Inductor (tracer.lowering)
    calls: int = 1  # calls per target and mode (mend analyze --calls; tracer.worker.later_calls)
    fullgraph: bool = False  # compiled as torch.compile(fullgraph=True) compiles (--fullgraph)


@dataclass
class Collected:
    findings: list[Finding] = field(default_factory=list)
    # the scan's errors, then discovery's not already said (a syntax error is the scan's to
    # report when it ran), a target's own among them (FileError.target)
    errors: list[FileError] = field(default_factory=list)
    files_scanned: int = 0  # files the scan read (discovery's when there was no scan)
    files: list[Path] = field(default_factory=list)  # the .py files discovery looked at
    specs: list[TargetSpec] = field(default_factory=list)  # the targets captured, in order
    targets: list[TargetResult] = field(default_factory=list)  # per target, one per run mode
    nested_graph_breaks: Optional[bool] = None  # Dynamo's setting as the captures had it
    discovered: bool = False  # discovery ran (dynamic)


def collect(paths: Sequence[str | os.PathLike[str]], config: Config, options: CollectOptions,
            progress: Optional[ProgressHook] = None) -> Collected:
    out = Collected()
    if options.static:
        from rewrites.scan import scan_paths

        scan = scan_paths(paths, config, jobs=options.scan_jobs)
        out.findings = list(scan.findings)
        out.errors.extend(scan.errors)
        out.files_scanned = scan.files_scanned
    if not options.dynamic:
        return out
    found = discover(paths, config)
    out.discovered, out.files = True, list(found.files)
    out.specs = [t for t in found.targets if t.function in options.only] if options.only else list(found.targets)
    seen = {(e.file, e.message) for e in out.errors}
    out.errors.extend(e for e in found.errors if (e.file, e.message) not in seen)
    if not options.static:
        out.files_scanned = len(found.files)
    if out.specs:
        from tracer.capture import capture_targets

        advance = progress("capturing", len(out.specs)) if progress else None
        out.targets = capture_targets(out.specs, jobs=options.jobs, timeout=options.timeout or config.timeout,
                                      on_done=advance, modes=config.modes, compiled_autograd=config.compiled_autograd,
                                      memory_limit=config.memory_limit, nested_graph_breaks=config.nested_graph_breaks,
                                      cache=options.cache, lower=options.lower, calls=options.calls,
                                      fullgraph=options.fullgraph)
        out.nested_graph_breaks = nested_setting(out.targets)
    return out
