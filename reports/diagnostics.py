"""What a command says on stderr beside its output: ``mend fix``'s listing of what got no
automatic fix and of each target, ``mend check``'s summary line. Plain lines, formatting only:
the commands write them (``--quiet`` drops them)."""

from __future__ import annotations

import os

from graphmend.core.model import PARTIAL, VERIFIED, CheckResult, Report
from reports.wording import cost_text, printable


def fix_listing(report: Report) -> str:
    """What got no automatic fix (or was verified in fewer modes than all), then the
    per-target outcome, then the files that could not be processed; one line each."""
    out = []
    for f in report.fixes:
        if f.status == VERIFIED and not f.skipped_checks:
            continue
        where = f"{os.path.relpath(f.file) if not f.import_root else os.path.relpath(f.file, f.import_root)}:{f.line}"
        if f.status == VERIFIED:  # verified, but not in every mode: say which did not run
            out.append(f"{where}: {f.rule} [verified: {', '.join(f.checks)}; not checked: "
                       f"{'; '.join(f.skipped_checks)}] {f.reason}\n")
            continue
        if f.status == PARTIAL:  # what ran, and what the proof lacks
            out.append(f"{where}: {f.rule} [{f.status}: {', '.join(f.checks)}; lacks: {'; '.join(f.partial)}] "
                       f"{f.reason}\n")
            continue
        out.append(f"{where}: {f.rule} [{f.status}] {f.reason}\n")
        if f.advice:
            out.append(f"    advice: {f.advice}\n")
    for t in report.fix_targets:
        eq = {True: "outputs equal", False: "OUTPUTS CHANGED", None: "not compared"}[t.outputs_equal]
        dyn = (f" (Dynamo's graph_break_count {t.graph_breaks_before} -> {t.graph_breaks_after})"
               if t.graph_breaks_before is not None and t.graph_breaks_after is not None else "")
        recompiles = (f", recompiles {t.recompiles_before} -> {t.recompiles_after}"
                      if t.recompiles_before or t.recompiles_after else "")
        out.append(f"{t.name}: breaks {t.breaks_before} -> {t.breaks_after}{dyn}{recompiles}, {eq}"
                   + (f", unexercised: {'; '.join(t.unexercised_branches)}" if t.unexercised_branches else "")
                   + (f", error: {t.error}" if t.error else "") + "\n")
        out += [f"    cost: {cost_text(c)}\n" for c in t.costs]
    for e in report.errors:
        out.append(f"mend: {e.file}: {e.message}\n")
    return printable("".join(out))


def check_summary(result: CheckResult, errors: int) -> list[str]:
    """``mend check``'s verdict at a glance, so a hook's output says why it
    failed: the counts, each failed target, and how to prune stale baseline entries."""
    parts = [f"{len(result.new)} new", f"{result.known} known", f"{len(result.stale)} stale"]
    if result.failed_targets:
        parts.append(f"{len(result.failed_targets)} failed target(s)")
    if errors:
        parts.append(f"{errors} file error(s)")
    verb = "baseline written" if result.updated else "checked against"
    lines = [f"mend check: {', '.join(parts)} ({verb} {result.baseline})"]
    lines += [f"mend check: {message}" for message in result.failed_targets]
    if result.stale and not result.updated:
        lines.append("mend check: stale baseline entries (fixed breaks); prune them with 'mend check --update-baseline'")
    return [printable(line) for line in lines]
