"""Wiring the stages for ``mend analyze``: discover -> static scan -> dynamic capture ->
correlate -> one Report. Stages return data; nothing here prints."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from graphmend.core.config import Config
from graphmend.core.discovery import discover
from graphmend.core.model import Report, nested_setting, new_report
from graphmend.core.sources import report_root

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
    root = report_root(paths, config.project_root)
    report = new_report("analyze", root=root, torch_version=torch_version if options.dynamic else None)
    report.run_modes = list(config.modes)
    if options.static:
        from rewrites.scan import scan_paths

        scan = scan_paths(paths, config, jobs=options.jobs)
        report.findings.extend(scan.findings)
        report.errors.extend(scan.errors)
        report.files_scanned = scan.files_scanned
    found = None
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
                memory_limit=config.memory_limit, nested_graph_breaks=config.nested_graph_breaks))
            report.nested_graph_breaks = nested_setting(report.targets)
    from graphmend.correlate import correlate, diagnose

    if options.static and options.dynamic:
        correlate(report)
    diagnose(report)
    report.next_steps = next_steps(report, paths, found)
    return report


TARGET_EXAMPLE = ("def mend_target():\n"
                  "    model = MyModel().eval()\n"
                  "    return model, (torch.randn(2, 16),)")
_MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.M)


def next_steps(report: Report, paths: Sequence[str | os.PathLike[str]], found) -> list[str]:
    """What to run next, in words the renderers show as they are: how to get the dynamic half
    when no target ran, and the fix command when some issue has a candidate fix."""
    where = " ".join(shlex.quote(str(p)) for p in paths)
    steps = []
    if found is not None and not found.targets:
        script = _a_script(found.files)
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
