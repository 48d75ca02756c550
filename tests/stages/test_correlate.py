"""Static findings x dynamic breaks."""

from __future__ import annotations

from graphmend.correlate import compatible, correlate
from graphmend.core.model import Break, Finding, Report, TargetResult
from rewrites.rules import category_of


def _finding(rule, line, file="/w/m.py"):
    return Finding(rule=rule, file=file, line=line, col=1, message="", function="M.forward",
                   category=category_of(rule))


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


def test_an_unexplained_break_keeps_its_rule_and_its_issue_names_the_finding_that_explains_it():
    """A break's rule is decided once, at capture: a GM9xx break a static finding explains is
    not re-labelled; its issue names the finding's rule (and no GM9xx code beside it)."""
    from graphmend.correlate import diagnose

    findings = [_finding("GM201", 30), _finding("GM301", 60), _finding("GM101", 60)]
    breaks = [Break(rule="GM900", category="unexplained", reason="odd", file="/w/m.py", line=30),
              Break(rule="GM900", category="unexplained", reason="nothing static", file="/w/m.py", line=99),
              Break(rule="GM901", category="unexplained", reason="odder", file="/w/m.py", line=60)]
    report = Report(targets=[TargetResult(name="t", file="/w/m.py", function="t", breaks=breaks)], findings=findings)
    correlate(report)
    diagnose(report, read_sources=False)
    assert [b.rule for b in breaks] == ["GM900", "GM900", "GM901"]
    by_line = {i.line: i for i in report.issues}
    assert (by_line[30].rule, by_line[30].category, by_line[30].status, by_line[30].also) == \
        ("GM201", "side-effect", "confirmed", [])
    assert by_line[60].rule == "GM101" and by_line[60].also == ["GM301"]  # GM1 names it before GM3
    assert by_line[99].rule == "GM900" and by_line[99].status == "dynamic"


def test_incompatible_family_stays_potential():
    finding = _finding("GM201", 10)
    report = Report(targets=[TargetResult(name="t", file="/w/m.py", function="t", breaks=[
        Break(rule="GM301", category="host-scalar", reason="item", file="/w/m.py", line=10)])], findings=[finding])
    correlate(report)
    assert finding.status == "potential"
    assert compatible("GM101", "GM301") and compatible("GM401", "GM101") and not compatible("GM601", "GM101")


# -- issues: one per cause and place (diagnose) -------------------------------------------

def _brk(rule, line, occurrences=1, kind="graph_break", file="/w/m.py", **kw):
    return Break(rule=rule, category=category_of(rule), reason=f"{rule} reason", file=file, line=line,
                 occurrences=occurrences, kind=kind, counted=kind == "graph_break", **kw)


def test_a_report_without_issues_gets_them_before_rendering_as_a_copy():
    """A report saved before schema 1.1 (or a check report) has findings and breaks but no
    issues: the commands merge them before rendering (renderers compute nothing), reading no
    file, and leave the caller's report as it was."""
    from graphmend.correlate import with_issues

    old = Report(targets=[TargetResult(name="a.py::t", file="/w/a.py", function="t", breaks=[_brk("GM201", 20)])],
                 findings=[_finding("GM201", 20), _finding("GM101", 30)])
    merged = with_issues(old)
    assert old.issues == [] and [(i.rule, i.line) for i in merged.issues] == [("GM201", 20), ("GM101", 30)]
    assert with_issues(merged) is merged and with_issues(Report()).issues == []


