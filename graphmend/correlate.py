"""Static findings x dynamic breaks: one report from two sources.

A finding is ``confirmed`` when a dynamic break of any target lies at the same file and line
and the two rule families are compatible (a condition on ``t.item()`` is GM101 statically
and may be classified GM3xx or GM1xx dynamically); otherwise it stays ``potential``. A GM9xx
break (no rule explained it dynamically) that a static finding explains takes that
finding's rule and category; the others stay GM9xx with Dynamo's words.
"""

from __future__ import annotations

import os
from typing import Optional

from graphmend.model import CONFIRMED, POTENTIAL, Break, Finding, Report

# Families whose patterns overlap on one line: value reads (GM3) feed conditions (GM1) and
# guards (GM4); a mask-then-reduce (GM5) often sits in a condition.
_COMPATIBLE = {
    "GM1": {"GM1", "GM3", "GM4", "GM5"},
    "GM2": {"GM2"},
    "GM3": {"GM3", "GM1", "GM4"},
    "GM4": {"GM4", "GM1", "GM3"},
    "GM5": {"GM5", "GM1", "GM3"},
    "GM6": {"GM6"},
}
_PRIORITY = ("GM4", "GM1", "GM3", "GM5", "GM2", "GM6")  # which finding names an unexplained break


def _norm(path: Optional[str]) -> Optional[str]:
    if not path:
        return None
    try:
        return os.path.normcase(os.path.realpath(path))
    except (OSError, ValueError):
        return path


def compatible(finding_rule: str, break_rule: str) -> bool:
    fam, bfam = finding_rule[:3], break_rule[:3]
    if bfam == "GM9":
        return True  # Dynamo's words did not map to a rule; the line says which one it is
    return bfam in _COMPATIBLE.get(fam, {fam})


def correlate(report: Report) -> None:
    breaks_at: dict[tuple[str, int], list[Break]] = {}
    for target in report.targets:
        for b in target.breaks:
            f = _norm(b.file)
            if f is not None and b.line is not None:
                breaks_at.setdefault((f, b.line), []).append(b)
    by_line: dict[tuple[str, int], list[Finding]] = {}
    for finding in report.findings:
        key = (_norm(finding.file), finding.line)
        by_line.setdefault(key, []).append(finding)
        hits = breaks_at.get(key, ())
        finding.status = CONFIRMED if any(compatible(finding.rule, b.rule) for b in hits) else POTENTIAL
    # breaks Dynamo could not classify, explained by a static finding on their line
    for key, breaks in breaks_at.items():
        findings = by_line.get(key)
        if not findings:
            continue
        best = min(findings, key=lambda f: (_PRIORITY.index(f.rule[:3]) if f.rule[:3] in _PRIORITY else 99, f.rule))
        for b in breaks:
            if b.rule.startswith("GM9") and b.kind != "frame_skipped":
                b.rule = best.rule
                b.category = best.category
