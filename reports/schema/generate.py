"""Regenerates report.schema.json from the data model: ``python -m reports.schema.generate``.

Run it after adding a field to graphmend/core/model.py (tests/reports/test_reports_schema.py says when);
descriptions live here. Fields with a default are optional, so older reports of this major version validate.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path

from graphmend.core.model import SCHEMA_VERSION, Report

DESC = {
 "Report": "Everything one mend command produced.",
 "Report.schema_version": "Version of this JSON form; a new major version is incompatible.",
 "Report.command": "The mend command that produced the report (analyze, fix, bench, check, run).",
 "Report.root": "The repository root (the git top level above the analysed folder, else the pyproject.toml's "
                "folder, else the analysed folder); every format shows file paths under it relative to it.",
 "Report.summary": "Totals over the report, so that renderers never count.",
 "Report.files_scanned": "Python files the static scan read.",
 "TargetResult": "The dynamic capture of one target.",
 "TargetResult.lowering": "mend analyze --lower: each graph Dynamo captured that Inductor could not compile for the "
                          "CPU (null: not checked).",
 "LoweringFailure": "A captured graph Inductor could not compile: the op it failed on, the user's line that called "
                    "it, the exception's first line.",
 "BenchRow.lowering": "A compiled arm Inductor could not build (GM608): the op, the user's line, the reason; "
                      "`error` says it in one line.",
 "Issue.op": "A lowering failure (GM608): the op Inductor failed on, where known.",
 "Issue.lowering": "[target index, failure index] pairs into TargetResult.lowering: the lowering failures merged here.",
 "TargetResult.name": "<path relative to the analysed root>::<function>.",
 "TargetResult.graph_count": "Graphs, as torch._dynamo.explain counts them.",
 "TargetResult.graph_break_count": "Graph breaks, as torch._dynamo.explain counts them (graphs - 1: every "
                                    "recompile's graphs included); the distinct breaks are `breaks`, the recompiles "
                                    "`recompiles`.",
 "TargetResult.recompiles": "Each time Dynamo compiled a function again because a guard failed: not graph breaks.",
 "TargetResult.frames_skipped": "Frames Dynamo skipped (a break inside a loop skips the whole frame).",
 "TargetResult.error": "Null, or why the target could not be captured.",
 "TargetResult.breaks": "Every distinct break Dynamo's log shows, counted by explain or not.",
 "TargetResult.breaks_before": "mend fix only: distinct break sites before the fixes (as its fix_targets entry).",
 "TargetResult.breaks_after": "mend fix only: distinct break sites re-traced with every verified fix applied.",
 "TargetResult.outputs_equal": "mend fix only: original and patched outputs matched on every input tried.",
 "TargetResult.unexercised_branches": "mend fix only: rewritten branches no input took both ways.",
 "Break": "One distinct graph break at its innermost user frame.",
 "Break.rule": "GMxxx rule code; GM9xx when no rule explains the break.",
 "Break.reason": "Dynamo's first line.",
 "Break.gb_type": "Dynamo's graph-break type, where the installed torch has one.",
 "Break.registry_id": "Id in torch's graph-break registry (GB0xxx).",
 "Break.col": "0-based column of the offending expression.",
 "Break.end_col": "0-based exclusive end column of the offending expression on `line`.",
 "Break.stack": "User frames, innermost last.",
 "Break.counted": "False for breaks explain does not count (frame skipped, break at a resume start).",
 "Break.kind": "graph_break or frame_skipped.",
 "Finding": "A static finding: a break pattern in the source.",
 "Finding.status": "confirmed (a dynamic break hit the same place), potential, or unreached (inside a frame Dynamo skipped).",
 "Break.skipped_frame": "frame_skipped only: the frame Dynamo gave up on, as its message names it (code name, first line).",
 "Issue": "One cause at one place: a static finding and the dynamic breaks it explains, merged; every format lists it once.",
 "Issue.status": "confirmed (static and dynamic), dynamic (no static rule), potential (static, no target hit it) or unreached (static, in a frame Dynamo skipped).",
 "Issue.also": "Other rule codes merged into this issue.",
 "Issue.said": "What the compiler said of this issue, whole: the record of the break it quotes (Dynamo's words, stack, "
               "library frames), the failed guard of a recompile, or Inductor's reason for a lowering failure.",
 "Said": "What the compiler said, as it said it (for a recompile or a lowering failure `reason` alone).",
 "Said.reason": "Dynamo's first line; a recompile's failed guard; Inductor's reason for a lowering failure.",
 "Said.gb_type": "Dynamo's graph-break type, where the installed torch has one.",
 "Said.registry_id": "Id in torch's graph-break registry (GB0xxx).",
 "Said.stack": "User frames, innermost last.",
 "Said.library": "The library code below the innermost user frame the break happened in, outermost first.",
 "Issue.fan_out": "Dynamic occurrences of this one cause over every target, mode, layer and recompile.",
 "Issue.skipped": "Frames Dynamo skipped because of this break (it sits in one of their loops).",
 "Issue.hidden_by": "unreached only: index into Report.issues of the break whose frame skip kept Dynamo from this line.",
 "Issue.fix": "safe: mend fix has a rewrite for the rule; unsafe: only with --unsafe-fixes; null: advice only.",
 "Issue.findings": "Indexes into Report.findings.",
 "Issue.breaks": "[target index, break index] pairs into Report.targets[].breaks.",
 "SkippedFrame": "A frame Dynamo skipped (a break in one of its loops): it ran in eager.",
 "SkippedFrame.line": "The code's first line (its first decorator's).",
 "SkippedFrame.loop_line": "The loop whose body broke, where the source says.",
 "SkippedFrame.resume_line": "A resume function: it ran in eager from this line on.",
 "SkippedFrame.hides": "Indexes into Report.issues of the findings in this frame Dynamo never reached.",
 "Report.issues": "Findings and breaks merged, one per cause and place.",
 "Report.next_steps": "What to run next, in words (the dynamic half, the fix command).",
 "Summary.issue_rules": "Rule code -> issues.",
 "Summary.top": "Indexes into Report.issues, costliest first.",
 "Finding.col": "0-based column.",
 "Finding.end_col": "0-based exclusive end column.",
 "Fix": "One proposed source rewrite and its verdict.",
 "Fix.status": "verified, unverified, rejected, regresses (verified but measured slower by mend fix --bench) or advice.",
 "Fix.diff": "Unified diff of the rewrite.",
 "Fix.import_root": "For out-of-tree fixes: the sys.path entry the module came from.",
 "FixTarget": "A target re-traced with every verified fix applied.",
 "BenchRow": "One arm of one benchmarked target.",
 "BenchRow.arm": "eager, original, mended or reference.",
 "BenchRow.cold_s": "First call, compile included, in seconds.",
 "BenchRow.median_ms": "Median steady-state time per call in milliseconds.",
 "BenchRow.iqr_ms": "Inter-quartile range of the steady-state times in milliseconds.",
 "BenchRatio": "A ratio of median times within one run.",
 "BenchRatio.slower": "mended/original only: the mended arm is slower than the original beyond noise (a regression).",
 "FixTarget.fixes": "file:line of each rewrite the target's passing set applied (a fixes[] entry's file and line): "
                    "that record's status says whether what the target lost is a verified fix's doing.",
 "FixTarget.costs": "mend fix --bench only: the cost gate's check of the target in each torch.compile mode timed.",
 "CostCheck": "The cost gate: one target compiled as it is and with its verified fixes, timed in the same run.",
 "CostCheck.verdict": "slower (beyond the IQRs and 5 %), fails (the mended arm failed where the original ran), not slower, or untold (an arm failed for another reason, or stayed unstable).",
 "CostCheck.ratio": "Mended median over original median.",
 "Summary.fixes_regresses": "Fixes verified but measured slower by mend fix --bench.",
 "BenchRatio.name": "original/eager, mended/original or mended/reference.",
 "CheckResult": "The comparison of breaks with the baseline (mend check).",
 "CheckEntry": "A break keyed the way the baseline keys it.",
 "CheckEntry.source": "The whitespace-normalised source line.",
 "Fix.checks": "mend fix: what verification proved for a verified fix (eval, train+grad, autocast, train+grad autocast, train+grad float64, bf16, inputs, exceptions, arms, retrace).",
 "Fix.skipped_checks": "mend fix: checks that could not run for a verified fix, each 'check: why' (train+grad here: verified eval only).",
 "Fix.replacements": "mend fix: the rewrite as edits of the original file, each replacing the text from (line, col) to (end_line, end_col) with text; the SARIF log's fixes.",
 "Replacement": "One edit of a fix: lines 1-based, columns 0-based, the end exclusive, line endings the file's own; a pure insertion has end == start.",
 "Issue.fixes": "Indexes into Report.fixes: the fixes proposed for this issue's site (mend fix).",
 "Fix.partial": "mend fix, partially verified only: what the proof lacks, each 'check: why' for a skipped check that could have shown a difference, or 'caveat: ...' for the fix family's documented caveat; written only with --accept-partial (a caveat: --unsafe-fixes).",
 "Summary.fixes_partial": "Fixes that passed every check that ran on a partial proof (Fix.partial); not written by a plain --write.",
 "FileError": "A file or target that could not be processed; the run went on without it.",
 "Summary": "Totals over one report.",
 "Summary.break_rules": "Rule code -> distinct dynamic breaks.",
 "Summary.finding_rules": "Rule code -> static findings.",
 "Summary.check_new": "mend check only: breaks not in the baseline (static and dynamic entries).",
 "Summary.check_known": "mend check only: breaks the baseline knows.",
 "Summary.check_stale": "mend check only: baseline entries no longer found (fixed breaks).",
 "Frame": "One user frame of a break's stack.",
 "Recompile": "One recompilation Dynamo recorded.",
 "Recompile.reason": "The guard that failed, in Dynamo's words.",
 "Recompile.guard_line": "The user line whose value the failed guard checks, where Dynamo's record names it.",
 "Recompile.call": "The target's call that recompiled: 1 the first; mend analyze --calls makes more.",
 "Recompile.rule": "Its cause, a GM7xx rule code; empty when it has none (expected, or a report from before causes were told).",
 "Recompile.expected": "The first size change of a dimension: automatic dynamic shapes made the size dynamic (no issue).",
 "Recompile.expression": "The expression whose value the failed guard holds, as the code spells it (self.step, x.shape[1]).",
 "Recompile.limit": "This recompile reached torch._dynamo.config.recompile_limit: the function runs in eager from then on.",
 "TargetResult.calls": "The calls the capture made (mend analyze --calls); the graph figures are the first call's.",
 "TargetResult.replay_recompile": "With more than one call: the calls run once more under "
                                  "torch.compiler.set_stance('fail_on_recompile'); empty when none recompiled (the "
                                  "compiled program settled), else the recompile refused (function, line, guard); "
                                  "null when not told.",
 "Break.call": "The target's call that first hit the break: above 1, only a later call of other sizes did.",
 "Issue.recompiles": "A recompile issue (GM7xx): [target index, recompile index] pairs; fan_out counts them.",
 "SkippedFrame.limit": "The frame runs in eager because it reached the recompile limit (GM706), not because of a break.",
}
ENUMS = {"Finding.status": ["confirmed", "potential", "unreached"],
         "Issue.status": ["confirmed", "dynamic", "potential", "unreached"], "Fix.status": ["verified", "partially verified", "unverified", "rejected", "regresses", "advice"],
         "Break.kind": ["graph_break", "frame_skipped"], "Break.category": None,
         "CostCheck.verdict": ["slower", "fails", "not slower", "untold"]}
defs: dict = {}


def sch(tp) -> dict:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        s = sch(args[0]); 
        return {"anyOf": [s, {"type": "null"}]} if "$ref" in s else {**s, "type": [s["type"], "null"]} if isinstance(s.get("type"), str) else s
    if origin is list:
        return {"type": "array", "items": sch(typing.get_args(tp)[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": sch(typing.get_args(tp)[1])}
    if dataclasses.is_dataclass(tp):
        add(tp); return {"$ref": f"#/$defs/{tp.__name__}"}
    return {str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"}, bool: {"type": "boolean"}}[tp]
def add(cls) -> None:
    if cls.__name__ in defs: return
    defs[cls.__name__] = None
    hints = typing.get_type_hints(cls)
    props = {}; req = []
    for f in dataclasses.fields(cls):
        s = dict(sch(hints[f.name]))
        k = f"{cls.__name__}.{f.name}"
        if k in DESC: s["description"] = DESC[k]
        if ENUMS.get(k): s["enum"] = ENUMS[k]
        props[f.name] = s
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            req.append(f.name)
    defs[cls.__name__] = {"type": "object", "description": DESC.get(cls.__name__, cls.__doc__ or ""), "properties": props,
                          "required": req, "additionalProperties": False}


def schema() -> dict:
    defs.clear()
    add(Report)
    root = defs.pop("Report")
    major = SCHEMA_VERSION.split(".")[0]
    root["properties"]["schema_version"]["pattern"] = rf"^{major}\.[0-9]+$"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://graphmend.dev/schema/report-{major}.json",
            "title": "graphmend report", **root, "$defs": dict(sorted(defs.items()))}


PATH = Path(__file__).with_name("report.schema.json")

if __name__ == "__main__":
    PATH.write_text(json.dumps(schema(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {PATH}")
