"""One self-contained HTML page: inline CSS, inline SVG charts, no script, no external URL.

Every string from the report goes through ``html.escape``. Geometry (bar widths, positions)
is layout, derived from figures already in the model: the graphs of a target drawn as
segments (widths from ``ops_per_graph`` when it has one entry per graph), explain's counted
breaks at the boundaries between them in the order recorded, breaks explain does not count
listed beside the bar; bench bars scaled to the slowest arm of each target.
"""

from __future__ import annotations

from html import escape
from typing import Optional

from graphmend.core.model import SLOWER, Break, Report, TargetResult
from reports.wording import (UNSTABLE_NOTE, bench_setting, break_counts, cost_text, recompile_text, replay_text, location, mode_note, printable, rel, run_setting, skipped_sentence,
                           target_label)

ARM_COLORS = {"eager": "#8a94a6", "original": "#e06c3c", "mended": "#2f9e6e", "reference": "#3b6fd8"}
ARMS = ("eager", "original", "mended", "reference")

CSS = """
:root{--fg:#1d2330;--muted:#5d6678;--line:#e3e6ec;--bg:#f6f7f9;--card:#fff;--red:#d6452f;--green:#2f9e6e;
--amber:#c98a12;--blue:#3b6fd8;--mono:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
"DejaVu Sans",sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 12px;padding-bottom:6px;border-bottom:2px solid var(--line)}
h3{font-size:15px;margin:18px 0 8px}
.meta{color:var(--muted);font-size:13px}
code,pre{font-family:var(--mono);font-size:12.5px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:18px 0 0}
.stat{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px;flex:1 1 0;min-width:0}
.stat b{display:block;font-size:22px;line-height:1.2}.stat span{color:var(--muted);font-size:12px}
.stat.bad b{color:var(--red)}.stat.good b{color:var(--green)}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 16px;margin:0 0 12px}
.target-head{display:flex;justify-content:space-between;gap:12px;flex-wrap:wrap}
.target-name{font-family:var(--mono);font-weight:600}
.figures{color:var(--muted);font-size:13px}
svg{display:block;width:100%;height:auto}
.scroll{overflow-x:auto}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
.uncounted{margin:8px 0 0;padding-left:18px;color:var(--muted);font-size:13px}
.rule{display:inline-block;font-family:var(--mono);font-weight:700;background:#f3e8ff;color:#6b2fb3;border-radius:4px;
padding:0 6px}
.cat{color:var(--muted);margin-left:6px}
.loc{font-family:var(--mono);font-weight:600;color:#1f5fbf}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;background:#eef0f4;color:var(--muted)}
.badge.confirmed,.badge.dynamic,.badge.rejected,.badge.regresses,.badge.unverified,.badge.error,.badge.new{background:#fde8e4;color:var(--red)}
.badge.potential,.badge.unreached,.badge.advice,.badge.stale,.badge.uncounted{background:#fdf3dc;color:#9a6a06}
.badge.verified,.badge.ok{background:#e2f5ec;color:var(--green)}
.badge.partially{background:#fdf3dc;color:#9a6a06}
td pre.src{white-space:pre-wrap}
pre.src{background:#fbfbfc;border:1px solid var(--line);border-radius:6px;padding:8px 10px;margin:8px 0;overflow-x:auto}
pre.src .ln{color:#9aa3b2;user-select:none}
pre.src mark{background:#ffe1d9;color:#a2210d;border-bottom:2px solid var(--red);padding:0}
.why{margin:6px 0}.hint{margin:4px 0;color:#1e6b4b}.hint::before{content:"hint ";font-weight:700}
.small{font-size:12px;color:var(--muted)}
pre.diff{background:#fbfbfc;border:1px solid var(--line);border-radius:6px;padding:8px 0;overflow-x:auto}
pre.diff span{display:block;padding:0 10px}pre.diff .add{background:#e6f6ec;color:#17603d}
pre.diff .del{background:#fdecea;color:#9b2413}pre.diff .hunk{color:#3b6fd8}pre.diff .file{font-weight:700}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line);border-radius:8px;overflow:hidden}
th,td{text-align:left;padding:6px 8px;font-size:13px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#f0f2f5;font-size:12px;text-transform:uppercase;letter-spacing:.03em;color:var(--muted)}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.legend{display:flex;gap:14px;font-size:12px;color:var(--muted);margin:4px 0 8px}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
.err{color:var(--red)}
footer{margin-top:36px;color:var(--muted);font-size:12px}
"""