def test_a_finding_and_its_breaks_are_one_issue_with_their_fan_out():
    from graphmend.correlate import diagnose
    from graphmend.core.model import summarize

    findings = [_finding("GM201", 20), _finding("GM101", 30), _finding("GM301", 30), _finding("GM201", 40),
                _finding("GM301", 40)]
    a = TargetResult(name="a.py::t", file="/w/a.py", function="t",
                     breaks=[_brk("GM201", 20, occurrences=12), _brk("GM201", 20, kind="frame_skipped"),
                             _brk("GM301", 40)])
    b = TargetResult(name="b.py::t", file="/w/b.py", function="t", breaks=[_brk("GM201", 20, occurrences=3)])
    report = Report(targets=[a, b], findings=findings)
    correlate(report)
    diagnose(report, read_sources=False)
    by_line = {}
    for issue in report.issues:
        by_line.setdefault(issue.line, []).append(issue)
    (p,) = by_line[20]  # one print, hit per layer in two targets and seen once from a skipped caller
    assert (p.rule, p.status, p.fan_out, p.targets, p.findings) == ("GM201", "confirmed", 15, ["a.py::t", "b.py::t"], [0])
    assert p.said.reason == "GM201 reason" and p.breaks == [[0, 0], [0, 1], [1, 0]] and p.fix == "safe"
    (cond,) = by_line[30]  # `if x.item() > 0`: two patterns of one cause, no run hit it
    assert (cond.rule, cond.also, cond.status, cond.fan_out) == ("GM101", ["GM301"], "potential", 0)
    log, read = sorted(by_line[40], key=lambda i: i.rule)  # a log call and a host read: two causes on one line
    assert (log.rule, log.status, read.rule, read.status) == ("GM201", "potential", "GM301", "confirmed")
    s = summarize(report)
    assert (s.issues, s.issues_confirmed, s.issues_potential, s.fan_out, s.fixable) == (4, 2, 2, 16, 4)
    assert s.top[0] == report.issues.index(p)


def test_a_frame_skip_names_the_skipped_frame_its_loop_and_what_it_hides(tmp_path):
    from graphmend.correlate import diagnose
    from graphmend.core.model import Frame

    src = tmp_path / "model.py"
    src.write_text(
        "class Block:\n"                         # 1
        "    def forward(self, x):\n"            # 2
        "        print(x)\n"                     # 3
        "        return x\n"                     # 4
        "\n"                                     # 5
        "class Model:\n"                         # 6
        "    @staticmethod\n"                    # 7
        "    def helper(x):\n"                   # 8
        "        return x\n"                     # 9
        "\n"                                     # 10
        "    def forward(self, x):\n"            # 11
        "        x = x + 1\n"                    # 12
        "        for blk in self.blocks:\n"      # 13
        "            x = blk(x)\n"               # 14
        "        if x.sum() > 0:\n"              # 15
        "            x = -x\n"                   # 16
        "        return x\n")                    # 17
    f = str(src)
    skip = _brk("GM201", 3, kind="frame_skipped", file=f,
                skipped_frame=Frame(file=f, line=11, function="forward"))
    traced = _brk("GM201", 3, file=f, stack=[Frame(f, 14, "forward"), Frame(f, 3, "forward")])
    findings = [_finding("GM201", 3, file=f), _finding("GM101", 15, file=f), _finding("GM101", 9, file=f)]
    report = Report(targets=[TargetResult(name="model.py::t", file=f, function="t", breaks=[skip, traced])],
                    findings=findings)
    correlate(report)
    diagnose(report)
    cause = next(i for i in report.issues if i.line == 3)
    (frame,) = cause.skipped
    assert (frame.function, frame.line, frame.loop_line, frame.targets) == ("Model.forward", 11, 13, ["model.py::t"])
    hidden = report.issues[frame.hides[0]]
    assert len(frame.hides) == 1 and hidden.line == 15 and hidden.status == "unreached"
    assert report.issues[hidden.hidden_by] is cause and findings[1].status == "unreached"
    other = next(i for i in report.issues if i.line == 9)  # another function: still only potential
    assert other.status == "potential" and other.hidden_by is None
    from reports.wording import skipped_sentence

    assert skipped_sentence(frame, str(tmp_path)) == "Model.forward ran entirely in eager (loop at model.py:13)"


def test_fix_kind_comes_from_the_fix_families():
    from rewrites.rules import get_rule

    def fix_kind(code):
        return get_rule(code).fix_kind

    assert fix_kind("GM101") == "safe" and fix_kind("GM201") == "safe" and fix_kind("GM604") == "safe"
    # GM501: the opaque in-graph op is safe; the dense dispatch beside it is --unsafe-fixes
    assert fix_kind("GM501") == "safe" and fix_kind("GM503") == "unsafe" and fix_kind("GM606") == "safe" and fix_kind("GM607") == "safe"
    assert fix_kind("GM601") is None and fix_kind("GM900") is None
