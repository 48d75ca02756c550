"""Static findings x dynamic breaks."""

from __future__ import annotations

from graphmend.correlate import compatible, correlate
from graphmend.model import Break, Finding, Report, TargetResult


def _finding(rule, line, file="/w/m.py"):
    return Finding(rule=rule, file=file, line=line, col=1, message="", function="M.forward",
                   category={"GM1": "control-flow", "GM2": "side-effect", "GM3": "host-scalar"}[rule[:3]])


def test_correlate_marks_confirmed_and_potential():
    findings = [_finding("GM101", 10), _finding("GM301", 10), _finding("GM201", 20), _finding("GM201", 30),
                _finding("GM101", 40), _finding("GM201", 50, file="/w/other.py")]
    breaks = [Break(rule="GM301", category="host-scalar", reason="item", file="/w/m.py", line=10),
              Break(rule="GM201", category="side-effect", reason="print", file="/w/m.py", line=20),
              Break(rule="GM301", category="host-scalar", reason="item", file="/w/m.py", line=40),
              Break(rule="GM900", category="unexplained", reason="odd", file="/w/m.py", line=30),
              Break(rule="GM900", category="unexplained", reason="nothing static", file="/w/m.py", line=99),
              Break(rule="GM201", category="side-effect", reason="print", file="/w/m.py", line=50)]
    report = Report(targets=[TargetResult(name="t", file="/w/m.py", function="t", breaks=breaks)], findings=findings)
    correlate(report)
    assert [f.status for f in findings] == ["confirmed", "confirmed", "confirmed", "confirmed", "confirmed",
                                            "potential"]
    assert breaks[3].rule == "GM201" and breaks[3].category == "side-effect"  # explained by the static rule
    assert breaks[4].rule == "GM900"  # nothing explains it: stays GM9xx


def test_incompatible_family_stays_potential():
    finding = _finding("GM201", 10)
    report = Report(targets=[TargetResult(name="t", file="/w/m.py", function="t", breaks=[
        Break(rule="GM301", category="host-scalar", reason="item", file="/w/m.py", line=10)])], findings=[finding])
    correlate(report)
    assert finding.status == "potential"
    assert compatible("GM101", "GM301") and compatible("GM401", "GM101") and not compatible("GM601", "GM101")
