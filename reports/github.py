"""GitHub Actions workflow commands: one ``::error``/``::warning`` annotation per break or finding.

Escaping follows the runner's rules (actions/toolkit ``command.ts``): in the message ``%``,
``\\r`` and ``\\n`` are percent-encoded; in property values ``:`` and ``,`` are as well.
Confirmed findings and dynamic breaks are errors, potential findings warnings; file errors
are errors with the file and no line.
"""

from __future__ import annotations

from typing import Optional

from graphmend.model import CONFIRMED, Report
from reports.paths import mode_note, rel, target_label


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, file: Optional[str] = None, line: Optional[int] = None,
            col: Optional[int] = None, end_col: Optional[int] = None, title: Optional[str] = None) -> str:
    props = []
    if file:
        props.append(f"file={escape_property(file)}")
    if file and line is not None:
        props.append(f"line={line}")
        if col is not None:
            props.append(f"col={col + 1}")  # the model's columns are 0-based, GitHub's 1-based
            if end_col is not None and end_col > col:
                # model: 0-based exclusive end; GitHub: 1-based inclusive, the same number
                props.append(f"endColumn={end_col}")
    if title:
        props.append(f"title={escape_property(title)}")
    head = f"::{level} " + ",".join(props) if props else f"::{level}"
    return f"{head}::{escape_data(message)}"


def render_github(r: Report) -> str:
    lines: list[str] = []
    for t in r.targets:
        if t.error:
            lines.append(command("error", t.error, rel(t.file, r.root), title=f"mend: {t.name}"))
        for b in t.breaks:
            message = b.reason + (f"\n{b.explanation}" if b.explanation else "") + \
                "".join(f"\nHint: {h}" for h in b.hints) + f"\nTarget: {target_label(t.name, t.run_mode)}" + \
                (f" ({mode_note(b)})" if mode_note(b) else "")
            if b.file is None:
                lines.append(command("error", message, title=b.rule))
            else:
                lines.append(command("error", message, rel(b.file, r.root), b.line, b.col, b.end_col, b.rule))
    for f in r.findings:
        level = "error" if f.status == CONFIRMED else "warning"
        message = f.message + (f"\nFix: {f.fix_hint}" if f.fix_hint else "") + f"\n({f.status})"
        end_col = f.end_col if f.end_line in (None, f.line) else None
        lines.append(command(level, message, rel(f.file, r.root), f.line, f.col, end_col, f.rule))
    if r.check is not None:
        for e in r.check.new:
            message = f"new graph break not in {r.check.baseline}: {e.message or e.source}" + \
                (f"\nFix: {e.fix_hint}" if e.fix_hint else "")
            lines.append(command("error", message, rel(e.file, r.root), e.line, e.col, title=f"{e.rule} (new)"))
        for failed in r.check.failed_targets:
            lines.append(command("error", failed, title="mend check: target failed"))
    for e in r.errors:
        lines.append(command("error", e.message, rel(e.file, r.root), title="mend: " + (e.target or "file error")))
    if r.summary is not None:
        s = r.summary
        if r.command == "check" and s.check_new is not None:  # mend check: the verdict its ::error lines are
            note = (f"mend check: {s.check_new} new graph breaks not in {r.check.baseline} ({s.check_known} known, "
                    f"{s.check_stale} stale), {r.files_scanned} files scanned")
        else:
            note = f"{s.breaks} distinct graph breaks over {s.targets} targets, {s.findings} static findings"
        lines.append(f"::notice title=graphmend::{escape_data(note)}")
    return "\n".join(lines) + "\n"