def _e(value) -> str:
    return escape(printable("" if value is None else str(value)), quote=True)


def _opt(value, fmt: str = "{}") -> str:
    return "" if value is None else fmt.format(value)


def _short_loc(b: Break, root: str) -> str:
    if not b.file:
        return "?"
    path = rel(b.file, root)
    return f"{path.rsplit('/', 1)[-1]}:{b.line}" if b.line is not None else path.rsplit("/", 1)[-1]


LANE_H = 16  # one row of break labels
_CHAR_W = 8.4  # an upper bound on a 12px bold character's width (labels are short ASCII)


def _label_lanes(t: TargetResult, root: str, width: int, top: int, bar_h: int) -> dict[int, tuple[str, float, int]]:
    """Where each break's label goes (marker index -> text, left x, row): centred on its marker,
    kept inside the chart, and moved down a row until it clears every label already in that row,
    so that markers close together (a model breaking many times in a narrow strip) never overlap
    their labels. Layout only: the positions follow the graph widths the bar itself draws."""
    counted = [b for b in t.breaks if b.counted]
    n = t.graph_count
    weights = t.ops_per_graph if len(t.ops_per_graph) == n and sum(t.ops_per_graph) > 0 else [1] * n
    skipped_w = 190 if t.frames_skipped else 0
    graphs_w = width - skipped_w - (10 if skipped_w and n > 0 else 0)
    gap = 14
    usable = graphs_w - gap * (n - 1)
    total = sum(weights)
    rows: list[float] = []  # per row: where its last label ends
    out: dict[int, tuple[str, float, int]] = {}
    x = 0.0
    for i, w in enumerate(weights[:-1]):
        x += min(max(usable * w / total, 24.0), graphs_w - x)
        cx = x + gap / 2
        x += gap
        if i >= len(counted):
            continue
        b = counted[i]
        text = f"{b.rule} {_short_loc(b, root)}"
        w_text = len(text) * _CHAR_W
        x0 = min(max(cx - w_text / 2, 0.0), width - w_text)
        lane = next((k for k, end in enumerate(rows) if end + 8 <= x0), len(rows))
        if lane == len(rows):
            rows.append(0.0)
        rows[lane] = x0 + w_text
        out[i] = (text, x0, lane)
    return out


