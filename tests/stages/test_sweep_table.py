"""The population table (``mend sweep LIBRARY --fix``): how mend fix's per-target results are
counted per library and modality (verified fixes apart from partially verified ones and from
ones mend fix would not write), the renderers, ``--every``, and one real run over a test
library of three tiny models (tests/fixtures/sweep/fake_lib.py), whose table must agree with
its rows and with ``mend fix`` of the generated target."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app
from graphmend.core.model import PARTIAL, REJECTED, VERIFIED, Fix, FixTarget, TargetResult
from graphmend.core.tables import (FIX_ERROR, FIX_NONE, FIX_NOT_KEPT, FIX_PARTIAL, FIX_VERIFIED, SWEEP_BREAKS,
                                        SWEEP_CLEAN, SWEEP_NOT_BUILT, SweepReport, SweepRow)
from graphmend.sweep import stage
from graphmend.sweep.population import ALL, fix_rows, population

FAKE = ("tests.fixtures.sweep.fake_lib", "fake")


def _rows() -> list[SweepRow]:
    def row(model, modality, status, breaks=0):
        return SweepRow(model=model, run_mode="eval", status=status, breaks=breaks, graph_break_count=breaks,
                        library="lib", modality=modality)

    return [row("a", "text", SWEEP_BREAKS, 3), row("b", "text", SWEEP_BREAKS, 2), row("c", "vision", SWEEP_BREAKS, 4),
            row("d", "vision", SWEEP_BREAKS, 1), row("e", "vision", SWEEP_BREAKS, 2), row("f", "text", SWEEP_CLEAN),
            row("g", "audio", SWEEP_NOT_BUILT)]


def _fix_report():
    """a: both breaks its verified rewrites covered go (one stays); b: a verified and a partially
    verified rewrite, to zero; c: its passing rewrite was rejected for another target; d: fix
    errored; e: nothing removed."""
    files = {f"lib_{m}.py": m for m in "abcde"}
    targets = [TargetResult(name=f"/t/lib_{m}.py::mend_target_{m}", file=f"/t/lib_{m}.py", function=f"mend_target_{m}")
               for m in "abcde"]
    fts = [FixTarget(name=targets[0].name, breaks_before=3, breaks_after=1, fixes=["/m/a.py:3", "/m/a.py:9"]),
           FixTarget(name=targets[1].name, breaks_before=2, breaks_after=0, fixes=["/m/b.py:3", "/m/b.py:5"]),
           FixTarget(name=targets[2].name, breaks_before=4, breaks_after=2, fixes=["/m/c.py:7"]),
           FixTarget(name=targets[3].name, breaks_before=1, breaks_after=1, error="original run failed: boom\nmore"),
           FixTarget(name=targets[4].name, breaks_before=2, breaks_after=2)]
    fixes = [Fix(file="/m/a.py", line=3, rule="GM101", status=VERIFIED),
             Fix(file="/m/a.py", line=9, rule="GM301", status=VERIFIED),
             Fix(file="/m/b.py", line=3, rule="GM101", status=VERIFIED),
             Fix(file="/m/b.py", line=5, rule="GM101", status=PARTIAL),
             Fix(file="/m/c.py", line=7, rule="GM101", status=REJECTED,
                 reason="verification failed: lib_x.py::mend_target_x: timed out after 120 s")]
    return fts, targets, fixes, files


def test_fix_results_are_counted_per_modality_with_partial_and_unkept_apart():
    rows = _rows()
    fix_rows(rows, "eval", *_fix_report())
    by = {r.model: r for r in rows}
    assert [by[m].fix for m in "abcdef"] == [FIX_VERIFIED, FIX_PARTIAL, FIX_NOT_KEPT, FIX_ERROR, FIX_NONE, ""]
    assert (by["a"].breaks_removed, by["a"].breaks_after, by["b"].breaks_after) == (2, 1, 0)
    assert by["d"].fix_why == "original run failed: boom" and by["d"].breaks_after is None
    # what was not kept, and its own verdict (here another target's timeout)
    assert by["c"].fix_why == "c.py:7 GM101 rejected: verification failed: lib_x.py::mend_target_x: timed out after 120 s"
    table = {p.modality: p for p in population(rows, "lib")}
    assert list(table) == ["text", "vision", "audio", ALL]
    text, vision, total = table["text"], table["vision"], table[ALL]
    # text: a (verified, 2 of 3 gone), b (partial, to zero: not safe), f clean
    assert (text.enumerated, text.built, text.pairs, text.breaking, text.breaks) == (3, 3, 3, 2, 5)
    assert (text.removed, text.zeroed, text.removed_partial, text.zeroed_partial) == (2, 0, 2, 1)
    assert text.removed_pct == 40.0
    assert (vision.removed, vision.removed_not_kept, vision.fix_errors, vision.breaking) == (0, 2, 1, 3)
    assert (table["audio"].enumerated, table["audio"].built, table["audio"].pairs) == (1, 0, 0)
    # the total is the sum of the modalities, field by field
    for f in ("enumerated", "built", "pairs", "breaking", "breaks", "removed", "zeroed", "removed_partial",
              "zeroed_partial", "removed_not_kept", "fix_errors"):
        assert getattr(total, f) == sum(getattr(p, f) for m, p in table.items() if m != ALL), f


def test_recompiles_are_counted_per_row_and_pair_the_expected_first_size_change_apart():
    from graphmend.core.model import Recompile
    from reports.sweep import render_sweep

    expected = Recompile(function="forward", reason="size mismatch at index 0", expected=True)
    step = Recompile(function="forward", reason="self.step == 3", rule="GM701", guard_file="/m/a.py", guard_line=9)
    limit = Recompile(function="forward", reason="self.step == 4", rule="GM701", limit=True)
    # a guard on a tensor argument: placed at the function that takes it
    rank = Recompile(function="forward", reason="tensor 'mems' rank mismatch. expected 1, actual 3", rule="GM701",
                     file="/m/a.py", line=40)
    t = TargetResult(name="/t/lib_a.py::mend_target_a", file="/t/lib_a.py", function="mend_target_a", graph_count=1,
                     recompiles=[expected, step, limit, rank])
    clean = TargetResult(name="/t/lib_b.py::mend_target_b", file="/t/lib_b.py", function="mend_target_b",
                         graph_count=1, recompiles=[expected])
    a, b = stage._row(t, "a"), stage._row(clean, "b")
    assert (a.status, a.recompiles, a.recompiles_located, a.recompile_limit) == (SWEEP_CLEAN, 3, 2, True)
    assert (b.recompiles, b.recompile_limit) == (0, False)  # automatic dynamic shapes did what it is meant to
    for r in (a, b):
        r.library, r.modality = "lib", "text"
    total = population([a, b], "lib")[-1]
    assert (total.pairs, total.recompiling, total.recompiles, total.recompiles_located) == (2, 1, 3, 2)
    rep = SweepReport(library="lib", rows=[a, b], population=population([a, b], "lib"))
    text, md = render_sweep(rep, "text"), render_sweep(rep, "md")
    assert "lib text a [eval]: 3 (2 located; the recompile limit reached)" in text and "lib text b [eval]" not in text
    assert "| lib | text | a | eval | one graph | 1 | 0 | 0 | 0 | 3 (2 located; the recompile limit reached) |" in md


def test_renderers_show_the_population_table_and_each_rows_library_and_modality():
    from reports.sweep import render_sweep

    rows = _rows()
    fix_rows(rows, "eval", *_fix_report())
    rep = SweepReport(library="lib", rows=rows, population=population(rows, "lib"), fix_wall_s=12.0)
    text, md, html = (render_sweep(rep, f) for f in ("text", "md", "html"))
    total = rep.population[-1]
    want = ["lib", ALL, total.enumerated, total.built, total.pairs, total.breaking, total.breaks, total.graph_breaks,
            total.removed, total.removed_pct, total.zeroed, total.removed_partial, total.zeroed_partial,
            total.removed_not_kept, total.fix_errors, total.recompiling, total.recompiles, total.recompiles_located,
                total.recompiles_after_break, total.recompiles_removed]
    assert any(line.split() == [str(w) for w in want] for line in text.splitlines()), text
    assert "| " + " | ".join(map(str, want)) + " |" in md
    assert "<h2>Population</h2>" in html and f"<td>{ALL}</td>" in html
    assert "lib vision c [eval]: " in text and "fix not kept: 4 -> 2" in text
    assert "lib audio g [eval]: not built" in text
    assert "| lib | vision | c | eval | breaks |" in md and "| lib | audio | g | eval | not built |" in md
    assert "<td>vision</td><td><code>c</code></td>" in html
    back = SweepReport.from_json(render_sweep(rep, "json"))
    assert back.population == rep.population and back.rows[2].modality == "vision"


def test_a_planned_cause_that_keeps_breaks_carries_the_verdict_that_kept_its_rewrite_out():
    from graphmend.core.tables import SweepCause
    from reports.sweep import render_sweep

    def cause(source, site, fix="safe", breaks=2, removed=0):
        return SweepCause(rule="GM501", category="c", reason="r", source=source, sites=[site], models=["m"],
                          breaks=breaks, removed=removed, fix=fix)

    rep = SweepReport(library="lib", causes=[
        cause("i = (t == s).nonzero()", "lib/sched_a.py:282"),
        cause("j = (t == s).nonzero()", "lib/sched_b.py:10", removed=2),  # every break removed
        cause("k = x.item()", "lib/sched_c.py:5", fix="advice"),  # nothing planned
        cause("n = (t == s).nonzero()", "lib/sched_d.py:7")])  # planned, and its rewrite was verified
    fixes = [Fix(file="/site/lib/sched_a.py", line=282, rule="GM501", status=REJECTED,
                 reason="a new break appeared:\n GM101 at sched_a.py:608"),
             Fix(file="/site/otherlib/sched_a.py", line=282, rule="GM501", status=REJECTED, reason="another file"),
             Fix(file="/site/lib/sched_b.py", line=10, rule="GM501", status=REJECTED, reason="one target"),
             Fix(file="/site/lib/sched_c.py", line=5, rule="GM301", status=PARTIAL, reason="x"),
             Fix(file="/site/lib/sched_d.py", line=7, rule="GM501", status=VERIFIED)]
    stage.note_verdicts(rep, fixes)
    assert [c.verdict for c in rep.causes] == ["rejected: a new break appeared: GM101 at sched_a.py:608", "", "", ""]
    assert "mend fix, not kept: rejected: a new break appeared" in render_sweep(rep, "md")
    assert SweepReport.from_json(render_sweep(rep, "json")).causes[0].verdict == rep.causes[0].verdict


def test_a_sweep_report_of_schema_1_reads_as_it_is():
    """Schema 2.0 changed the analysis report's issues, not the sweep report: a 1.x sweep report
    (a CI job's baseline, a stored population) still reads; an unknown major version does not."""
    row = {"model": "bert", "run_mode": "eval", "status": SWEEP_CLEAN, "graph_count": 1}
    old = SweepReport.from_json(json.dumps({"library": "transformers", "schema_version": "1.1", "rows": [row]}))
    assert old.rows[0].model == "bert" and old.rows[0].status == SWEEP_CLEAN
    with pytest.raises(ValueError, match="unsupported schema_version '3.0'"):
        SweepReport.from_json(json.dumps({"library": "transformers", "schema_version": "3.0", "rows": [row]}))


def test_every_takes_a_fixed_sample_of_the_enumeration(monkeypatch):
    monkeypatch.setitem(stage.LIBRARIES, "fake", FAKE)
    p = stage.plan(stage.SweepOptions(library="fake", every=2))
    assert p.models == ["Gate", "Broken"] and "one in 2 (2)" in p.selection
    assert stage.plan(stage.SweepOptions(library="fake", every=2, limit=1)).models == ["Gate"]


def test_sweep_fix_table_agrees_with_its_rows_and_with_mend_fix(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    monkeypatch.setitem(stage.LIBRARIES, "fake", FAKE)
    got = CliRunner().invoke(app, ["sweep", "fake", "--fix", "-q", "-f", "json", "--targets-dir",
                                   str(tmp_path / "targets")])
    assert got.exit_code == 0, got.output
    rep = SweepReport.from_json(got.output)
    by = {r.model: r for r in rep.rows}
    assert {(m, r.library, r.modality) for m, r in by.items()} == {("Gate", "fake", "vision"), ("Plain", "fake", "text"),
                                                                    ("Broken", "fake", "text")}
    assert (by["Gate"].status, by["Plain"].status, by["Broken"].status) == (SWEEP_BREAKS, SWEEP_CLEAN, SWEEP_NOT_BUILT)
    assert by["Gate"].fix == FIX_VERIFIED and by["Plain"].fix == ""
    # mend fix of the breaking model's generated target gives the row's numbers
    fixed = CliRunner().invoke(app, ["fix", str(tmp_path / "targets" / "fake_Gate.py"), "-f", "json", "-q"])
    assert fixed.exit_code in (0, 1), fixed.output
    ft = json.loads(fixed.output)["fix_targets"]
    assert [(t["breaks_before"] - t["breaks_after"], t["breaks_after"]) for t in ft] == \
        [(by["Gate"].breaks_removed, by["Gate"].breaks_after)]
    table = {p.modality: p for p in rep.population}
    assert list(table) == ["vision", "text", ALL]
    verified = [r for r in rep.rows if r.fix == FIX_VERIFIED]
    total = table[ALL]
    assert total.removed == sum(r.breaks_removed for r in verified) > 0
    assert total.zeroed == sum(r.breaks_after == 0 for r in verified)
    assert total.breaks == sum(r.breaks for r in rep.rows if r.status == SWEEP_BREAKS)
    assert (total.enumerated, total.built, total.pairs, total.breaking) == (3, 2, 2, 1)
    assert table["text"].breaking == 0 and table["vision"].removed == total.removed
    # each root cause says how many of its breaks the verified fixes removed: together, the table's
    assert sum(c.removed for c in rep.causes) == total.removed and all(c.removed <= c.breaks for c in rep.causes)
    md = CliRunner().invoke(app, ["sweep", "fake", "--fix", "-q", "-f", "md"]).output
    assert "| # | rule | models | breaks | removed | fan-out |" in md


def test_results_page_adds_the_libraries_up_and_ranks_what_remains(tmp_path):
    import importlib.util
    from pathlib import Path

    from graphmend.core.tables import SweepCause

    spec = importlib.util.spec_from_file_location(
        "results_page", Path(__file__).resolve().parents[2] / "benchmarks" / "results_page.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)  # type: ignore[union-attr]
    rows = _rows()
    fix_rows(rows, "eval", *_fix_report())
    verified = next(r for r in rows if r.fix == FIX_VERIFIED)
    verified.recompiles, verified.recompiles_after_break, verified.recompiles_removed = 5, 4, 3
    one = SweepReport(library="lib", rows=rows, population=population(rows, "lib"),
                      causes=[SweepCause(rule="GM101", category="c", reason="r", source="if x.sum() > 0:",
                                         models=["a"], breaks=3, removed=3),
                              SweepCause(rule="GM301", category="c", reason="r", source="n = t.item()",
                                         models=["a", "b"], breaks=2, removed=0)])
    two = SweepReport(library="other", rows=rows, population=population(rows, "other"),
                      causes=[SweepCause(rule="GM502", category="c", reason="r", source="y = x[m]", models=["c"],
                                         breaks=5, removed=1)])
    (tmp_path / "one.json").write_text(one.to_json(), encoding="utf-8")
    (tmp_path / "two.json").write_text(two.to_json(), encoding="utf-8")
    assert page.main([str(tmp_path / "one.json"), str(tmp_path / "two.json"), "-o", str(tmp_path / "p.md")]) == 0
    text = (tmp_path / "p.md").read_text(encoding="utf-8")
    lib = one.population[-1]
    grand = page.total([one, two])
    assert (grand.breaks, grand.removed, grand.breaking) == (2 * lib.breaks, 2 * lib.removed, 2 * lib.breaking)
    assert f"**{grand.removed} of {grand.breaks} logged breaks" in text
    # both reports re-traced after mend fix: the recompiles after a break and those removed
    assert ("**Recompiles, on every library (the reports that tell a recompile's frame and re-trace after mend fix "
            "over the same calls): 8 of 10 are in a frame") in text and "; 6 of 10 (60.0 %) are removed" in text
    # what remains: the 4 breaks other's GM502 keeps before lib's GM301's 2; lib's GM101 keeps none
    ranked = [line for line in text.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert ranked[0].startswith("| 1 | other | GM502 | 1 | 5 | 1 | 4 | no rewrite is planned at the line |")
    assert "| 2 | lib | GM301 |" in ranked[1]
    assert "if x.sum() > 0:" not in text.split("## What remains")[1]
    (tmp_path / "bare.json").write_text(SweepReport(library="x").to_json(), encoding="utf-8")
    assert page.main([str(tmp_path / "bare.json")]) == 2  # no --fix: no population table
    # recompiles: ranked across libraries by the recompiles each cause makes
    from graphmend.core.tables import SweepRecompileCause

    one.recompile_causes = [SweepRecompileCause(rule="GM701", what="self.step += 1", reason="r", models=["a"],
                                                sites=["lib/a.py:9"], recompiles=2, located=2)]
    two.recompile_causes = [SweepRecompileCause(rule="GM704", what="", reason="tensor 'x' size mismatch",
                                                function="forward", models=["c", "d"], recompiles=5, located=5,
                                                limit=True)]
    section = "\n".join(page.population_section([one, two], ["one.json", "two.json"])).split("### Recompiles, ranked")[1]
    # --amend: a later run of lib's breaking model "a" (its fix kept this time) replaces a's rows
    import dataclasses

    redone = [dataclasses.replace(r, fix=FIX_VERIFIED, breaks_after=0, breaks_removed=3) for r in rows if r.model == "a"]
    later = SweepReport(library="lib", rows=redone, causes=[SweepCause(rule="GM101", category="c", reason="r",
                                                                       source="if x.sum() > 0:", models=["a"],
                                                                       breaks=3, removed=3)],
                        command="mend sweep lib --only a --fix --timeout 900")
    (tmp_path / "later.json").write_text(later.to_json(), encoding="utf-8")
    assert page.main([str(tmp_path / "one.json"), "--amend", str(tmp_path / "later.json"),
                      "-o", str(tmp_path / "amended.md")]) == 2  # one's GM301 hit "b", which the later run lacks
    one.causes = [one.causes[0]]
    one.causes[0].models = ["a"]
    (tmp_path / "one.json").write_text(one.to_json(), encoding="utf-8")
    assert page.main([str(tmp_path / "one.json"), "--amend", str(tmp_path / "later.json"),
                      "-o", str(tmp_path / "amended.md")]) == 0
    amended = page.amend(one, later)
    assert [r.model for r in amended.rows] == [r.model for r in one.rows] and amended.causes == later.causes
    before = {r.model: r for r in one.rows}["a"]
    assert amended.population[-1].removed == one.population[-1].removed + 3 - (
        before.breaks_removed if before.fix == FIX_VERIFIED else 0)
    assert "mend sweep lib --only a --fix --timeout 900" in (tmp_path / "amended.md").read_text(encoding="utf-8")
    # two later runs of some models each count as one: rows joined, a cause both saw merged, indexes followed
    halves = [dataclasses.replace(later, rows=[dataclasses.replace(r, causes=[0]) for r in redone[:1]]),
              dataclasses.replace(later, rows=[dataclasses.replace(r, model="z", causes=[1]) for r in redone[:1]],
                                  causes=[SweepCause(rule="GM301", category="c", reason="r", source="n = t.item()",
                                                     models=["z"], breaks=1, removed=0, fix="advice"),
                                          SweepCause(rule="GM101", category="c", reason="r", source="if x.sum() > 0:",
                                                     models=["z"], sites=["lib/z.py:3"], breaks=2, removed=1,
                                                     fix="safe")],
                                  command="mend sweep lib --only z --fix")]
    both = page.combine(halves)
    assert [r.model for r in both.rows] == ["a", "z"] and [r.causes for r in both.rows] == [[0], [0]]
    merged, item = both.causes
    assert (merged.models, merged.sites, merged.breaks, merged.removed, merged.fix) == (
        ["a", "z"], ["lib/z.py:3"], 5, 4, "safe")
    assert item.source == "n = t.item()" and both.command.endswith("; mend sweep lib --only z --fix")
    (tmp_path / "z.json").write_text(halves[1].to_json(), encoding="utf-8")
    assert page.main([str(tmp_path / "one.json"), "--amend", str(tmp_path / "later.json"), "--amend",
                      str(tmp_path / "z.json"), "-o", str(tmp_path / "amended2.md")]) == 0
    # a whole report made before recompile causes takes the later run's, and the page says in part
    one.recompile_causes = []
    later.recompile_causes = [SweepRecompileCause(rule="GM701", what="self.step += 1", reason="r", models=["a"],
                                                  recompiles=1, located=1)]
    amended = page.amend(one, later)
    amended.population[-1].recompiles = 3
    assert amended.recompile_causes == later.recompile_causes
    assert "Broken down in part (a later run of some of its models holds the breakdown): lib (1 of its 3)." in \
        "\n".join(page.recompiles([amended]))
    assert section.index("| 1 | other | GM704 | 2 | 5 | 5 | 0 | yes | tensor 'x' size mismatch (in forward) |") < \
        section.index("| 2 | lib | GM701 | 1 | 2 | 2 | 0 | no | `self.step += 1` | lib/a.py:9 |")


def test_recompile_causes_merge_one_guarded_line_over_models_most_recompiles_first():
    """Each GM7xx cause once over the sweep (the guarded line's copies and the models that hit
    it), with its recompiles, how many are located and whether the limit was reached; every
    format shows them and JSON keeps them."""
    from graphmend.core.model import Recompile, Report
    from graphmend.core.tables import SweepReport
    from graphmend.correlate import diagnose
    from reports.sweep import render_sweep

    def step(n, file="/site/lib/a.py", limit=False):
        return Recompile(function="forward", reason=f"self.step == {n}", file=file, line=5, rule="GM701",
                         guard_file=file, guard_line=9, guard_source="self.step += 1", limit=limit,
                         expression="self.step")

    size = Recompile(function="forward", reason="tensor 'x' size mismatch at index 1. expected 4, actual 0",
                     file="/site/lib/b.py", line=20, rule="GM704", expression="x.shape[1]")
    targets = [TargetResult(name=f"/t/lib_{m}.py::mend_target_{m}", file=f"/t/lib_{m}.py",
                            function=f"mend_target_{m}", graph_count=1, recompiles=rcs)
               for m, rcs in (("a", [step(2), step(3, limit=True)]), ("b", [step(2, "/site/lib/b.py"), size]))]
    report = Report(targets=targets)
    diagnose(report, read_sources=False)
    out = SweepReport(library="lib")
    stage.aggregate(out, report, {t.name: t.name.split("lib_")[1][0] for t in targets}, ["a", "b"])
    first, second = out.recompile_causes
    assert (first.rule, first.what, first.models, first.recompiles, first.limit) == \
        ("GM701", "self.step += 1", ["a", "b"], 3, True)
    assert first.sites == ["/site/lib/a.py:9", "/site/lib/b.py:9"] and first.located == 3
    assert (second.rule, second.what, second.models, second.recompiles, second.limit) == \
        ("GM704", "x.shape[1]", ["b"], 1, False)
    text, md, html = (render_sweep(out, f) for f in ("text", "md", "html"))
    assert "  1. GM701 2 models, 3 recompiles (3 located), recompile limit reached" in text
    assert "| 1 | GM701 | 2 | 3 | 3 | yes | `self.step += 1` |" in md
    assert "<h2>Recompile causes</h2>" in html and "<code>x.shape[1]</code>" in html
    assert SweepReport.from_json(render_sweep(out, "json")).recompile_causes == out.recompile_causes


def test_sweep_fullgraph_marks_the_report_and_a_break_is_the_first_one_raised(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setitem(stage.LIBRARIES, "fake", FAKE)
    got = CliRunner().invoke(app, ["sweep", "fake", "--fullgraph", "--calls", "1", "-q", "-f", "json"])
    assert got.exit_code == 0, got.output  # without --baseline, breaks are the report, not a failure
    rep = SweepReport.from_json(got.output)
    by = {r.model: r for r in rep.rows}
    assert rep.fullgraph and by["Gate"].status == SWEEP_BREAKS and by["Plain"].status == SWEEP_CLEAN
    assert (by["Gate"].graph_count, by["Gate"].graph_break_count) == (0, 1)
    assert len(by["Gate"].where) == 1 and by["Gate"].where[0].endswith("fake_lib.py:28")
    from reports.sweep import render_sweep

    assert "compiled with fullgraph=True" in render_sweep(rep, "text")
