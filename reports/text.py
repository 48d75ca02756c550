"""The rich terminal view: tables, breaks grouped by cause with a caret under the expression.

Colour only when asked (``render_or_fail`` asks on a TTY without ``NO_COLOR``); the plain
form is what the golden test pins. Every user-supplied string goes in as ``rich.text.Text``,
never as markup, so ``[brackets]`` in messages print as they are.
"""

from __future__ import annotations

import io
from typing import Optional

from graphmend.core.model import (ADVICE, CONFIRMED, DYNAMIC, PARTIAL, REGRESSES, REJECTED, SLOWER, UNREACHED, UNVERIFIED, VERIFIED,
                                  Issue, Report)
from reports.wording import (UNSTABLE_NOTE, bench_setting, break_counts, cost_text, recompile_text, replay_text, library_cause, location, mode_note, printable, rel, run_setting,
                           short_path, skipped_sentence, target_label)

WIDTH = 120
_STATUS_STYLE = {VERIFIED: "green", PARTIAL: "yellow", REJECTED: "red", REGRESSES: "red", UNVERIFIED: "red", ADVICE: "yellow", CONFIRMED: "red", DYNAMIC: "red",
                 "potential": "yellow", UNREACHED: "yellow"}


def _opt(value, fmt: str = "{}") -> str:
    return "" if value is None else fmt.format(value)


def caret(source_line: str, col: Optional[int], end_col: Optional[int]) -> str:
    """Spaces up to ``col`` then carets to ``end_col`` (one caret when the end is unknown)."""
    if col is None:
        return ""
    # under the line as shown: a character shown as an escape (\x1b) is as wide as the escape
    width = len(printable(source_line[col:end_col])) if end_col is not None and end_col > col else 1
    prefix = "".join("\t" if ch == "\t" else " " * len(printable(ch)) for ch in source_line[:col])
    return prefix + "^" * width


class _Writer:
    def __init__(self, color: bool):
        from rich.console import Console

        self.buf = io.StringIO()
        self.console = Console(file=self.buf, force_terminal=color, no_color=not color, width=WIDTH,
                               highlight=False, emoji=False, color_system="standard" if color else None)

    def line(self, *parts) -> None:
        """Print (text, style) pairs or plain strings as one line, markup off, each part
        ``printable`` (the one door user text reaches the terminal by)."""
        from rich.text import Text

        text = Text()
        for part in parts:
            if isinstance(part, tuple):
                text.append(printable(part[0]), style=part[1])
            else:
                text.append(printable(str(part)))
        self.console.print(text, soft_wrap=True)

    def heading(self, title: str) -> None:
        self.console.print()
        self.line((title, "bold underline"))

    def table(self, title: str, columns: list[tuple[str, str]], rows: list[list[str]], no_wrap: bool = False,
              clip_last: bool = False) -> None:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        rows = [[printable(cell) for cell in row] for row in rows]
        table = Table(title=printable(title), title_justify="left", title_style="bold", box=box.SIMPLE_HEAD)
        last = len(columns) - 1
        # clip_last: one row a line, the other columns at their widest cell and the last one
        # (prose the details repeat in full) cut to what is left of the width (layout only)
        widths = [max([len(name)] + [len(row[i]) for row in rows]) for i, (name, _) in enumerate(columns)]
        rest = max(WIDTH - sum(widths[:last]) - 3 * len(columns) - 2, 12)
        # the first column names the thing (a target): wrapped only when the row cannot fit,
        # and then it alone; a figure or a status is never cut to a column one character wide
        fits = sum(widths) + 3 * len(columns) + 2 <= WIDTH
        for i, (name, justify) in enumerate(columns):
            clip = clip_last and i == last
            table.add_column(name, justify=justify, overflow="ellipsis" if clip else "fold",
                             no_wrap=no_wrap or (i == 0 and fits) or clip_last or i > 0,
                             width=(rest if clip else widths[i]) if clip_last else None,
                             min_width=None if clip_last or i == 0 else widths[i])
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        if no_wrap and not fits:
            # rows of figures that cannot fit the width: the table wider than the page, every
            # cell whole ("skipped", "cpp/openmp"), rather than cells cut to a few characters
            from rich.console import Console

            wide = Console(file=self.buf, force_terminal=self.console.is_terminal, no_color=self.console.no_color,
                           width=sum(widths) + 3 * len(columns) + 2, highlight=False, emoji=False,
                           color_system=self.console.color_system)
            wide.print(table)
            return
        self.console.print(table)

    def source(self, line_no: Optional[int], source_line: Optional[str], col, end_col, indent: str = "    ") -> None:
        if not source_line:
            return
        gutter = f"{line_no:>5} | " if line_no is not None else "      | "
        self.line(indent, (gutter, "dim"), source_line.rstrip("\n"))
        mark = caret(source_line, col, end_col)
        if mark:
            self.line(indent, ("      | ", "dim"), (mark, "bold red"))