def _graph_bar(t: TargetResult, root: str) -> str:
    """The graphs of one target as segments, each counted break a red marker between two of them;
    skipped frames (code Dynamo ran eagerly, invisible to explain) as an amber box at the end."""
    width, top, bar_h = 1000, 8, 30
    counted = [b for b in t.breaks if b.counted]
    n = t.graph_count
    labels = _label_lanes(t, root, width, top, bar_h) if n > 1 and counted else {}
    lanes = max((lane for _, _, lane in labels.values()), default=-1) + 1
    height = top + bar_h + (14 + LANE_H * lanes if lanes else 8)
    label = f"{t.name}: {n} graphs, {break_counts(len(t.breaks), len(t.recompiles), t.graph_break_count)}, {t.frames_skipped} skipped frames"
    parts = [f'<svg class="graph-bar" data-target="{_e(t.name)}" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" role="img" aria-label="{_e(label)}"><title>{_e(label)}</title>']
    if n <= 0 and not t.frames_skipped:
        text = "no graph captured: the target failed" if t.error else "no graph captured"
        parts.append(f'<rect x="0" y="{top}" width="{width}" height="{bar_h}" rx="5" fill="#eef0f4" '
                     f'stroke="#c9ced8" stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{width / 2}" y="{top + 20}" text-anchor="middle" font-size="13" '
                     f'fill="{"#d6452f" if t.error else "#5d6678"}">{_e(text)}</text></svg>')
        return "".join(parts)
    skipped_w = 190 if t.frames_skipped else 0
    graphs_w = width - skipped_w - (10 if skipped_w and n > 0 else 0)
    if t.frames_skipped:
        sx = width - skipped_w
        text = f"{t.frames_skipped} skipped frame{'s' if t.frames_skipped != 1 else ''} (eager)"
        parts.append(f'<rect class="skipped" x="{sx}" y="{top}" width="{skipped_w}" height="{bar_h}" rx="5" '
                     f'fill="#fdf3dc" stroke="#c98a12" stroke-dasharray="5 3"><title>{_e(text)}: Dynamo gave up on '
                     f'the frame, explain() does not count it</title></rect><text x="{sx + skipped_w / 2}" '
                     f'y="{top + 20}" text-anchor="middle" font-size="12" fill="#9a6a06">{_e(text)}</text>')
    if n <= 0:
        parts.append("</svg>")
        return "".join(parts)
    weights = t.ops_per_graph if len(t.ops_per_graph) == n and sum(t.ops_per_graph) > 0 else [1] * n
    gap = 14 if n > 1 else 0
    usable = graphs_w - gap * (n - 1)
    total = sum(weights)
    x = 0.0
    for i, w in enumerate(weights):
        seg = min(max(usable * w / total, 24.0), graphs_w - x)
        ops = f"{t.ops_per_graph[i]} ops" if len(t.ops_per_graph) == n else ""
        parts.append(f'<rect class="graph" x="{x:.1f}" y="{top}" width="{seg:.1f}" height="{bar_h}" rx="5" '
                     f'fill="#3b6fd8"><title>graph {i + 1}{" - " + ops if ops else ""}</title></rect>')
        parts.append(f'<text x="{x + seg / 2:.1f}" y="{top + 20}" text-anchor="middle" font-size="12" fill="#fff">'
                     f'{_e(f"graph {i + 1}" + (f" · {ops}" if ops and seg > 110 else ""))}</text>')
        x += seg
        if i < n - 1:
            cx = x + gap / 2
            b = counted[i] if i < len(counted) else None
            tip = f"{b.rule} {location(b.file, b.line, root)}: {b.reason}" if b else "graph break"
            parts.append(f'<g class="break-marker"><title>{_e(tip)}</title>'
                         f'<line x1="{cx:.1f}" y1="{top - 4}" x2="{cx:.1f}" y2="{top + bar_h + 4}" stroke="#d6452f" '
                         f'stroke-width="3"/><polygon points="{cx - 6:.1f},{top + bar_h + 10} {cx + 6:.1f},'
                         f'{top + bar_h + 10} {cx:.1f},{top + bar_h + 3}" fill="#d6452f"/>')
            if i in labels:
                text, x0, lane = labels[i]
                y = top + bar_h + 24 + LANE_H * lane
                if lane:  # a leader from the marker down to a label moved below its neighbours
                    parts.append(f'<line x1="{cx:.1f}" y1="{top + bar_h + 10}" x2="{cx:.1f}" y2="{y - 11}" '
                                 f'stroke="#d6452f" stroke-width="1" stroke-opacity="0.5"/>')
                parts.append(f'<text class="break-label" x="{x0:.1f}" y="{y}" font-size="12" '
                             f'fill="#d6452f" font-weight="600">{_e(text)}</text>')
            parts.append("</g>")
            x += gap
    parts.append("</svg>")
    return "".join(parts)


