"""The population page (docs/population.md): the population tables of ``mend sweep LIBRARY --fix``
reports, one per library, put together, with their total, and every root cause left after the
verified fixes ranked across libraries -- what the repair work takes next.

    python benchmarks/population_page.py benchmarks/results/population-*.json -o docs/population.md \
        [--amend LATER.json ...]

``--amend``: a later ``mend sweep LIBRARY --only ... --fix`` report of the same library, torch and
library version (the breaking models again, with a longer --timeout, say) whose rows replace
those models' rows; it must hold every model the whole report saw break, so that its root
causes are the library's. Several for one library (each ``--only`` some of its models) count as
one: their rows, and their root causes merged where one rule, reason and line are one cause.

Each input is a sweep report's JSON (``mend sweep LIBRARY --fix -f json``), gzipped or not. Nothing is measured
here: every figure is a report's; the page only adds them up and orders the causes by the
breaks they keep (then by the models they reach).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from graphmend.core.tables import PopulationRow, SweepReport  # noqa: E402
from graphmend.core.sources import read_report_text, write_atomic  # noqa: E402
from graphmend.sweep.population import ALL  # noqa: E402
from reports.markdown import _cell, _code  # noqa: E402
from reports.sweep import POPULATION, POPULATION_NOTE, guarded_value  # noqa: E402

SUMMED = [f.name for f in fields(PopulationRow) if f.type in ("int", int)]


def library_row(r: SweepReport):
    """The report's population row for the whole library, or None."""
    return next((p for p in r.population if p.modality == ALL), None)


def _sites(c) -> str:
    return ", ".join(c.sites[:2]) + (f" (+{len(c.sites) - 2})" if len(c.sites) > 2 else "")


def total(reports: list[SweepReport]) -> PopulationRow:
    """Every library's total row added up, field by field."""
    out = PopulationRow(library="every library", modality=ALL)
    for r in reports:
        lib = library_row(r)
        for name in SUMMED if lib is not None else ():
            setattr(out, name, getattr(out, name) + getattr(lib, name))
    out.removed_pct = round(100 * out.removed / out.breaks, 1) if out.breaks else 0.0
    return out


UNMEASURED = ("recompiles_after_break", "recompiles_removed")  # what such a report cannot count


def measured_recompiles(report: SweepReport) -> bool:
    """Whether ``report`` re-traced after mend fix over the calls of other sizes (and read
    Dynamo's frame ids): a report made before counts neither what follows a break nor what the
    fixes removed."""
    return any(row.recompiles_after is not None for row in report.rows)


def recompiles_headline(reports: list[SweepReport]) -> str:
    """The recompiles that follow a break and those verified fixes remove, over the reports
    that measured them."""
    measured = [r for r in reports if measured_recompiles(r)]
    if not measured:
        return "No report here measured the recompiles left after `mend fix`."
    rows = [library_row(r) for r in measured if library_row(r) is not None]
    n = sum(p.recompiles for p in rows)
    after, removed = sum(p.recompiles_after_break for p in rows), sum(p.recompiles_removed for p in rows)
    share = f" ({100 * removed / n:.1f} %)" if n else ""
    where = "every library" if len(measured) == len(reports) else ", ".join(r.library for r in measured)
    return (f"**Recompiles, on {where} (the reports that tell a recompile's frame and re-trace after mend fix over "
            f"the same calls): {after} of {n} are in a frame Dynamo compiled only because a graph break split a "
            f"frame that called it; {removed} of {n}{share} are removed by verified fixes.**")


def ranked(reports: list[SweepReport]) -> list[tuple[SweepReport, object]]:
    """(report, cause) for every root cause that keeps a break, most breaks kept first."""
    left = [(r, c) for r in reports for c in r.causes if c.breaks > c.removed]
    return sorted(left, key=lambda rc: (-(rc[1].breaks - rc[1].removed), -len(rc[1].models), rc[0].library,
                                        rc[1].rule))


