"""GitHub Actions workflow commands: one ``::error``/``::warning`` annotation per issue (a
finding and the breaks at its place merged), so one line of code is annotated once.

Escaping follows the runner's rules (actions/toolkit ``command.ts``): in the message ``%``,
``\\r`` and ``\\n`` are percent-encoded; in property values ``:`` and ``,`` are as well.
Issues a target hit are errors, static-only ones (potential, never traced) warnings; file errors
are errors with the file and no line.
"""

from __future__ import annotations

from typing import Optional

from graphmend.core.model import CONFIRMED, DYNAMIC, Report
from reports.wording import issue_parts, printable, rel


def escape_data(text: str) -> str:
    # the runner's escapes, then the controls it would pass to the log viewer made visible
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


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
    for i in r.issues:
        level = "error" if i.status in (CONFIRMED, DYNAMIC) else "warning"
        parts = issue_parts(i, r.root, r.issues, detail=False, fixes=r.fixes)
        parts.append(f"({i.status})")
        message = "\n".join(parts)
        if i.file is None:
            lines.append(command(level, message, title=i.rule))
        else:
            end_col = i.end_col if i.end_line in (None, i.line) else None
            lines.append(command(level, message, rel(i.file, r.root), i.line, i.col, end_col, i.rule))
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
            note = (f"{s.issues} issues over {s.targets} targets ({s.fan_out} break occurrences, "
                    f"{s.skipped_frames} skipped frames), {s.fixable} with a candidate fix")
        lines.append(f"::notice title=graphmend::{escape_data(note)}")
    return "\n".join(lines) + "\n"
