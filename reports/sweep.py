"""``mend sweep``'s report: text, JSON, Markdown and a self-contained HTML dashboard, over a
``SweepReport`` only. Every figure is the stage's (graphmend.sweep.stage); the renderers
count nothing, they lay out what the report holds."""

from __future__ import annotations

from typing import Optional

from graphmend.core.tables import SWEEP_BREAKS, SWEEP_CLEAN, SWEEP_FAILED, SWEEP_NOT_BUILT, SweepReport
from reports.html import CSS, _e, _table
from reports.markdown import _cell, _code

SWEEP_FORMATS = ("text", "json", "md", "html")
STATUSES = (SWEEP_CLEAN, SWEEP_BREAKS, SWEEP_FAILED, SWEEP_NOT_BUILT)
COLORS = {SWEEP_CLEAN: "#2f9e6e", SWEEP_BREAKS: "#d6452f", SWEEP_FAILED: "#c98a12", SWEEP_NOT_BUILT: "#8a94a6"}
TOP = 10
FIX_WORDS = {"safe": "mend fix", "unsafe": "--unsafe-fixes", "advice": "advice only", "none": "no rule"}


def _fix_word(c) -> str:
    """A root cause's fix, and where a planned rewrite was not kept, verification's verdict."""
    word = FIX_WORDS.get(c.fix, c.fix)
    return f"{word}, not kept: {c.verdict}" if c.verdict else word


def render_sweep(r: SweepReport, fmt: str) -> str:
    if fmt == "json":
        return r.to_json()
    if fmt == "md":
        return render_sweep_md(r)
    if fmt == "html":
        return render_sweep_html(r)
    if fmt == "text":
        return render_sweep_text(r)
    raise ValueError(f"unknown --format {fmt!r}; choose one of {', '.join(SWEEP_FORMATS)}")


def render_plan(library: str, version: str, selection: str, listing: list[dict], skipped: dict[str, str],
                fmt: str) -> str:
    """``mend sweep --list``: what a sweep would run, one model a line (``listing`` as the stage's
    ``Plan.listing`` gives it), and the library's models left out with why."""
    if fmt == "json":
        import json

        return json.dumps({"library": library, "library_version": version, "selection": selection,
                           "models": listing, "skipped": skipped}, indent=2) + "\n"
    wide = max((len(e["model"]) for e in listing), default=5)
    lines = [f"mend sweep {library} {version}: {len(listing)} models, {selection}"]
    lines += [f"{e['library']}  {e['model']:<{wide}}  {e['modality'] or '-':<11}  {','.join(e['modes'])}"
              for e in listing]
    lines += [f"skipped {name}: {why}" for name, why in skipped.items()]
    return "\n".join(lines) + "\n"


def _title(r: SweepReport) -> str:
    return f"mend sweep {r.library} {r.library_version}".rstrip()


def _setting(r: SweepReport) -> str:
    bits = [f"torch {r.torch_version}" if r.torch_version else "", f"Python {r.python_version}" if r.python_version else "",
            r.platform, f"{r.cpus} CPUs, --jobs {r.jobs}" + (f" on {r.executor}" if r.executor != "local" else "")
            if r.cpus else "", f"modes {','.join(r.run_modes)}", "compiled with fullgraph=True" if r.fullgraph else ""]
    return " · ".join(b for b in bits if b)


def _mode_line(r: SweepReport, mode: str) -> str:
    by = r.totals.by_mode.get(mode, {})
    return ", ".join(f"{by.get(s, 0)} {s}" for s in STATUSES)


def _headline(r: SweepReport) -> list[str]:
    t = r.totals
    lines = [f"{t.enumerated} architectures ({r.selection}); {t.built} built, {t.not_built} not built"
             + (f"; {t.skipped} more model types left out (not text)" if t.skipped else "") + "."]
    for mode in r.run_modes:
        lines.append(f"{mode}: {_mode_line(r, mode)}.")
    lines.append(f"{t.causes} root causes behind {t.breaks} breaks: {t.causes_safe} with a safe fix "
                 f"({t.breaks_fixable} breaks), {t.causes_unsafe} with an --unsafe-fixes one "
                 f"({t.breaks_fixable_unsafe} breaks).")
    lines.append(f"{t.runs} runs (architecture x mode) in {t.wall_s:.0f} s: {t.runs_per_hour:g} per hour.")
    if r.baseline is not None:
        lines.append(f"Against {r.baseline}: {t.regressions} regressions, {t.improvements} improvements.")
    return lines


