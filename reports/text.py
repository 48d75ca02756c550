"""The rich terminal view: tables, breaks grouped by cause with a caret under the expression.

Colour only when asked (``render_or_fail`` asks on a TTY without ``NO_COLOR``); the plain
form is what the golden test pins. Every user-supplied string goes in as ``rich.text.Text``,
never as markup, so ``[brackets]`` in messages print as they are.
"""

from __future__ import annotations

import io
from typing import Optional

from graphmend.model import ADVICE, CONFIRMED, REJECTED, UNVERIFIED, VERIFIED, Break, Report
from reports.paths import UNSTABLE_NOTE, bench_setting, location, mode_note, rel, target_label

WIDTH = 120
_STATUS_STYLE = {VERIFIED: "green", REJECTED: "red", UNVERIFIED: "red", ADVICE: "yellow", CONFIRMED: "red", "potential": "yellow"}


def _opt(value, fmt: str = "{}") -> str:
    return "" if value is None else fmt.format(value)


def caret(source_line: str, col: Optional[int], end_col: Optional[int]) -> str:
    """Spaces up to ``col`` then carets to ``end_col`` (one caret when the end is unknown)."""
    if col is None:
        return ""
    width = end_col - col if end_col is not None and end_col > col else 1
    prefix = "".join("\t" if ch == "\t" else " " for ch in source_line[:col])
    return prefix + "^" * width


class _Writer:
    def __init__(self, color: bool):
        from rich.console import Console

        self.buf = io.StringIO()
        self.console = Console(file=self.buf, force_terminal=color, no_color=not color, width=WIDTH,
                               highlight=False, emoji=False, color_system="standard" if color else None)

    def line(self, *parts) -> None:
        """Print (text, style) pairs or plain strings as one line, markup off."""
        from rich.text import Text

        text = Text()
        for part in parts:
            if isinstance(part, tuple):
                text.append(part[0], style=part[1])
            else:
                text.append(str(part))
        self.console.print(text, soft_wrap=True)

    def heading(self, title: str) -> None:
        self.console.print()
        self.line((title, "bold underline"))

    def table(self, title: str, columns: list[tuple[str, str]], rows: list[list[str]], no_wrap: bool = False) -> None:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD)
        for i, (name, justify) in enumerate(columns):
            # the first column names the thing (a target): never wrapped
            table.add_column(name, justify=justify, overflow="fold", no_wrap=no_wrap or i == 0)
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
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
        w.line(("mode: ", "dim"), ",".join(r.run_modes))


def _targets(w: _Writer, r: Report) -> None:
    if not r.targets:
        return
    cols = [("target", "left"), ("graphs", "right"), ("breaks", "right"), ("skipped frames", "right"),
            ("recompiles", "right"), ("time (s)", "right"), ("status", "left")]
    rows = [[target_label(t.name, t.run_mode), str(t.graph_count), str(t.graph_break_count), str(t.frames_skipped), str(len(t.recompiles)),
             f"{t.duration_s:.2f}", "error" if t.error else "ok"] for t in r.targets]
    w.console.print()
    w.table("Targets", cols, rows)
    for t in r.targets:
        if t.error:
            w.line("  ", (target_label(t.name, t.run_mode), "bold"), ": ", (t.error, "red"))
        if t.backward_graph_count is not None:
            w.line("  ", (target_label(t.name, t.run_mode), "bold"), f": backward: {t.backward_graph_count} graphs "
                   "(compiled autograd)")
        for rc in t.recompiles:
            w.line("  ", (t.name, "bold"), ": recompiled ", rc.function,
                   f" ({location(rc.file, rc.line, r.root)})" if rc.file else "", ": ", rc.reason)


def _break(w: _Writer, r: Report, target: str, b: Break) -> None:
    loc = location(b.file, b.line, r.root, b.col)
    parts = ["  ", (loc, "bold cyan")]
    if b.function:
        parts += [" in ", (b.function, "bold")]
    if b.occurrences != 1:
        parts.append(f"  x{b.occurrences}")
    w.line(*parts)
    w.line("    ", ("target: ", "dim"), target)
    if mode_note(b):
        w.line("    ", (mode_note(b), "yellow"))
    if not b.counted or b.kind != "graph_break":
        w.line("    ", (f"{b.kind.replace('_', ' ')}; not counted by explain()" if not b.counted else b.kind, "yellow"))
    w.source(b.line, b.source_line, b.col, b.end_col)
    ids = ", ".join(x for x in (b.gb_type if b.gb_type != b.reason else None, b.registry_id) if x)
    w.line("    ", ("dynamo: ", "dim"), b.reason, f" ({ids})" if ids else "")
    if b.explanation:
        w.line("    ", ("why: ", "dim"), b.explanation)
    for hint in b.hints:
        w.line("    ", ("hint: ", "green"), hint)
    if b.stack and len(b.stack) > 1:
        w.line("    ", ("stack: ", "dim"), " -> ".join(f"{fr.function} ({location(fr.file, fr.line, r.root)})" for fr in b.stack))