def _bench_chart(target: str, rows: list) -> str:
    """Horizontal bars of median time per arm, scaled to this target's slowest arm."""
    timed = [b for b in rows if b.median_ms is not None]
    arms = [b for b in rows if b.arm in ARMS] + [b for b in rows if b.arm not in ARMS]
    label_w, width, row_h = 110, 1000, 30
    height = row_h * len(arms) + 12
    top = max((b.median_ms for b in timed), default=0.0)
    parts = [f'<svg class="bench-chart" data-target="{_e(target)}" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" role="img" aria-label="{_e("median time per arm: " + target)}">'
             f'<title>{_e("median time per arm (ms): " + target)}</title>']
    for i, b in enumerate(arms):
        y = 6 + i * row_h
        parts.append(f'<text x="{label_w - 10}" y="{y + 18}" text-anchor="end" font-size="13" fill="#1d2330">'
                     f'{_e(b.arm)}</text>')
        if b.median_ms is None or top <= 0:
            parts.append(f'<text x="{label_w}" y="{y + 18}" font-size="12" '
                         f'fill="{"#9a6a06" if b.skipped else "#d6452f"}">'
                         f'{_e(("skipped: " if b.skipped else "") + (b.error or "no timing"))}</text>')
            continue
        bar = (width - label_w - 130) * b.median_ms / top
        color = ARM_COLORS.get(b.arm, "#8a94a6")
        parts.append(f'<rect class="bench-bar" data-arm="{_e(b.arm)}" x="{label_w}" y="{y + 4}" width="{max(bar, 2):.1f}" '
                     f'height="{row_h - 10}" rx="4" fill="{color}"><title>{_e(f"{b.arm}: {b.median_ms:.3f} ms")}</title></rect>')
        iqr = f" (IQR {b.iqr_ms:.3f})" if b.iqr_ms is not None else ""
        parts.append(f'<text x="{label_w + max(bar, 2) + 8:.1f}" y="{y + 18}" font-size="12" fill="#5d6678">'
                     f'{_e(f"{b.median_ms:.3f} ms{iqr}")}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _source(line_no: Optional[int], source_line: Optional[str], col: Optional[int], end_col: Optional[int]) -> str:
    if not source_line:
        return ""
    src = source_line.rstrip("\n")
    if col is not None and 0 <= col < len(src):
        end = end_col if end_col is not None and end_col > col else len(src)
        body = f"{_e(src[:col])}<mark>{_e(src[col:end])}</mark>{_e(src[end:])}"
    else:
        body = _e(src)
    ln = f'<span class="ln">{line_no:>5} │ </span>' if line_no is not None else ""
    return f'<pre class="src">{ln}{body}</pre>'


def _diff(diff: str) -> str:
    lines = []
    for raw in diff.rstrip("\n").split("\n"):
        cls = "file" if raw.startswith(("---", "+++")) else "add" if raw.startswith("+") else \
            "del" if raw.startswith("-") else "hunk" if raw.startswith("@@") else "ctx"
        lines.append(f'<span class="{cls}">{_e(raw) or " "}</span>')
    return f'<pre class="diff">{"".join(lines)}</pre>'


def _table(head: list[tuple[str, bool]], rows: list[list[str]]) -> str:
    th = "".join(f'<th class="num">{_e(h)}</th>' if num else f"<th>{_e(h)}</th>" for h, num in head)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if head[i][1] else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _summary(r: Report) -> str:
    s = r.summary
    if s is None:
        return ""
    if r.command == "check" and s.check_new is not None:  # mend check lists its verdict, not the findings: count that
        stats = [(s.targets, "targets", ""), (s.graphs, "graphs", ""),
                 (s.check_new, "new", "bad" if s.check_new else "good"), (s.check_known, "known", ""),
                 (s.check_stale, "stale", ""), (r.files_scanned, "files scanned", "")]
    else:
        stats = [(s.targets, "targets", ""), (s.graphs, "graphs", ""),
                 (s.breaks, "breaks", "bad" if s.breaks else "good"),
                 (s.recompiles, "recompiles", "bad" if s.recompiles else ""),
                 (s.graph_breaks, "explain's graph_break_count (recompiles included)", ""),
                 (s.issues, f"issues ({s.issues_confirmed} confirmed, {s.fan_out} break occurrences)",
                  "bad" if s.issues else "good"),
                 (s.frames_skipped, "skipped frames", "bad" if s.frames_skipped else ""),
                 (s.fixable, "with a candidate fix", "good" if s.fixable else ""),
                 (s.fixes_verified, "verified fixes", "good" if s.fixes_verified else ""),
                 (s.fixes_partial, "partially verified fixes", "")]
    if s.errors or s.targets_failed:
        stats.append((s.errors, "errors", "bad"))
    return '<div class="cards">' + "".join(
        f'<div class="stat {cls}"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for v, k, cls in stats) + "</div>"


def _targets(r: Report) -> str:
    if not r.targets:
        return ""
    out = ['<section id="targets"><h2>Targets</h2>',
           '<div class="legend"><span><i style="background:#3b6fd8"></i>compiled graph</span>'
           '<span><i style="background:#d6452f"></i>graph break (counted by explain)</span>'
           '<span><i style="background:#fdf3dc;border:1px dashed #c98a12"></i>skipped frame (ran eagerly)</span></div>']
    for t in r.targets:
        badge = '<span class="badge error">error</span>' if t.error else '<span class="badge ok">ran</span>'
        out.append(f'<div class="card target"><div class="target-head"><span class="target-name">{_e(target_label(t.name, t.run_mode))}</span>'
                   f'<span class="figures">{t.graph_count} graphs · '
                   f'{_e(break_counts(len(t.breaks), len(t.recompiles), t.graph_break_count))} · '
                   f'{t.frames_skipped} skipped frames · {t.duration_s:.2f} s {badge}'
                   f'</span></div>{_graph_bar(t, r.root)}')
        if t.error:
            out.append(f'<p class="err">{_e(t.error)}</p>')
        hidden = [b for b in t.breaks if not b.counted]
        if hidden:
            out.append('<ul class="uncounted">' + "".join(
                f'<li><span class="badge uncounted">{_e(b.kind.replace("_", " "))}</span> <span class="rule">{_e(b.rule)}</span> '
                f'<span class="loc">{_e(location(b.file, b.line, r.root, b.col))}</span>: {_e(b.reason)} '
                f'<span class="small">(not counted by explain)</span></li>' for b in hidden) + "</ul>")
        for rc in t.recompiles:
            out.append(f'<p class="small">{_e(recompile_text(rc, r.root))}</p>')
        if replay_text(t):
            out.append(f'<p class="small">{_e(replay_text(t))}</p>')
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


def _skipped(r: Report) -> str:
    s = r.summary
    if s is None or not s.skipped_frames:
        return ""
    items = []
    for i in r.issues:
        for frame in i.skipped:
            hides = "".join(f'<li><span class="rule">{_e(h.rule)}</span> <span class="loc">'
                            f'{_e(location(h.file, h.line, r.root, h.col))}</span>: {_e(h.message)} '
                            f'<span class="small">(never traced)</span></li>' for h in (r.issues[j] for j in frame.hides))
            items.append(f'<div class="card skipped"><div><b>{_e(skipped_sentence(frame, r.root))}</b></div>'
                         f'<div class="why">because of <span class="rule">{_e(i.rule)}</span> <span class="loc">'
                         f'{_e(location(i.file, i.line, r.root, i.col))}</span>: {_e(i.message)} '
                         f'<span class="small">(a break inside a loop makes Dynamo skip the whole frame)</span></div>'
                         + (f'<div class="small">hides:</div><ul class="uncounted">{hides}</ul>' if hides else "") + "</div>")
    return (f'<section id="skipped"><h2>Skipped frames <span class="small">{s.skipped_frames}: they ran in eager'
            f'</span></h2>{"".join(items)}</section>')


def _next(r: Report) -> str:
    if not r.next_steps:
        return ""
    items = []
    for step in r.next_steps:
        head, _, rest = step.partition("\n")
        items.append(f"<li>{_e(head)}" + (f'<pre class="src">{_e(rest)}</pre>' if rest else "") + "</li>")
    return f'<section id="next"><h2>Next steps</h2><ul>{"".join(items)}</ul></section>'


def _issues(r: Report) -> str:
    s = r.summary
    if s is None or not s.issues:
        return ""
    out = [f'<section id="issues"><h2>Issues <span class="small">{s.issues} ({s.issues_confirmed} confirmed, '
           f'{s.issues_dynamic} dynamic only, {s.issues_potential} potential, {s.issues_unreached} never traced), '
           f'{s.fan_out} break occurrences</span></h2>']
    for rule, count in s.issue_rules.items():
        group = [i for i in r.issues if i.rule == rule]
        if not group:  # a summary out of step with the report: show what is there
            continue
        out.append(f'<h3><span class="rule">{_e(rule)}</span><span class="cat">{_e(group[0].category)} · '
                   f'{count} issue{"s" if count != 1 else ""}</span></h3>')
        for i in group:
            flags = f' <span class="badge {_e(i.status)}">{_e(i.status)}</span>'
            if i.breaks and not i.counted:
                flags += ' <span class="badge uncounted">not counted by explain</span>'
            if mode_note(i):
                flags += f' <span class="badge uncounted">{_e(mode_note(i))}</span>'
            occ = f' <span class="badge">×{i.fan_out}</span>' if i.fan_out > 1 else ""
            said = i.said
            ids = " · ".join(_e(x) for x in (said.gb_type, said.registry_id) if x)
            hidden = ""
            if i.hidden_by is not None and i.hidden_by < len(r.issues):
                cause = r.issues[i.hidden_by]
                hidden = (f'<div class="why">Never traced: its frame ran in eager because of <span class="rule">'
                          f'{_e(cause.rule)}</span> at {_e(location(cause.file, cause.line, r.root))}</div>')
            fix = {"safe": " (mend fix)", "unsafe": " (mend fix --unsafe-fixes)"}.get(i.fix or "", "")
            out.append(f'<div class="card issue" data-rule="{_e(i.rule)}"><div><span class="loc">'
                       f'{_e(location(i.file, i.line, r.root, i.col))}</span>'
                       f'{" in <code>" + _e(i.function) + "</code>" if i.function else ""}{occ}{flags}'
                       f'{" <span class=small>also " + _e(", ".join(i.also)) + "</span>" if i.also else ""}</div>'
                       f'<div class="why">{_e(i.message)}</div>'
                       + "".join(f'<div class="why"><b>Made Dynamo skip a frame:</b> {_e(skipped_sentence(f, r.root))}</div>'
                                 for f in i.skipped) + hidden
                       + (f'<div class="small">targets {", ".join("<code>" + _e(t) + "</code>" for t in i.targets)}'
                          f'{" · " + ids if ids else ""}</div>' if i.targets else "")
                       + _source(i.line, i.source_line, i.col, i.end_col if i.end_line in (None, i.line) else None)
                       + (f'<div class="why"><b>{i.said_by}:</b> {_e(said.reason)}</div>'
                          if said.reason else "")
                       + (f'<div class="why">{_e(said.explanation)}</div>' if said.explanation else "")
                       + "".join(f'<div class="hint">{_e(h)}</div>' for h in said.hints)
                       + (f'<div class="hint"><code>{_e(i.fix_hint)}</code>{_e(fix)}</div>' if i.fix_hint else "")
                       + ('<div class="small">stack: ' + " → ".join(
                           f"<code>{_e(fr.function)}</code> ({_e(location(fr.file, fr.line, r.root))})" for fr in said.stack)
                          + "</div>" if len(said.stack) > 1 else "")
                       + "</div>")
    out.append("</section>")
    return "".join(out)


def _fixes(r: Report) -> str:
    if not r.fixes and not r.fix_targets:
        return ""
    out = ['<section id="fixes"><h2>Fixes</h2>']
    for f in r.fixes:
        out.append(f'<div class="card fix"><div><span class="badge {_e(f.status)}">{_e(f.status)}</span> '
                   f'<span class="rule">{_e(f.rule)}</span> <span class="loc">{_e(location(f.file, f.line, r.root))}</span>'
                   f'{" in <code>" + _e(f.function) + "</code>" if f.function else ""}</div>'
                   + (f'<div class="why">{_e(f.reason)}</div>' if f.reason else "")
                   + (f'<div class="small">checked: {_e(", ".join(f.checks))}</div>' if f.checks else "")
                   + "".join(f'<div class="small">proof lacks: {_e(x)}</div>' for x in f.partial)
                   + "".join(f'<div class="small">not checked: {_e(x)}</div>' for x in ([] if f.partial else f.skipped_checks))
                   + (f'<div class="small">import root <code>{_e(f.import_root)}</code></div>' if f.import_root else "")
                   + (_diff(f.diff) if f.diff else "")
                   + (f'<pre class="src">{_e(f.advice)}</pre>' if f.advice else "") + "</div>")
    if r.fix_targets:
        rows = [[f"<code>{_e(t.name)}</code>", _e(t.breaks_before), _e(t.breaks_after),
                 "" if t.outputs_equal is None else ('<span class="badge ok">yes</span>' if t.outputs_equal
                                                     else '<span class="badge error">no</span>'),
                 "<br>".join(_e(x) for x in t.remaining), "<br>".join(_e(x) for x in t.unexercised_branches),
                 "<br>".join((f'<span class="err">{_e(cost_text(c))}</span>' if c.verdict == SLOWER else _e(cost_text(c)))
                             for c in t.costs),
                 f'<span class="err">{_e(t.error)}</span>' if t.error else ""] for t in r.fix_targets]
        out.append("<h3>Re-traced with every verified fix</h3>" + _table(
            [("target", False), ("breaks before", True), ("after", True), ("outputs equal", False),
             ("remaining", False), ("never exercised", False), ("cost", False), ("error", False)], rows))
    out.append("</section>")
    return "".join(out)


_UNSTABLE = f' <span class="badge advice" title="{_e(UNSTABLE_NOTE)}">unstable</span>'


def _bench(r: Report) -> str:
    if not r.bench:
        return ""
    out = ['<section id="bench"><h2>Benchmark</h2><div class="legend">' + "".join(
        f'<span><i style="background:{c}"></i>{a}</span>' for a, c in ARM_COLORS.items()) + "</div>"]
    for target in dict.fromkeys(b.target for b in r.bench):
        rows = [b for b in r.bench if b.target == target]
        ratios = [x for x in r.ratios if x.target == target]
        out.append(f'<div class="card bench"><div class="target-name">{_e(target)}</div>'
                   f'<div class="small">median steady-state time per call, {_e(rows[0].device)}, mode {_e(rows[0].mode)}</div>'
                   + _bench_chart(target, rows))
        if ratios:
            out.append('<div class="figures">' + " · ".join(
                f"{_e(x.name)} <b>{_e(_opt(x.value, '{:.3f}×') or 'n/a')}</b>{_UNSTABLE if x.unstable else ''}"
                + (' <span class="badge regresses">slower</span>' if x.slower else "")
                for x in ratios) + "</div>")
        out.append("</div>")
    rows = [[f"<code>{_e(b.target)}</code>", _e(b.arm), _e(bench_setting(b)), _opt(b.cold_s, "{:.3f}"),
             _opt(b.median_ms, "{:.3f}") + (_UNSTABLE if b.unstable else ""), _opt(b.iqr_ms, "{:.3f}"), _e(_opt(b.graph_count)), _e(_opt(b.break_count)),
             _e(_opt(b.kernel_count)), _e(b.backend or ""), _opt(b.peak_mem_mb, "{:.1f}"),
             f'<span class="badge advice" title="{_e(b.error)}">skipped</span>' if b.skipped else
             f'<span class="err" title="{_e(b.error)}">error</span>' if b.error else
             "" if b.outputs_match is None else ("match" if b.outputs_match else
                                                 f'<span class="err" title="{_e(b.mismatch)}">differ</span>')]
            for b in r.bench]
    out.append(_table([("target", False), ("arm", False), ("device/mode", False), ("cold s", True),
                       ("median ms", True), ("IQR ms", True), ("graphs", True), ("breaks", True), ("kernels", True),
                       ("backend", False), ("peak MB", True), ("outputs", False)], rows))
    if any(b.unstable for b in r.bench):
        out.append(f'<p class="small">{_e(UNSTABLE_NOTE)}</p>')
    out.append("</section>")
    return "".join(out)


def _check(r: Report) -> str:
    c = r.check
    if c is None:
        return ""
    items = [f'<li><span class="badge error">failed target</span> {_e(x)}</li>' for x in c.failed_targets]
    items += [f'<li><span class="badge new">new</span> <span class="badge">{_e(e.origin)}{" " + _e(e.run_mode) if e.run_mode not in (None, "eval") else ""}</span> <span class="rule">{_e(e.rule)}</span> '
             f'<span class="loc">{_e(location(e.file, e.line, r.root, e.col))}</span> in <code>{_e(e.function)}</code>: '
             f'{_e(e.message)} <code>{_e(e.source_line or e.source)}</code>'
             + (f' <span class="hint">{_e(e.fix_hint)}</span>' if e.fix_hint else "") + "</li>" for e in c.new]
    items += [f'<li><span class="badge stale">stale</span> <span class="rule">{_e(e.rule)}</span> '
              f'<code>{_e(rel(e.file, r.root))}</code> in <code>{_e(e.function)}</code>: <code>{_e(e.source)}</code>'
              f'{" ×" + str(e.count) if e.count != 1 else ""}</li>' for e in c.stale]
    return (f'<section id="check"><h2>Check against <code>{_e(c.baseline)}</code></h2>'
            f'<p>{len(c.new)} new · {len(c.stale)} stale · {c.known} known{" · baseline updated" if c.updated else ""}</p><ul>{"".join(items)}</ul></section>')


def _errors(r: Report) -> str:
    if not r.errors:
        return ""
    items = "".join(f'<li><code>{_e(rel(e.file, r.root))}</code>{" (" + _e(e.target) + ")" if e.target else ""}: '
                    f'<span class="err">{_e(e.message)}</span></li>' for e in r.errors)
    return f'<section id="errors"><h2>Errors</h2><p class="small">The run went on without these.</p><ul>{items}</ul></section>'


def render_html(r: Report) -> str:
    versions = " · ".join(x for x in (f"graphmend {r.graphmend_version or '?'}",
                                      f"torch {r.torch_version}" if r.torch_version else "",
                                      f"Python {r.python_version}" if r.python_version else "", r.platform,
                                      f"mode {run_setting(r)}" if r.targets or r.bench else "") if x)
    body = "".join([
        f"<header><h1>graphmend report: <code>mend {_e(r.command)}</code></h1>",
        f'<div class="meta">{_e(versions)}{" · root <code>" + _e(r.root) + "</code>" if r.root else ""} · '
        f"{r.files_scanned} files scanned</div>{_summary(r)}</header>",
        _skipped(r), _next(r), _targets(r), _issues(r), _fixes(r), _bench(r), _check(r), _errors(r),
        f'<footer>schema {_e(r.schema_version)} · generated by graphmend</footer>',
    ])
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>graphmend report: mend {_e(r.command)}</title><style>{CSS}</style></head>"
            f"<body><main>{body}</main></body></html>\n")