# the population table (mend sweep --fix): (heading, PopulationRow field)
POPULATION = (("library", "library"), ("modality", "modality"), ("models", "enumerated"), ("built", "built"),
              ("pairs", "pairs"), ("breaking", "breaking"), ("breaks", "breaks"), ("explain", "graph_breaks"),
              ("removed", "removed"), ("removed %", "removed_pct"), ("to zero", "zeroed"),
              ("partial removed", "removed_partial"), ("partial to zero", "zeroed_partial"),
              ("not kept", "removed_not_kept"), ("fix errors", "fix_errors"), ("recompiling", "recompiling"),
              ("recompiles", "recompiles"), ("located", "recompiles_located"),
              ("after a break", "recompiles_after_break"), ("recompiles removed", "recompiles_removed"))
POPULATION_NOTE = ("pairs: (model, mode) pairs that ran; breaking: those that break; breaks: Dynamo's logged breaks "
                   "over them (explain: torch._dynamo.explain's count). Then mend fix (verification only, nothing "
                   "written) over every breaking pair: removed / to zero: logged breaks gone and pairs left with "
                   "none where every rewrite applied is verified (what mend fix --write writes); partial: a "
                   "partially verified rewrite took part (a skipped check or a caveat); not kept: one mend fix "
                   "would not write. Neither of the last two counts as removed. recompiling: pairs that recompiled over "
                   "their calls of other sizes (the first size change automatic dynamic shapes expects left out); "
                   "located: recompiles placed at a source line (the user line whose value the guard holds, or, for "
                   "a guard on a tensor argument's size or rank, the function that takes it); after a break: "
                   "recompiles of a frame Dynamo compiled on its own only because a graph break split a frame that "
                   "called it (a resume function, a callee it could not inline); recompiles removed: "
                   "those gone over mend fix's own calls where every rewrite applied is verified (mend fix runs over "
                   "the pairs that recompile as well as those that break).")


def _population(r: SweepReport) -> list[list[str]]:
    return [[str(getattr(p, f)) for _, f in POPULATION] for p in r.population]


def _fix_cell(row) -> str:
    if not row.fix:
        return ""
    if row.breaks_after is None:
        return f"{row.fix}: {row.fix_why}" if row.fix_why else row.fix
    recompiles = f"; {row.recompiles_removed} recompile(s) removed" if row.recompiles_removed else ""
    return f"{row.fix}: {row.breaks} -> {row.breaks_after}{recompiles}"


def _recompile_cell(row) -> str:
    if not row.recompiles:
        return ""
    return (f"{row.recompiles} ({row.recompiles_located} located"
            + ("; the recompile limit reached" if row.recompile_limit else "") + ")")


def _models(c) -> str:
    shown = ", ".join(c.models[:8])
    return shown + (f" and {len(c.models) - 8} more" if len(c.models) > 8 else "")


def _recompiles(c) -> str:
    return (f"{c.recompiles} recompile{'s' if c.recompiles != 1 else ''} ({c.located} located)"
            + (", recompile limit reached" if c.limit else ""))


def guarded_value(c) -> str:
    """What a recompile cause's guard holds, in words: the guarded line or expression, else
    Dynamo's guard in the function that recompiled."""
    return c.what or f"{c.reason} (in {c.function})"


def _sites(c) -> str:
    shown = ", ".join(c.sites[:3])
    return shown + (f" (+{len(c.sites) - 3} copies)" if len(c.sites) > 3 else "")