def _header(w: _Writer, r: Report) -> None:
    versions = [f"graphmend {r.graphmend_version or '?'}", f"mend {r.command}"]
    if r.torch_version:
        versions.append(f"torch {r.torch_version}")
    if r.python_version:
        versions.append(f"python {r.python_version}")
    if r.platform:
        versions.append(r.platform)
    w.line((" | ".join(versions), "bold"))
    if r.root:
        w.line(("root: ", "dim"), r.root)
    if r.targets or r.bench:
        w.line(("mode: ", "dim"), run_setting(r))


def _targets(w: _Writer, r: Report, verbose: bool) -> None:
    if not r.targets:
        return
    cols = [("target", "left"), ("graphs", "right"), ("breaks", "right"), ("recompiles", "right"),
            ("skipped", "right"), ("explain", "right"), ("s", "right"), ("status", "left")]
    rows = [[target_label(t.name, t.run_mode), str(t.graph_count), str(len(t.breaks)), str(len(t.recompiles)),
             str(t.frames_skipped), str(t.graph_break_count), f"{t.duration_s:.2f}", "error" if t.error else "ok"]
            for t in r.targets]
    w.console.print()
    w.table("Targets", cols, rows)
    w.line("  ", ("breaks: distinct graph breaks; recompiles: guard failures (not breaks); "
                  "explain: torch._dynamo.explain's graph_break_count (graphs - 1, recompiles included)", "dim"))
    for t in r.targets:
        if t.error:
            w.line("  ", (target_label(t.name, t.run_mode), "bold"), ": ", (t.error, "red"))
        if t.backward_graph_count is not None:
            w.line("  ", (target_label(t.name, t.run_mode), "bold"), f": backward: {t.backward_graph_count} graphs "
                   "(compiled autograd)")
    shown = 0
    for t in r.targets:
        for rc in t.recompiles:
            if verbose or shown < RECOMPILES_SHOWN:
                w.line("  ", (target_label(t.name, t.run_mode), "bold"), ": ", recompile_text(rc, r.root))
            shown += 1
        if replay_text(t):
            w.line("  ", (target_label(t.name, t.run_mode), "bold"), ": ", replay_text(t))
    if shown > RECOMPILES_SHOWN and not verbose:
        w.line("  ", (f"{shown - RECOMPILES_SHOWN} more recompiles: --verbose", "dim"))


RECOMPILES_SHOWN = 5


def _skipped(w: _Writer, r: Report) -> None:
    """The costliest fact first: whole frames Dynamo gave up on, and what they hide."""
    s = r.summary
    if not s or not s.skipped_frames:
        return
    w.console.print()
    n = s.skipped_frames
    limits = any(f.limit for i in r.issues for f in i.skipped)
    why = (f"a break inside a loop or the recompile limit made Dynamo skip {'them' if n != 1 else 'it'}" if limits else
           f"a break inside {'their' if n != 1 else 'its'} loop made Dynamo skip {'them' if n != 1 else 'it'} whole")
    w.line((f"{n} frame{'s' if n != 1 else ''} ran in eager: {why}, compiling nothing", "bold red"))
    for issue in r.issues:
        for frame in issue.skipped:
            w.line("  ", (skipped_sentence(frame, r.root, short=True), "bold"),
                   (f"  [{_few(frame.targets, 2)}]" if frame.targets else "", "dim"))
            w.line("    ", ("because of: ", "dim"), (issue.rule, "magenta"), " ",
                   (short_path(location(issue.file, issue.line, r.root, issue.col)), "cyan"),
                   f" in {issue.function}" if issue.function else "", f": {issue.message}")
            for j in frame.hides:
                h = r.issues[j]
                w.line("    ", ("hides: ", "yellow"), (h.rule, "magenta"), " ",
                       (short_path(location(h.file, h.line, r.root, h.col)), "cyan"), f": {h.message} (never traced)")


