"""reports.diagnostics: the lines mend fix and mend check write on stderr, as plain text the
commands print (renderers in reports/, the commands only write)."""

from __future__ import annotations

import os

from graphmend.core.model import (ADVICE, REJECTED, VERIFIED, CheckEntry, CheckResult, FileError, Fix, FixTarget,
                                  Report)
from reports.diagnostics import check_summary, fix_listing


def test_fix_listing_names_what_got_no_automatic_fix_and_each_target():
    here = os.path.abspath("m.py")
    report = Report(command="fix", fixes=[
        Fix(file=here, line=3, rule="GM101", status=VERIFIED, reason="torch.where"),  # nothing to say
        Fix(file=here, line=5, rule="GM201", status=VERIFIED, reason="deferred", checks=["eval"],
            skipped_checks=["train+grad: no parameters"]),
        Fix(file=here, line=9, rule="GM301", status=REJECTED, reason="behaviour changed"),
        Fix(file="/site/pkg/mod.py", line=2, rule="GM601", status=ADVICE, reason="no automatic fix",
            advice="copy it outside forward", import_root="/site")],
        fix_targets=[FixTarget(name="m.py::mend_target", breaks_before=3, breaks_after=1, outputs_equal=True,
                               graph_breaks_before=4, graph_breaks_after=1, unexercised_branches=["m.py:9 false"])],
        errors=[FileError(file="bad.py", message="syntax error")])
    assert fix_listing(report).splitlines() == [
        "m.py:5: GM201 [verified: eval; not checked: train+grad: no parameters] deferred",
        "m.py:9: GM301 [rejected] behaviour changed",
        "pkg/mod.py:2: GM601 [advice] no automatic fix",
        "    advice: copy it outside forward",
        "m.py::mend_target: breaks 3 -> 1 (Dynamo's graph_break_count 4 -> 1), outputs equal, "
        "unexercised: m.py:9 false",
        "mend: bad.py: syntax error"]
    assert fix_listing(Report(command="fix")) == ""


def test_check_summary_says_why_a_hook_failed():
    entry = CheckEntry(file="m.py", rule="GM201", function="f", source="print(x)", line=1)
    result = CheckResult(baseline=".mend-baseline.json", new=[entry], stale=[entry], known=2,
                         failed_targets=["target m.py::t failed: boom"])
    assert check_summary(result, errors=1) == [
        "mend check: 1 new, 2 known, 1 stale, 1 failed target(s), 1 file error(s) (checked against .mend-baseline.json)",
        "mend check: target m.py::t failed: boom",
        "mend check: stale baseline entries (fixed breaks); prune them with 'mend check --update-baseline'"]
    written = CheckResult(baseline="b.json", stale=[entry], updated=True)
    assert check_summary(written, errors=0) == ["mend check: 0 new, 0 known, 1 stale (baseline written b.json)"]


def test_fix_listing_says_what_a_partial_proof_lacks():
    from graphmend.core.model import PARTIAL, summarize

    here = os.path.abspath("m.py")
    report = Report(command="fix", fixes=[
        Fix(file=here, line=4, rule="GM101", status=PARTIAL, checks=["eval", "bf16"],
            reason="torch.where; partially verified: not written without --accept-partial",
            skipped_checks=["train+grad: the original is not deterministic in this mode"],
            partial=["train+grad: the original is not deterministic in this mode"]),
        Fix(file=here, line=7, rule="GM101", status=VERIFIED, reason="torch.where")])
    assert fix_listing(report).splitlines() == [
        "m.py:4: GM101 [partially verified: eval, bf16; lacks: train+grad: the original is not deterministic in "
        "this mode] torch.where; partially verified: not written without --accept-partial"]
    totals = summarize(report)
    assert (totals.fixes_verified, totals.fixes_partial) == (1, 1)