def render_sweep_text(r: SweepReport) -> str:
    out = [_title(r), _setting(r), ""] + _headline(r)
    if r.population:
        from rich.console import Console
        from rich.table import Table

        from rich import box

        table = Table(box=box.SIMPLE_HEAD, title=f"Population table (mend fix took {r.fix_wall_s:.0f} s of it)",
                      title_justify="left")
        for i, (head, _) in enumerate(POPULATION):
            table.add_column(head, justify="left" if i < 2 else "right", overflow="fold")
        for cells in _population(r):
            table.add_row(*cells)
        console = Console(width=200, record=True, file=__import__("io").StringIO(), color_system=None)
        console.print(table)
        out += [""] + [line.rstrip() for line in console.export_text().rstrip().splitlines()] + [POPULATION_NOTE]
    if r.causes:
        out += ["", "Top root causes (one line of code, however many models and copies hit it):"]
        for i, c in enumerate(r.causes[:TOP], 1):
            n, b = len(c.models), c.breaks
            out.append(f"{i:3}. {c.rule} {n} model{'s' if n != 1 else ''}, {b} break{'s' if b != 1 else ''}"
                       + (f" ({c.removed} removed)" if r.population else "") + f", fan-out {c.fan_out}"
                       f" [{_fix_word(c)}]  {_sites(c)}")
            out.append(f"     {c.source or c.reason}")
    broken = [row for row in r.rows if row.status == SWEEP_BREAKS]
    if broken:
        out += ["", "Breaking:"]
        for row in broken:
            out.append(f"  {row.library} {row.modality or '-'} {row.model} [{row.run_mode}]: {row.graph_count} graphs, "
                       f"{row.graph_break_count} counted, {row.breaks} listed; {', '.join(row.where)}"
                       + (f"; fix {_fix_cell(row)}" if row.fix else ""))
    recompiling = [row for row in r.rows if row.recompiles]
    if recompiling:
        out += ["", "Recompiling:"]
        out += [f"  {row.library} {row.modality or '-'} {row.model} [{row.run_mode}]: {_recompile_cell(row)}"
                for row in recompiling]
    if r.recompile_causes:
        out += ["", "Top recompile causes (the value a failed guard holds, however many models hit it):"]
        for i, c in enumerate(r.recompile_causes[:TOP], 1):
            n = len(c.models)
            out.append(f"{i:3}. {c.rule} {n} model{'s' if n != 1 else ''}, {_recompiles(c)}  {_sites(c)}")
            out.append(f"     {guarded_value(c)}")
    failed = [row for row in r.rows if row.status in (SWEEP_FAILED, SWEEP_NOT_BUILT)]
    if failed:
        out += ["", "Not run:"]
        out += [f"  {row.library} {row.modality or '-'} {row.model} [{row.run_mode}]: {row.status}: {row.why}"
                for row in failed]
    for title, changes in (("Regressions", r.regressions), ("Improvements", r.improvements)):
        if changes:
            out += ["", f"{title}:"]
            out += [f"  {c.model} [{c.run_mode}] {c.kind}: {c.before} -> {c.after}" for c in changes]
    return "\n".join(out) + "\n"


def render_sweep_md(r: SweepReport) -> str:
    out = [f"# {_cell(_title(r))}", "", _cell(_setting(r)), ""]
    out += [_cell(line) for line in _headline(r)]
    if r.population:
        out += ["", "## Population", "", "| " + " | ".join(h for h, _ in POPULATION) + " |",
                "|---|---|" + "---:|" * (len(POPULATION) - 2)]
        out += ["| " + " | ".join(_cell(c) for c in cells) + " |" for cells in _population(r)]
        out += ["", _cell(POPULATION_NOTE) + f" mend fix took {r.fix_wall_s:.0f} s."]
    out += ["", "## By mode", "", "| mode | " + " | ".join(STATUSES) + " |", "|---|" + "---:|" * len(STATUSES)]
    for mode in r.run_modes:
        by = r.totals.by_mode.get(mode, {})
        out.append(f"| {mode} | " + " | ".join(str(by.get(s, 0)) for s in STATUSES) + " |")
    if r.causes:
        out += ["", "## Root causes", "", _cell(r.fix_note), "",
                "| # | rule | models | breaks | " + ("removed | " if r.population else "")
                + "fan-out | fix | line | sites | models hit |",
                "|---:|---|---:|---:|" + ("---:|" if r.population else "") + "---:|---|---|---|---|"]
        for i, c in enumerate(r.causes, 1):
            out.append(f"| {i} | {c.rule} | {len(c.models)} | {c.breaks} | " + (f"{c.removed} | " if r.population else "")
                       + f"{c.fan_out} | {_fix_word(c)} | "
                       f"{_code(c.source) if c.source else _cell(c.reason)} | {_cell(_sites(c))} | {_cell(_models(c))} |")
    if r.recompile_causes:
        out += ["", "## Recompile causes", "",
                "| # | rule | models | recompiles | located | limit reached | guarded value | sites | models hit |",
                "|---:|---|---:|---:|---:|---|---|---|---|"]
        for i, c in enumerate(r.recompile_causes, 1):
            out.append(f"| {i} | {c.rule} | {len(c.models)} | {c.recompiles} | {c.located} | "
                       f"{'yes' if c.limit else 'no'} | {_code(c.what) if c.what else _cell(guarded_value(c))} | "
                       f"{_cell(_sites(c))} | {_cell(_models(c))} |")
    if r.regressions or r.improvements:
        for title, changes in (("Regressions", r.regressions), ("Improvements", r.improvements)):
            out += ["", f"## {title} against {_cell(r.baseline or '')}", ""]
            if not changes:
                out.append("None.")
                continue
            out += ["| model | mode | change | before | now |", "|---|---|---|---|---|"]
            out += [f"| {_cell(c.model)} | {c.run_mode} | {c.kind} | {_cell(c.before)} | {_cell(c.after)} |"
                    for c in changes]
    out += ["", "## Architectures", "",
            "| library | modality | model | mode | status | graphs | counted breaks | listed breaks | skipped frames | "
            "recompiles | causes | safe fix | mend fix | where / why |",
            "|---|---|---|---|---|---:|---:|---:|---:|---|---|---:|---|---|"]
    for row in r.rows:
        detail = row.why if row.status in (SWEEP_FAILED, SWEEP_NOT_BUILT) else ", ".join(row.where)
        out.append(f"| {_cell(row.library)} | {_cell(row.modality)} | {_cell(row.model)} | {row.run_mode} | "
                   f"{row.status} | {row.graph_count} | {row.graph_break_count} | "
                   f"{row.breaks} | {row.frames_skipped} | {_cell(_recompile_cell(row))} | "
                   f"{', '.join(str(i + 1) for i in row.causes)} | {row.fixable} | "
                   f"{_cell(_fix_cell(row))} | {_cell(detail)} |")
    if r.skipped:
        out += ["", f"## Left out by the enumeration ({len(r.skipped)})", ""]
        out += [f"- {_cell(m)}: {_cell(why)}" for m, why in r.skipped.items()]
    if r.command:
        out += ["", f"Command: {_code(r.command)}"]
    return "\n".join(out) + "\n"