def _breaks(w: _Writer, r: Report) -> None:
    s = r.summary
    if not s or not s.breaks:
        return
    w.heading(f"Graph breaks: {s.breaks} distinct, {s.break_occurrences} occurrences "
              f"({s.graph_breaks} counted by explain, {s.frames_skipped} skipped frames)")
    for rule, count in s.break_rules.items():
        first = next((b for t in r.targets for b in t.breaks if b.rule == rule), None)
        if first is None:  # a summary out of step with the report: show what is there
            continue
        w.console.print()
        w.line((rule, "bold magenta"), f" {first.category}", ("  " + f"{count} break{'s' if count != 1 else ''}", "dim"))
        for t in r.targets:
            for b in t.breaks:
                if b.rule == rule:
                    _break(w, r, target_label(t.name, t.run_mode), b)


def _findings(w: _Writer, r: Report) -> None:
    s = r.summary
    if not s or not s.findings:
        return
    w.heading(f"Static findings: {s.findings} ({s.confirmed} confirmed, {s.potential} potential)")
    for rule, count in s.finding_rules.items():
        group = [f for f in r.findings if f.rule == rule]
        if not group:
            continue
        w.console.print()
        w.line((rule, "bold magenta"), f" {group[0].category}", ("  " + f"{count} finding{'s' if count != 1 else ''}", "dim"))
        for f in group:
            parts = ["  ", (location(f.file, f.line, r.root, f.col), "bold cyan"), " ",
                     (f"[{f.status}]", _STATUS_STYLE.get(f.status, ""))]
            if f.function:
                parts += [" in ", (f.function, "bold")]
            w.line(*parts)
            w.line("    ", f.message)
            w.source(f.line, f.source_line, f.col, f.end_col if (f.end_line in (None, f.line)) else None)
            if f.fix_hint:
                w.line("    ", ("fix: ", "green"), f.fix_hint)


def _diff(w: _Writer, diff: str, indent: str = "    ") -> None:
    for raw in diff.rstrip("\n").split("\n"):
        style = "green" if raw.startswith("+") and not raw.startswith("+++") else \
            "red" if raw.startswith("-") and not raw.startswith("---") else \
            "cyan" if raw.startswith("@@") else "bold" if raw.startswith(("---", "+++")) else ""
        w.line(indent, (raw, style))


def _fixes(w: _Writer, r: Report) -> None:
    s = r.summary
    if r.fixes:
        w.heading(f"Fixes: {s.fixes_verified} verified, {s.fixes_unverified} unverified, {s.fixes_rejected} rejected, "
                  f"{s.fixes_advice} advice" if s else "Fixes")
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
            for item in f.skipped_checks:
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
            for item in t.unexercised_branches:
                w.line("    ", ("never exercised: ", "yellow"), item)
            if t.error:
                w.line("    ", ("error: ", "red"), t.error)


def _shaky(x) -> str:
    """The mark of a median (or a ratio of medians) the bench flagged unstable."""
    return " unstable" if x.unstable else ""


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
                w.line("  ", (f"{b.arm}: ", "bold"), ("skipped: " if b.skipped else "", "yellow"),
                       (b.error, "yellow" if b.skipped else "red"))
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
        w.line("    ", ("source: ", "dim"), e.source)
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
    else:
        parts += [f"{s.graphs} graphs", f"{s.graph_breaks} breaks counted by explain",
                  f"{s.breaks} distinct breaks ({s.break_occurrences} occurrences)", f"{s.frames_skipped} skipped frames",
                  f"{s.findings} findings", f"{r.files_scanned} files scanned"]
    if s.errors:
        parts.append(f"{s.errors} errors")
    w.line(("Total: ", "bold"), ", ".join(parts))


def render_text(report: Report, color: bool = False) -> str:
    w = _Writer(color)
    _header(w, report)
    _targets(w, report)
    _breaks(w, report)
    _findings(w, report)
    _fixes(w, report)
    _bench(w, report)
    _check(w, report)
    _errors(w, report)
    _totals(w, report)
    text = w.buf.getvalue()
    if not color:  # rich pads table rows to the width: trailing blanks help no reader
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text