def why(report: SweepReport, cause) -> str:
    """Why a cause keeps its breaks, as its report says it. A report whose causes carry their
    rule's fixability rather than the planner's verdict (its fix note says "Static") says only
    that the rule has a rewrite."""
    if cause.fix in ("safe", "unsafe") and report.fix_note.startswith("Static"):
        return "its rule has a rewrite (the report holds no planner verdict)"
    if cause.fix in ("safe", "unsafe"):
        planned = "planned" + (" (--unsafe-fixes)" if cause.fix == "unsafe" else "")
        return f"{planned}, not kept: {cause.verdict}"[:240] if cause.verdict else planned
    if cause.fix == "none":
        return "no rule"
    if not cause.fix_why:
        from rewrites.rules import get_rule

        rule = get_rule(cause.rule)
        if rule is not None and not rule.fixable:
            return f"{rule.code} has no rewrite (advice only: docs/rules/{rule.code}.md)"
    return " ".join((cause.fix_why or "no rewrite is planned at the line").split())[:200]


_FIX_RANK = ("safe", "unsafe", "advice", "none")


def combine(parts: list[SweepReport]) -> SweepReport:
    """Later sweeps of one library's models, each ``--only`` some of them, as one report: their
    rows, and their root causes merged where one rule, Dynamo reason and line are one cause
    (sites, models and modes joined, counts added; each row's cause indexes follow)."""
    from dataclasses import replace

    first = parts[0]
    for part in parts[1:]:
        for name in ("library", "library_version", "torch_version"):
            if getattr(part, name) != getattr(first, name):
                raise ValueError(f"--amend: {name} {getattr(part, name)!r} is not {getattr(first, name)!r} "
                                 "of the other later run")
    causes: list = []
    recompiles: list = []
    at: dict[tuple, int] = {}
    rows = []
    for part in parts:
        index = []
        for c in part.causes:
            key = (c.rule, c.reason, c.source)
            if key not in at:
                at[key] = len(causes)
                causes.append(replace(c, sites=list(c.sites), models=list(c.models), modes=list(c.modes)))
            else:
                m = causes[at[key]]
                for name in ("sites", "models", "modes"):
                    getattr(m, name).extend(v for v in getattr(c, name) if v not in getattr(m, name))
                for name in ("breaks", "fan_out", "frames_skipped", "removed"):
                    setattr(m, name, getattr(m, name) + getattr(c, name))
                m.counted = m.counted or c.counted
                m.fix = min(m.fix, c.fix, key=lambda f: _FIX_RANK.index(f) if f in _FIX_RANK else len(_FIX_RANK))
                m.fix_why = m.fix_why or c.fix_why
                m.verdict = m.verdict or c.verdict
            index.append(at[key])
        rows += [replace(r, causes=[index[i] for i in r.causes]) for r in part.rows]
        for c in part.recompile_causes:
            same = next((m for m in recompiles if (m.rule, m.what, m.reason, m.function) ==
                         (c.rule, c.what, c.reason, c.function)), None)
            if same is None:
                recompiles.append(replace(c, sites=list(c.sites), models=list(c.models), modes=list(c.modes)))
                continue
            for name in ("sites", "models", "modes"):
                getattr(same, name).extend(v for v in getattr(c, name) if v not in getattr(same, name))
            for name in ("recompiles", "located", "after_break"):
                setattr(same, name, getattr(same, name) + getattr(c, name))
            same.limit = same.limit or c.limit
    totals = replace(first.totals, wall_s=sum(p.totals.wall_s for p in parts))
    return replace(first, rows=rows, causes=causes, recompile_causes=recompiles, totals=totals,
                   fix_wall_s=sum(p.fix_wall_s for p in parts), command="; ".join(p.command for p in parts))