def _mode_bar(r: SweepReport, mode: str) -> str:
    """One stacked bar: the architectures of one mode by status (widths from the totals)."""
    by = r.totals.by_mode.get(mode, {})
    total = sum(by.get(s, 0) for s in STATUSES) or 1
    width, x, parts = 900, 0.0, []
    for s in STATUSES:
        n = by.get(s, 0)
        if not n:
            continue
        w = width * n / total
        parts.append(f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="22" fill="{COLORS[s]}">'
                     f"<title>{_e(s)}: {n}</title></rect>")
        if w > 28:
            parts.append(f'<text x="{x + 6:.1f}" y="15" fill="#fff" font-size="12" font-weight="700">{n}</text>')
        x += w
    return (f'<h3>{_e(mode)}</h3><svg viewBox="0 0 {width} 22" role="img" aria-label="{_e(mode)}: '
            f'{_e(_mode_line(r, mode))}">' + "".join(parts) + "</svg>")


def _legend() -> str:
    return '<div class="legend">' + "".join(f'<span><i style="background:{COLORS[s]}"></i>{_e(s)}</span>'
                                            for s in STATUSES) + "</div>"


def _badge(status: str) -> str:
    cls = {SWEEP_CLEAN: "ok", SWEEP_BREAKS: "error", SWEEP_FAILED: "advice", SWEEP_NOT_BUILT: ""}[status]
    return f'<span class="badge {cls}">{_e(status)}</span>'


