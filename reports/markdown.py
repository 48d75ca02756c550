"""Markdown for a pull-request comment: summary line, tables, breaks as ``path:line``, diffs.

GitHub-flavoured: pipes and newlines in cells are escaped, raw ``<``/``>``/``&`` in prose are
entity-escaped so a message can never inject HTML into the comment, and code spans and fences
are made longer than any backtick run inside them.
"""

from __future__ import annotations

import re

from graphmend.core.model import Report
from reports.wording import (UNSTABLE_NOTE, bench_setting, cost_text, recompile_text, replay_text, library_cause, location, mode_note, printable, rel, run_setting,
                           skipped_sentence, target_label)


def _esc(text: str) -> str:
    """Prose: entity-escape HTML and neutralise markdown emphasis/link characters."""
    text = printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]|#])", r"\\\1", text)


def _cell(text: str) -> str:
    return _esc(text).replace("\r\n", "\n").replace("\n", "<br>")


def _code(text: str) -> str:
    """An inline code span that survives backticks in ``text`` (pipes still escaped for tables)."""
    text = printable(text)
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|").replace("\n", " ")


def _fence(body: str, lang: str) -> list[str]:
    body = printable(body)
    runs = [len(m) for m in re.findall(r"`{3,}", body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [f"{fence}{lang}", body.rstrip("\n"), fence]


def _opt(value, fmt: str = "{}") -> str:
    return "" if value is None else fmt.format(value)


def render_markdown(r: Report) -> str:
    out: list[str] = []
    s = r.summary
    out.append(f"## graphmend: `mend {r.command}`")
    out.append("")
    if s is not None:
        parts = [f"**{s.targets}** target{'s' if s.targets != 1 else ''}"]
        if s.targets_failed:
            parts.append(f"**{s.targets_failed}** failed")
        if r.command == "check" and s.check_new is not None:  # mend check lists its verdict, not the findings: count that
            parts += [f"**{s.graphs}** graphs", f"**{s.check_new}** new", f"{s.check_known} known",
                      f"{s.check_stale} stale", f"{r.files_scanned} files scanned"]
        elif r.bench and not r.targets:  # mend bench: its tables, not captures it did not make
            parts = [f"**{s.bench_targets}** target{'s' if s.bench_targets != 1 else ''} benchmarked",
                     f"{s.bench_arms} arms run"]
            parts += [f"{n} {what}" for n, what in ((s.bench_unstable, "unstable"), (s.bench_failed, "failed")) if n]
        else:
            parts += [f"**{s.graphs}** graphs", f"**{s.breaks}** breaks, **{s.recompiles}** recompiles "
                      f"(explain counts {s.graph_breaks})",
                      f"**{s.issues}** issues ({s.issues_confirmed} confirmed, {s.issues_dynamic} dynamic only, "
                      f"{s.issues_potential} potential, {s.issues_unreached} never traced; {s.fan_out} break occurrences)",
                      f"**{s.frames_skipped}** skipped frames"]
            if s.fixable or s.fixable_unsafe:
                parts.append(f"**{s.fixable}** with a candidate fix" + (f" (+{s.fixable_unsafe} unsafe)" if s.fixable_unsafe else ""))
        if r.fixes:
            parts.append(f"fixes: **{s.fixes_verified}** verified, {s.fixes_partial} partially verified, "
                         f"{s.fixes_unverified} unverified, "
                         f"{s.fixes_rejected} rejected, " + (f"{s.fixes_regresses} slower, " if s.fixes_regresses else "")
                         + f"{s.fixes_advice} advice")
        if s.errors:
            parts.append(f"**{s.errors}** errors")
        out.append(", ".join(parts) + ".")
        out.append("")
    versions = [f"graphmend {r.graphmend_version or '?'}"]
    if r.torch_version:
        versions.append(f"torch {r.torch_version}")
    if r.python_version:
        versions.append(f"Python {r.python_version}")
    if r.platform:
        versions.append(r.platform)
    if r.targets or r.bench:
        versions.append(f"mode {run_setting(r)}")
    out.append(f"<sub>{_esc(' · '.join(versions))}</sub>")

    if s is not None and s.skipped_frames:
        out += ["", f"### Skipped frames ({s.skipped_frames}): they ran in eager", ""]
        for i in r.issues:
            for frame in i.skipped:
                out.append(f"- **{_esc(skipped_sentence(frame, r.root))}**, because of {i.rule} "
                           f"{_code(location(i.file, i.line, r.root))}: {_esc(i.message)}")
                for j in frame.hides:
                    h = r.issues[j]
                    out.append(f"  <br>hides {h.rule} {_code(location(h.file, h.line, r.root))}: {_esc(h.message)} (never traced)")
    if r.next_steps:
        out += ["", "### Next steps", ""]
        for step in r.next_steps:
            head, *rest = step.split("\n")
            out.append(f"- {_esc(head)}")
            if rest:
                out += [""] + ["  " + x if x else "" for x in _fence("\n".join(rest), "python")] + [""]

    if r.targets:
        out += ["", "### Targets", "", "| target | graphs | breaks | recompiles | skipped frames | explain's count | time (s) | error |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for t in r.targets:
            out.append(f"| {_code(target_label(t.name, t.run_mode))} | {t.graph_count} | {len(t.breaks)} | {len(t.recompiles)} | "
                       f"{t.frames_skipped} | {t.graph_break_count} | {t.duration_s:.2f} | {_cell(t.error or '')} |")
        out += ["", "*breaks*: distinct graph breaks; *recompiles*: guard failures, not breaks; *explain's count*: "
                "`torch._dynamo.explain`'s graph_break_count (graphs - 1, recompiles included)."]
        recompiles = [f"- {_cell(target_label(t.name, t.run_mode))}: {_cell(text)}" for t in r.targets
                      for text in [recompile_text(rc, r.root) for rc in t.recompiles] + [replay_text(t)] if text]
        if recompiles:
            out += ["", "#### Recompiles", ""] + recompiles

    if s is not None and s.issues:
        out += ["", "### Issues", ""]
        for rule, count in s.issue_rules.items():
            group = [i for i in r.issues if i.rule == rule]
            if not group:  # a summary out of step with the report: show what is there
                continue
            out.append(f"#### {rule} {_esc(group[0].category)} ({count})")
            out.append("")
            for i in group:
                line = f"- {_code(location(i.file, i.line, r.root))}"
                if i.function:
                    line += f" in {_code(i.function)}"
                if i.fan_out > 1:
                    line += f" ×{i.fan_out}"
                line += f" **{i.status}**"
                if i.also:
                    line += f" (also {', '.join(i.also)})"
                if mode_note(i):
                    line += f" *({_esc(mode_note(i))})*"
                line += f" — {_esc(i.message)}"
                out.append(line)
                if i.source_line:
                    out.append(f"  <br>{_code(i.source_line.strip())}")
                for frame in i.skipped:
                    out.append(f"  <br>**Made Dynamo skip a frame:** {_esc(skipped_sentence(frame, r.root))}")
                if i.hidden_by is not None and i.hidden_by < len(r.issues):
                    cause = r.issues[i.hidden_by]
                    out.append(f"  <br>Never traced: its frame ran in eager because of {cause.rule} "
                               f"{_code(location(cause.file, cause.line, r.root))}")
                said = i.said
                if said.reason:
                    ids = ", ".join(x for x in (said.registry_id,) if x)
                    out.append(f"  <br>{i.said_by}: {_esc(said.reason)}"
                               + (f" ({ids})" if ids and not i.recompiles else "")
                               + ("" if i.counted or i.lowering or i.recompiles else " *(not counted by explain)*"))
                cause = library_cause(said.library, r.root)
                if cause:
                    out.append(f"  <br>Broke in library code it calls: {_esc(cause)}")
                if said.explanation:
                    out.append(f"  <br>{_esc(said.explanation)}")
                for hint in said.hints:
                    out.append(f"  <br>Hint: {_esc(hint)}")
                if i.fix_hint:
                    out.append(f"  <br>Fix: {_code(i.fix_hint)}" + (" (`mend fix`)" if i.fix == "safe" else
                                                                    " (`mend fix --unsafe-fixes`)" if i.fix == "unsafe" else ""))
                if i.fix_why:
                    out.append(f"  <br>No rewrite here: {_esc(i.fix_why)}")
                if i.targets:
                    out.append(f"  <br>Targets: {', '.join(_code(x) for x in i.targets)}")
            out.append("")

    if r.fixes:
        out += ["### Fixes", ""]
        for f in r.fixes:
            line = f"- **{f.status}** {f.rule} {_code(location(f.file, f.line, r.root))}"
            if f.function:
                line += f" in {_code(f.function)}"
            if f.reason:
                line += f" — {_esc(f.reason)}"
            if f.checks:
                line += f" (checked: {_esc(', '.join(f.checks))})"
            if f.partial:  # a partial proof names what it lacks (its skipped checks among them)
                line += f" (proof lacks: {_esc('; '.join(f.partial))})"
            elif f.skipped_checks:
                line += f" (not checked: {_esc('; '.join(f.skipped_checks))})"
            out.append(line)
            if f.diff:
                out += [""] + ["  " + x if x else "" for x in _fence(f.diff, "diff")] + [""]
            if f.advice:
                out += [""] + ["  " + x if x else "" for x in _fence(f.advice, "python")] + [""]
        out.append("")
    if r.fix_targets:
        costs = any(t.costs for t in r.fix_targets)
        out += ["| target | breaks before | after | outputs equal | remaining | never exercised |"
                + (" cost (compiled, mended against original) |" if costs else ""),
                "| --- | ---: | ---: | --- | --- | --- |" + (" --- |" if costs else "")]
        for t in r.fix_targets:
            equal = "" if t.outputs_equal is None else ("yes" if t.outputs_equal else "**NO**")
            out.append(f"| {_code(t.name)} | {t.breaks_before} | {t.breaks_after} | {equal} | "
                       f"{_cell(chr(10).join(t.remaining))} | {_cell(chr(10).join(t.unexercised_branches))} |"
                       + (f" {_cell(chr(10).join(cost_text(c) for c in t.costs))} |" if costs else ""))
        out.append("")

    if r.bench:
        out += ["### Benchmark", "", "| target | arm | device | mode | cold (s) | median (ms) | IQR (ms) | graphs | "
                "breaks | kernels | backend | outputs | error |",
                "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"]
        for b in r.bench:
            match = "skipped" if b.skipped else "" if b.outputs_match is None else \
                ("match" if b.outputs_match else "**differ**" + (f": {_esc(b.mismatch)}" if b.mismatch else ""))
            out.append(f"| {_code(b.target)} | {b.arm} | {b.device} | {_esc(bench_setting(b).partition('/')[2])} | {_opt(b.cold_s, '{:.3f}')} | "
                       f"{_opt(b.median_ms, '{:.3f}')}{' **unstable**' if b.unstable else ''} | {_opt(b.iqr_ms, '{:.3f}')} | {_opt(b.graph_count)} | "
                       f"{_opt(b.break_count)} | {_opt(b.kernel_count)} | {_esc(b.backend or '')} | {match} | "
                       f"{_cell(b.error or '')} |")
        out.append("")
        if any(b.unstable for b in r.bench):
            out += [f"_{_esc(UNSTABLE_NOTE)}_", ""]
    if r.ratios:
        out += ["| target | ratio (median time) | value | mode | device |", "| --- | --- | ---: | --- | --- |"]
        for x in r.ratios:
            out.append(f"| {_code(x.target)} | {x.name} | {_opt(x.value, '{:.3f}×') or 'n/a'}{' **unstable**' if x.unstable else ''}{' **slower**' if x.slower else ''} | {x.mode} | {x.device} |")
        out.append("")

    if r.check is not None:
        c = r.check
        out += [f"### Check against {_code(c.baseline)}", "",
                f"**{len(c.new)}** new, {len(c.stale)} stale, {c.known} known"
                + (" (baseline updated)." if c.updated else "."), ""]
        for failed in c.failed_targets:
            out.append(f"- **failed target** {_esc(failed)}")
        for e in c.new:
            out.append(f"- **new** ({e.origin}{' ' + e.run_mode if e.run_mode not in (None, 'eval') else ''}) {e.rule} {_code(location(e.file, e.line, r.root))} in {_code(e.function)}: "
                       f"{_esc(e.message)} {_code(e.source_line or e.source)}" + (f" — fix: {_code(e.fix_hint)}" if e.fix_hint else ""))
        for e in c.stale:
            out.append(f"- stale {e.rule} {_code(rel(e.file, r.root))} in {_code(e.function)}: {_code(e.source)}")
        out.append("")

    if r.errors:
        out += ["### Errors", ""]
        for e in r.errors:
            out.append(f"- {_code(rel(e.file, r.root))}" + (f" ({_code(e.target)})" if e.target else "")
                       + f": {_esc(e.message)}")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
