"""The rich terminal view."""

from __future__ import annotations

import io

from graphmend.model import Report


def render_text(report: Report, color: bool = False) -> str:
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=color, no_color=not color, width=120, highlight=False)
    if report.targets:
        table = Table(title="Targets", title_justify="left")
        for col in ("target", "graphs", "breaks", "skipped", "time (s)", "error"):
            table.add_column(col, justify="right" if col in ("graphs", "breaks", "skipped", "time (s)") else "left")
        for t in report.targets:
            table.add_row(t.name, str(t.graph_count), str(t.graph_break_count), str(t.frames_skipped),
                          f"{t.duration_s:.2f}", t.error or "")
        console.print(table)
    for t in report.targets:
        for b in t.breaks:
            loc = f"{b.file}:{b.line}" if b.file else "<unknown>"
            console.print(f"[bold]{b.rule}[/] {loc} in {b.function or '?'} ({b.category}) x{b.occurrences}")
            if b.source_line:
                console.print(f"    {b.source_line.strip()}", markup=False)
            console.print(f"    {b.reason}", markup=False)
            if b.explanation:
                console.print(f"    {b.explanation}", markup=False)
            for h in b.hints:
                console.print(f"    hint: {h}", markup=False)
    for f in report.findings:
        console.print(f"{f.file}:{f.line}:{f.col}: {f.rule} [{f.status}] {f.message}", markup=False)
    for e in report.errors:
        console.print(f"error: {e.file}: {e.message}", markup=False)
    return buf.getvalue()