def render_sweep_html(r: SweepReport) -> str:
    t = r.totals
    stats = [(t.enumerated, "architectures", ""), (t.built, "built", ""),
             (sum(m.get(SWEEP_BREAKS, 0) for m in t.by_mode.values()), "model x mode runs that break",
              "bad" if any(m.get(SWEEP_BREAKS) for m in t.by_mode.values()) else "good"),
             (t.causes, f"root causes ({t.breaks} breaks)", "bad" if t.causes else "good"),
             (t.causes_safe, f"with a safe fix ({t.breaks_fixable} breaks)", "good" if t.causes_safe else ""),
             (f"{t.runs_per_hour:g}", "runs per hour", "")]
    if r.population:
        total = r.population[-1]
        stats.append((total.removed, f"of {total.breaks} breaks removed by verified fixes ({total.removed_pct:g} %)",
                      "good" if total.removed else ""))
    if r.baseline is not None:
        stats.append((t.regressions, "regressions", "bad" if t.regressions else "good"))
    parts = [f"<header><h1>{_e(_title(r))}</h1><div class=\"meta\">{_e(_setting(r))}</div>",
             '<div class="cards">' + "".join(f'<div class="stat {cls}"><b>{_e(v)}</b><span>{_e(k)}</span></div>'
                                             for v, k, cls in stats) + "</div></header>",
             "<h2>Summary</h2>" + "".join(f"<p>{_e(line)}</p>" for line in _headline(r)),
             "<h2>By mode</h2>" + _legend() + "".join(_mode_bar(r, m) for m in r.run_modes)]
    if r.population:
        parts.insert(3, "<h2>Population</h2>" + _table([(h, i >= 2) for i, (h, _) in enumerate(POPULATION)],
                                                       [[_e(c) for c in cells] for cells in _population(r)])
                     + f'<p class="small">{_e(POPULATION_NOTE)} mend fix took {_e(f"{r.fix_wall_s:.0f}")} s.</p>')
    for title, changes in (("Regressions", r.regressions), ("Improvements", r.improvements)):
        if changes:
            parts.append(f"<h2>{title} against <code>{_e(r.baseline)}</code></h2>" + _table(
                [("model", False), ("mode", False), ("change", False), ("before", False), ("now", False)],
                [[f"<code>{_e(c.model)}</code>", _e(c.run_mode), _e(c.kind), _e(c.before), _e(c.after)]
                 for c in changes]))
    if r.causes:
        parts.append(f"<h2>Root causes</h2><p class=\"small\">{_e(r.fix_note)}</p>" + _table(
            [("#", True), ("rule", False), ("models", True), ("breaks", True)] + ([("removed", True)] if r.population else [])
            + [("fan-out", True), ("fix", False), ("line", False), ("sites", False), ("models hit", False)],
            [[str(i), f'<span class="rule">{_e(c.rule)}</span>', str(len(c.models)), str(c.breaks)]
             + ([str(c.removed)] if r.population else []) + [str(c.fan_out), _e(_fix_word(c)),
              f"<code>{_e(c.source)}</code>" if c.source else _e(c.reason), _e(_sites(c)), _e(_models(c))]
             for i, c in enumerate(r.causes, 1)]))
    if r.recompile_causes:
        parts.append("<h2>Recompile causes</h2>" + _table(
            [("#", True), ("rule", False), ("models", True), ("recompiles", True), ("located", True),
             ("limit reached", False), ("guarded value", False), ("sites", False), ("models hit", False)],
            [[str(i), f'<span class="rule">{_e(c.rule)}</span>', str(len(c.models)), str(c.recompiles),
              str(c.located), "yes" if c.limit else "no",
              f"<code>{_e(c.what)}</code>" if c.what else _e(guarded_value(c)), _e(_sites(c)), _e(_models(c))]
             for i, c in enumerate(r.recompile_causes, 1)]))
    parts.append("<h2>Architectures</h2>" + _table(
        [("library", False), ("modality", False), ("model", False), ("mode", False), ("status", False),
         ("graphs", True), ("counted", True), ("listed", True), ("skipped frames", True), ("recompiles", False),
         ("causes", False),
         ("safe fix", True), ("mend fix", False), ("where / why", False)],
        [[_e(row.library), _e(row.modality), f"<code>{_e(row.model)}</code>", _e(row.run_mode), _badge(row.status),
          str(row.graph_count), str(row.graph_break_count), str(row.breaks), str(row.frames_skipped),
          _e(_recompile_cell(row)), _e(", ".join(str(i + 1) for i in row.causes)), str(row.fixable), _e(_fix_cell(row)),
          _e(row.why if row.status in (SWEEP_FAILED, SWEEP_NOT_BUILT) else ", ".join(row.where))]
         for row in r.rows]))
    if r.skipped:
        parts.append(f"<h2>Left out by the enumeration ({len(r.skipped)})</h2><p class=\"small\">"
                     + _e("; ".join(f"{m}: {why}" for m, why in r.skipped.items())) + "</p>")
    footer: Optional[str] = f"<code>{_e(r.command)}</code> · " if r.command else ""
    parts.append(f"<footer>{footer}schema {_e(r.schema_version)} · generated by graphmend "
                 f"{_e(r.graphmend_version)}</footer>")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(_title(r))}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")