def amend(whole: SweepReport, later: SweepReport) -> SweepReport:
    """``whole`` with ``later``'s rows in place of those models' rows, the population table
    counted again from the rows, and ``later``'s root causes. Raises ValueError where the two do
    not describe one library and torch, or ``later`` misses a model ``whole`` saw break."""
    from dataclasses import replace

    from graphmend.sweep.population import population

    for field in ("library", "library_version", "torch_version"):
        if getattr(whole, field) != getattr(later, field):
            raise ValueError(f"--amend: {field} {getattr(later, field)!r} is not the report's "
                             f"{getattr(whole, field)!r}")
    redone = {r.model for r in later.rows}
    missing = sorted({m for c in whole.causes for m in c.models} - redone)
    if missing:
        raise ValueError(f"--amend: the later report lacks breaking model(s) {', '.join(missing)}")
    order = {m: i for i, m in enumerate(dict.fromkeys(r.model for r in whole.rows))}
    rows = [r for r in whole.rows if r.model not in redone] + list(later.rows)
    rows.sort(key=lambda r: (order.get(r.model, len(order)), r.model))
    note = (f"{len(redone)} models' rows from a later run ({later.totals.wall_s / 60:.0f} min, mend fix "
            f"{later.fix_wall_s / 60:.0f} min of it): {later.command}")
    # a whole report made before sweeps named recompile causes: the later run's, for its models
    recompiled = whole.recompile_causes or list(later.recompile_causes)
    return replace(whole, rows=rows, population=population(rows, whole.library), causes=list(later.causes),
                   recompile_causes=recompiled, selection=f"{whole.selection}; {note}")


def page(reports: list[SweepReport], names: list[str]) -> str:
    grand = total(reports)
    zero_share = f"{100 * grand.zeroed / grand.breaking:.1f} %" if grand.breaking else "-"
    out = ["# The population: what breaks, and what `mend fix` removes", "",
           "Every model class each library exports (built tiny from its config, random weights, inputs of its "
           "own modality), captured under TorchDynamo, then `mend fix` (verification only, nothing written) "
           "over every (model, mode) pair that breaks (or, in the reports that re-trace over the same calls, "
           "recompiles). Generated by `benchmarks/population_page.py` from the "
           "sweep reports below; nothing here is measured by hand.", "",
           f"**{grand.removed} of {grand.breaks} logged breaks ({grand.removed_pct:g} %) removed by verified "
           f"fixes; {grand.zeroed} of {grand.breaking} breaking pairs ({zero_share}) brought to zero; "
           f"{grand.recompiling} pairs recompile ({grand.recompiles} recompiles, {grand.recompiles_located} "
           "located to a source line).**", "", recompiles_headline(reports), "", "## Sources", ""]
    for r, name in zip(reports, names):
        out.append(f"- {_cell(r.library)} {_cell(r.library_version)} (torch {_cell(r.torch_version or '?')}, "
                   f"{r.cpus} CPUs, --jobs {r.jobs}, modes {','.join(r.run_modes)}; {r.totals.wall_s / 60:.0f} min, "
                   f"mend fix {r.fix_wall_s / 60:.0f} min of it): {_cell(r.selection)}; "
                   f"{len(r.skipped)} left out by the enumeration. `{name}`, from {_code(r.command)}")
    heads = [h for h, _ in POPULATION]
    out += ["", "## The population table", "", "| " + " | ".join(heads) + " |",
            "|---|---|" + "---:|" * (len(heads) - 2)]
    # a report made before sweeps told a recompile's frame and re-traced after mend fix counts neither
    unmeasured = {id(p) for r in reports if not measured_recompiles(r) for p in r.population}
    for p in [p for r in reports for p in r.population] + [grand]:
        cells = [_cell("–" if id(p) in unmeasured and f in UNMEASURED else str(getattr(p, f))) for _, f in POPULATION]
        if p is grand or p.modality == ALL:
            cells = [f"**{c}**" for c in cells]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", _cell(POPULATION_NOTE), "", "## What remains, ranked", "",
            "Every root cause (one line of code, however many models and copies hit it) that keeps a logged break "
            "after the verified fixes, by the breaks it keeps, then by the models it reaches. *why it stays*: "
            "the planner's reason where no rewrite is planned at the line (or that its rule has none), `planned` "
            "where one is (with, where "
            "verification kept a rewrite at one of its sites out, that rewrite's verdict; otherwise the rewrite "
            "was kept for some models and the rest still break, as `mend fix` of each model shows), `no rule` "
            "for a cause no rule explains yet.", "",
            "| # | library | rule | models | breaks | removed | kept | why it stays | line | sites |",
            "|---:|---|---|---:|---:|---:|---:|---|---|---|"]
    for i, (r, c) in enumerate(ranked(reports), 1):
        line = _code(c.source) if c.source else _cell(c.reason)
        out.append(f"| {i} | {_cell(r.library)} | {c.rule} | {len(c.models)} | {c.breaks} | {c.removed} | "
                   f"{c.breaks - c.removed} | {_cell(why(r, c))} | {line} | {_cell(_sites(c))} |")
    out += recompiles(reports)
    return "\n".join(out) + "\n"