def _few(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _brief(loc: str, width: int = 40) -> str:
    """A location that fits a summary row: an installed file by its import path, a long one
    by its file name; the details give it in full."""
    loc = short_path(loc)
    return loc if len(loc) <= width else "…/" + loc.rsplit("/", 1)[-1]


def _fix_cell(issue: Issue) -> str:
    return {"safe": "mend fix", "unsafe": "--unsafe-fixes"}.get(issue.fix or "", "advice")


def _top(w: _Writer, r: Report) -> None:
    s = r.summary
    if not s or not s.top:
        return
    cols = [("rule", "left"), ("location", "left"), ("status", "left"), ("fan-out", "right"), ("fix", "left"),
            ("what", "left")]
    rows = [[i.rule, _brief(location(i.file, i.line, r.root)), i.status, f"x{i.fan_out}" if i.fan_out else "", _fix_cell(i),
             i.message] for i in (r.issues[k] for k in s.top if k < len(r.issues))]
    w.console.print()
    more = f" ({len(rows)} of {s.issues})" if s.issues > len(rows) else ""
    w.table(f"Top causes{more}", cols, rows, clip_last=True)


def _issue(w: _Writer, r: Report, i: Issue, verbose: bool) -> None:
    parts = ["  ", (location(i.file, i.line, r.root, i.col), "bold cyan"), " ", (f"[{i.status}]", _STATUS_STYLE.get(i.status, ""))]
    if i.function:
        parts += [" in ", (i.function, "bold")]
    if i.fan_out > 1:
        parts.append(f"  x{i.fan_out}")
    if i.also:
        parts.append(("  also " + ", ".join(i.also), "dim"))
    w.line(*parts)
    w.line("    ", i.message)
    note = mode_note(i)
    if note:
        w.line("    ", (note, "yellow"))
    for frame in i.skipped:
        w.line("    ", (f"made Dynamo skip a frame: {skipped_sentence(frame, r.root)}", "bold red"))
    if i.hidden_by is not None and i.hidden_by < len(r.issues):
        cause = r.issues[i.hidden_by]
        w.line("    ", ("never traced: ", "yellow"), "its frame ran in eager because of ", (cause.rule, "magenta"), " at ",
               location(cause.file, cause.line, r.root, cause.col))
    w.source(i.line, i.source_line, i.col, i.end_col if i.end_line in (None, i.line) else None)
    said = i.said
    if said.reason:
        ids = ", ".join(x for x in (said.gb_type if said.gb_type != said.reason else None, said.registry_id) if x)
        w.line("    ", (f"{i.said_by.lower()}: ", "dim"), said.reason, f" ({ids})" if ids and not i.recompiles else "",
               "" if i.counted or not i.targets or i.lowering or i.recompiles else "; not counted by explain()")
    cause = library_cause(said.library, r.root)
    if cause:
        w.line("    ", ("broke in library code it calls: ", "yellow"), cause)
    if verbose and said.explanation:
        w.line("    ", ("why: ", "dim"), said.explanation)
    if verbose:
        for hint in said.hints:
            w.line("    ", ("hint: ", "green"), hint)
    if i.fix_hint:
        w.line("    ", ("fix: ", "green"), i.fix_hint, ("  (mend fix)" if i.fix == "safe" else
                                                     "  (mend fix --unsafe-fixes)" if i.fix == "unsafe" else ""))
    if i.fix_why:
        w.line("    ", ("no rewrite here: ", "dim"), i.fix_why)
    if i.targets:
        w.line("    ", ("targets: ", "dim"), ", ".join(i.targets) if verbose else _few(i.targets))
    if verbose and len(said.stack) > 1:
        w.line("    ", ("stack: ", "dim"), " -> ".join(f"{fr.function} ({location(fr.file, fr.line, r.root)})" for fr in said.stack))


def _issues(w: _Writer, r: Report, verbose: bool) -> None:
    s = r.summary
    if not s or not s.issues:
        return
    w.heading(f"Details: {s.issues} issue{'s' if s.issues != 1 else ''} ({s.issues_confirmed} confirmed, "
              f"{s.issues_dynamic} dynamic only, {s.issues_potential} potential, {s.issues_unreached} never traced)"
              + ("" if verbose else "; Dynamo's explanations and hints: --verbose"))
    for rule, count in s.issue_rules.items():
        group = [i for i in r.issues if i.rule == rule]
        if not group:  # a summary out of step with the report: show what is there
            continue
        w.console.print()
        w.line((rule, "bold magenta"), f" {group[0].category}", ("  " + f"{count} issue{'s' if count != 1 else ''}", "dim"))
        for i in group:
            _issue(w, r, i, verbose)


def _diff(w: _Writer, diff: str, indent: str = "    ") -> None:
    for raw in diff.rstrip("\n").split("\n"):
        style = "green" if raw.startswith("+") and not raw.startswith("+++") else \
            "red" if raw.startswith("-") and not raw.startswith("---") else \
            "cyan" if raw.startswith("@@") else "bold" if raw.startswith(("---", "+++")) else ""
        w.line(indent, (raw, style))


def _fixes(w: _Writer, r: Report) -> None:
    s = r.summary
    if r.fixes:
        w.heading(f"Fixes: {s.fixes_verified} verified, {s.fixes_partial} partially verified, "
                  f"{s.fixes_unverified} unverified, {s.fixes_rejected} rejected, "
                  + (f"{s.fixes_regresses} slower, " if s.fixes_regresses else "")
                  + f"{s.fixes_advice} advice" if s else "Fixes")
        for f in r.fixes:
            w.console.print()
            parts = ["  ", (f.status.upper(), "bold " + _STATUS_STYLE.get(f.status, "")), " ", (f.rule, "magenta"), " ",
                     (location(f.file, f.line, r.root), "bold cyan")]
            if f.function:
                parts += [" in ", (f.function, "bold")]
            w.line(*parts)
            if f.reason:
                w.line("    ", ("reason: ", "dim"), f.reason)
            if f.checks:
                w.line("    ", ("checked: ", "dim"), ", ".join(f.checks))
            # a partial proof names what it lacks (its skipped checks among them)
            for item in f.partial:
                w.line("    ", ("proof lacks: ", "yellow"), item)
            for item in ([] if f.partial else f.skipped_checks):
                w.line("    ", ("not checked: ", "yellow"), item)
            if f.import_root:
                w.line("    ", ("import root: ", "dim"), f.import_root)
            if f.diff:
                _diff(w, f.diff)
            if f.advice:
                w.line("    ", ("advice:", "yellow"))
                for line in f.advice.rstrip("\n").split("\n"):
                    w.line("      ", line)
    if r.fix_targets:
        w.heading("Re-traced with every verified fix applied")
        for t in r.fix_targets:
            equal = "not compared" if t.outputs_equal is None else ("yes" if t.outputs_equal else "NO")
            w.line("  ", (t.name, "bold"), f": breaks {t.breaks_before} -> {t.breaks_after}, outputs equal: ",
                   (equal, "green" if t.outputs_equal else "red"))
            for item in t.remaining:
                w.line("    ", ("remaining: ", "dim"), item)
            for c in t.costs:
                w.line("    ", ("cost: ", "red" if c.verdict == SLOWER else "dim"), cost_text(c))
            for item in t.unexercised_branches:
                w.line("    ", ("never exercised: ", "yellow"), item)
            if t.error:
                w.line("    ", ("error: ", "red"), t.error)


def _shaky(x) -> str:
    """The mark of a median (or a ratio of medians) the bench flagged unstable."""
    return (" unstable" if x.unstable else "") + (" SLOWER" if getattr(x, "slower", False) else "")


def _bench(w: _Writer, r: Report) -> None:
    # one table per target, rows in the order the bench wrote them
    targets = list(dict.fromkeys([b.target for b in r.bench] + [x.target for x in r.ratios]))
    cols = [("arm", "left"), ("device/mode", "left"), ("cold s", "right"), ("median ms", "right"),
            ("IQR", "right"), ("graphs", "right"), ("breaks", "right"), ("kernels", "right"),
            ("backend", "left"), ("peak MB", "right"), ("outputs", "left")]
    for target in targets:
        rows = [[b.arm, bench_setting(b), _opt(b.cold_s, "{:.3f}"), _opt(b.median_ms, "{:.3f}") + _shaky(b),
                 _opt(b.iqr_ms, "{:.3f}"), _opt(b.graph_count), _opt(b.break_count), _opt(b.kernel_count),
                 b.backend or "", _opt(b.peak_mem_mb, "{:.1f}"),
                 "skipped" if b.skipped else "error" if b.error else
                 "" if b.outputs_match is None else ("match" if b.outputs_match else "DIFFER")]
                for b in r.bench if b.target == target]
        w.console.print()
        w.table(f"Benchmark: {target}", cols, rows, no_wrap=True)
        for b in r.bench:
            if b.target == target and b.error:
                # one line an arm: a compiler's error can run to pages (Inductor's IR); JSON keeps it whole
                first, *more = b.error.strip().splitlines() or [""]
                w.line("  ", (f"{b.arm}: ", "bold"), ("skipped: " if b.skipped else "", "yellow"),
                       (first, "yellow" if b.skipped else "red"),
                       (f" ({len(more)} more lines in the JSON report)" if more else "", "dim"))
            if b.target == target and b.unstable_why:
                w.line("  ", (f"{b.arm}: ", "bold"), ("unstable: ", "yellow"), b.unstable_why)
            if b.target == target and b.mismatch:
                w.line("  ", (f"{b.arm}: ", "bold"), ("outputs differ: ", "red"), b.mismatch)
        ratios = [x for x in r.ratios if x.target == target]
        if ratios:
            w.line("  ", ("ratios (median time, below 1 is faster): ", "dim"),
                   ", ".join(f"{x.name} {_opt(x.value, '{:.3f}x') or 'n/a'}{_shaky(x)}" for x in ratios))
        if any(b.unstable for b in r.bench if b.target == target):
            w.line("  ", (UNSTABLE_NOTE, "yellow"))


def _check(w: _Writer, r: Report) -> None:
    c = r.check
    if c is None:
        return
    w.heading(f"Check against {c.baseline}: {len(c.new)} new, {len(c.stale)} stale, {c.known} known"
              + (" (baseline updated)" if c.updated else ""))
    for e in c.new:
        w.line("  ", ("NEW ", "bold red"), (e.rule, "magenta"), " ", (location(e.file, e.line, r.root, e.col), "bold cyan"),
               f" in {e.function}", f"  x{e.count}" if e.count != 1 else "", f"  ({e.origin}",
               f" {e.run_mode}" if e.run_mode not in (None, "eval") else "",
               f", target {e.target})" if e.target else ")")
        if e.message:
            w.line("    ", e.message)
        w.line("    ", ("source: ", "dim"), e.source_line or e.source)
        if e.fix_hint:
            w.line("    ", ("fix: ", "green"), e.fix_hint)
    for failed in c.failed_targets:
        w.line("  ", ("FAILED TARGET ", "bold red"), failed)
    for e in c.stale:
        w.line("  ", ("stale ", "yellow"), (e.rule, "magenta"), " ", (rel(e.file, r.root), "cyan"),
               f" in {e.function}: ", e.source, f"  x{e.count}" if e.count != 1 else "",
               f"  ({e.run_mode})" if e.run_mode not in (None, "eval") else "")


def _errors(w: _Writer, r: Report) -> None:
    if not r.errors:
        return
    w.heading(f"Errors: {len(r.errors)} (the run went on without them)")
    for e in r.errors:
        w.line("  ", (rel(e.file, r.root), "bold"), f" [{e.target}]" if e.target else "", ": ", (e.message, "red"))


def _totals(w: _Writer, r: Report) -> None:
    s = r.summary
    if s is None:
        return
    w.console.print()
    parts = [f"{s.targets} target{'s' if s.targets != 1 else ''}"]
    if s.targets_failed:
        parts.append(f"{s.targets_failed} failed")
    if r.command == "check" and s.check_new is not None:  # mend check lists its verdict, not the findings: count that
        parts += [f"{s.graphs} graphs", f"{s.check_new} new", f"{s.check_known} known", f"{s.check_stale} stale",
                  f"{r.files_scanned} files scanned"]
    elif r.bench and not r.targets:  # mend bench: its tables, not captures it did not make
        parts = [f"{s.bench_targets} target{'s' if s.bench_targets != 1 else ''} benchmarked", f"{s.bench_arms} arms run"]
        parts += [f"{n} {what}" for n, what in ((s.bench_unstable, "unstable"), (s.bench_failed, "failed")) if n]
    else:
        parts += [f"{s.graphs} graphs", break_counts(s.breaks, s.recompiles, s.graph_breaks),
                  f"{s.issues} issues ({s.fan_out} break occurrences)", f"{s.frames_skipped} skipped frames",
                  f"{r.files_scanned} files scanned"]
    if s.errors:
        parts.append(f"{s.errors} errors")
    w.line(("Total: ", "bold"), ", ".join(parts))
    for step in r.next_steps:
        head, *rest = step.split("\n")
        w.line(("Next: ", "bold green"), head)
        for line in rest:
            w.line("    ", line)


def render_text(report: Report, color: bool = False, verbose: bool = False) -> str:
    """The first screen is the summary (skipped frames, top causes, totals, next steps, the
    targets table); the details follow, Dynamo's explanations, hints, stacks and guards with ``verbose``."""
    w = _Writer(color)
    _header(w, report)
    _skipped(w, report)
    _top(w, report)
    _totals(w, report)
    _targets(w, report, verbose)
    _issues(w, report, verbose)
    _fixes(w, report)
    _bench(w, report)
    _check(w, report)
    _errors(w, report)
    text = w.buf.getvalue()
    if not color:  # rich pads table rows to the width: trailing blanks help no reader
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text
