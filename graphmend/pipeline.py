"""Wiring the stages for ``mend analyze``: collect (static scan, discovery, dynamic capture)
-> correlate -> one Report. Stages return data; nothing here prints."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from graphmend.collect import Collected, CollectOptions, ProgressHook, collect
from graphmend.core.cache import Cache
from graphmend.core.config import Config
from graphmend.core.model import Report, new_report
from graphmend.core.sources import report_root


@dataclass
class AnalyzeOptions:
    static: bool = True
    dynamic: bool = True
    jobs: int = 1
    timeout: Optional[float] = None
    only: tuple[str, ...] = ()  # target function names run (all when empty)
    plan: bool = True  # each issue's fix is the planner's verdict at its place (no run, libcst only)
    lower: bool = False  # --lower: each captured graph also compiled by Inductor; a failure is a GM608 issue
    calls: int = 1  # calls per target and mode (mend analyze --calls: 3)
    fullgraph: bool = False  # --fullgraph: compiled as torch.compile(fullgraph=True) compiles


def analyze(paths: Sequence[str | os.PathLike[str]], config: Config, options: AnalyzeOptions,
            progress: Optional[ProgressHook] = None, torch_version: Optional[str] = None) -> Report:
    root = report_root(paths, config.project_root)
    report = new_report("analyze", root=root, torch_version=torch_version if options.dynamic else None)
    report.run_modes = list(config.modes)
    # the captures are kept (never read here: analyze always runs its targets) for a `mend fix`
    # of the same unchanged files to start from
    keep = Cache.for_run(reuse=False) if options.dynamic else None
    got = collect(paths, config, CollectOptions(static=options.static, dynamic=options.dynamic, jobs=options.jobs,
                                                scan_jobs=options.jobs, timeout=options.timeout, cache=keep,
                                                only=options.only, lower=options.lower, calls=options.calls,
                                                fullgraph=options.fullgraph), progress)
    report.findings, report.errors, report.targets = got.findings, got.errors, got.targets
    report.files_scanned, report.nested_graph_breaks = got.files_scanned, got.nested_graph_breaks
    from graphmend.correlate import correlate, diagnose

    if options.static and options.dynamic:
        correlate(report)
    diagnose(report, enabled=config.rule_enabled)
    if options.plan:
        from graphmend.fixing import plan_issues

        plan_issues(report, paths, config, progress)
    report.next_steps = next_steps(report, paths, got)
    return report


TARGET_EXAMPLE = ("def mend_target():\n"
                  "    model = MyModel().eval()\n"
                  "    return model, (torch.randn(2, 16),)")
_MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.M)


def next_steps(report: Report, paths: Sequence[str | os.PathLike[str]], got: Collected) -> list[str]:
    """What to run next, in words the renderers show as they are: how to get the dynamic half
    when no target ran, and the fix command when some issue has a candidate fix."""
    where = " ".join(shlex.quote(str(p)) for p in paths)
    steps = []
    if got.discovered and not got.specs:
        script = _a_script(got.files)
        steps.append(
            f"No target found under {where}: the findings are static only (potential until a run hits them). "
            f"For the dynamic half, run your program under mend: mend run {shlex.quote(script) if script else 'train.py'} "
            f"[ARGS...], or add a target to any file there (a top-level function named mend_target*, "
            f"returning the callable and its inputs):\n{TARGET_EXAMPLE}")
    issues = report.issues
    safe = sum(1 for i in issues if i.fix == "safe")
    unsafe = sum(1 for i in issues if i.fix == "unsafe")
    noun = lambda n: f"{n} issue{'s' if n != 1 else ''}"
    # mend fix proves each patch on a target: without one it can only show them unverified
    verify = "" if report.targets else " (it verifies each on a target: add one first)"
    if safe:
        steps.append(f"{safe} of {noun(len(issues))} {'have' if safe != 1 else 'has'} a candidate fix: mend fix {where} "
                     f"shows each verified patch, --write applies them{verify}"
                     + (f"; {unsafe} more with --unsafe-fixes, which may change the program's cost" if unsafe else ""))
    elif unsafe:
        steps.append(f"{noun(unsafe)} {'have' if unsafe != 1 else 'has'} a candidate fix that may change the program's "
                     f"cost: mend fix {where} --unsafe-fixes{verify}")
    return steps


def _a_script(files) -> Optional[str]:
    """A program among ``files`` (``train.py``, or the first with a ``__main__`` guard), as
    ``mend run`` would take it from the current directory."""
    from graphmend.core.sources import read_source

    def shown(f) -> str:
        try:
            return os.path.relpath(f)
        except ValueError:  # another drive (Windows)
            return str(f)

    by_name = [f for f in files if Path(f).name == "train.py"]
    if by_name:
        return shown(by_name[0])
    for f in files:
        try:
            if _MAIN_GUARD.search(read_source(f)):
                return shown(f)
        except Exception:  # unreadable: the scan reports it
            continue
    return None