def recompiles(reports: list[SweepReport]) -> list[str]:
    """Every recompile cause across libraries, most recompiles first; which reports hold none
    because they were made before sweeps named them."""
    rows = sorted(((r, c) for r in reports for c in r.recompile_causes),
                  key=lambda rc: (-rc[1].recompiles, -len(rc[1].models), rc[0].library, rc[1].rule))
    told = [(r, sum(c.recompiles for c in r.recompile_causes),
             getattr(library_row(r), "recompiles", 0)) for r in reports]
    older = [r.library for r, n, total in told if total and not n]
    partly = [f"{r.library} ({n} of its {total})" for r, n, total in told if 0 < n < total]
    out = ["", "## Recompiles, ranked", "",
           "Every cause of a recompile over the calls of other sizes (the first size change, which automatic "
           "dynamic shapes expects, left out): one guarded line or value, however many models and copies hit it, "
           "by the recompiles it makes. *after a break*: of them, those in a frame Dynamo compiled on its own "
           "only because a graph break split a frame that called it. *limit*: some model reached the recompile "
           "limit through it and ran in eager from then on."]
    if older:
        out += ["", f"Not broken down here (their reports predate recompile causes): {', '.join(older)}."]
    if partly:
        out += ["", "Broken down in part (a later run of some of its models holds the breakdown): "
                f"{', '.join(partly)}."]
    if rows:
        out += ["", "| # | library | rule | models | recompiles | located | after a break | limit | guarded value | "
                "sites |", "|---:|---|---|---:|---:|---:|---:|---|---|---|"]
    for i, (r, c) in enumerate(rows, 1):
        what = _code(c.what) if c.what else _cell(guarded_value(c))
        out.append(f"| {i} | {_cell(r.library)} | {c.rule} | {len(c.models)} | {c.recompiles} | {c.located} | "
                   f"{c.after_break if measured_recompiles(r) else '–'} | {'yes' if c.limit else 'no'} | {what} | "
                   f"{_cell(_sites(c))} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path, help="sweep reports (mend sweep LIBRARY --fix -f json)")
    ap.add_argument("-o", "--output", type=Path, help="the page (default: stdout)")
    ap.add_argument("--amend", type=Path, action="append", default=[],
                    help="a later sweep of some models of one of the libraries (see above)")
    args = ap.parse_args(argv)
    reports, names = [], []
    later = {}
    for path in args.amend:
        try:
            rep = SweepReport.from_json(read_report_text(path))
        except (OSError, ValueError) as exc:
            print(f"population_page: --amend {path}: {exc}", file=sys.stderr)
            return 2
        later.setdefault(rep.library, []).append((rep, path))
    for path in args.reports:
        try:
            rep = SweepReport.from_json(read_report_text(path))
            if rep.library in later:
                rep = amend(rep, combine([r for r, _ in later.pop(rep.library)]))
        except (OSError, ValueError) as exc:
            print(f"population_page: {path}: {exc}", file=sys.stderr)
            return 2
        if not rep.population:
            print(f"population_page: {path}: no population table (run mend sweep with --fix)", file=sys.stderr)
            return 2
        reports.append(rep)
        names.append(path.name)
    for parts in later.values():
        print(f"population_page: --amend {parts[0][1]}: no report of its library given", file=sys.stderr)
        return 2
    text = page(reports, names)
    if args.output:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
