"""The results page (docs/results.md), generated from the files in benchmarks/results: the
population tables of the ``mend sweep LIBRARY --fix`` reports with their total and every root
cause left after the verified fixes ranked across libraries, the time ``mend fix`` took on them,
the agreement with the public corpus sweep, the transformers build rate, the static scan's recall,
the breaks removed from programs written outside the repo, the saved bench reports and every cost
gate verdict.

    python -m benchmarks results_page -o docs/results.md
    python -m benchmarks results_page REPORT.json ... [--amend LATER.json ...] [--results DIR] -o OUT.md

Without reports, the population is the sweep reports named in ``SWEEPS`` (and ``AMEND``) in
``--results`` (default: benchmarks/results). ``--amend``: a later ``mend sweep LIBRARY --only ...
--fix`` report of the same library, torch and library version (the breaking models again, with a
longer --timeout, say) whose rows replace those models' rows; it must hold every model the whole
report saw break, so that its root causes are the library's. Several for one library (each
``--only`` some of its models) count as one: their rows, and their root causes merged where one
rule, reason and line are one cause.

Nothing is measured here: every figure is a result file's; the page only adds them up, orders
the causes by the breaks they keep (then by the models they reach) and lays the tables out.
How each file is made: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from graphmend.core.tables import PopulationRow, SweepReport  # noqa: E402
from graphmend.core.sources import read_report_text, write_atomic  # noqa: E402
from graphmend.sweep.population import ALL  # noqa: E402
from reports.markdown import _cell, _code  # noqa: E402
from reports.bench_md import summary_table  # noqa: E402
from reports.sweep import POPULATION, POPULATION_NOTE, guarded_value  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
COMMAND = "python -m benchmarks results_page -o docs/results.md"
# the population: one sweep report per library, and the later runs that amend them
SWEEPS = ["population-transformers-every20-eval-cpu.json", "population-torchaudio-eval-train-cpu.json",
              "population-diffusers-eval-cpu.json.gz", "population-timm-cpu.json.gz",
              "population-torchvision-cpu.json"]
AMEND = ["population-diffusers-schedulers-eval-cpu.json.gz"]
# a population sweep run again another way (on Ray): its time is shown, its counts are the other's
TIMING = ["population-torchaudio-eval-train-cpu-ray.json"]

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


def population_section(reports: list[SweepReport], names: list[str]) -> list[str]:
    """The population: the libraries' tables, their total, and what remains ranked."""
    grand = total(reports)
    zero_share = f"{100 * grand.zeroed / grand.breaking:.1f} %" if grand.breaking else "-"
    out = ["## The population: what breaks, and what `mend fix` removes", "",
           "Every model class each library exports (built tiny from its config, random weights, inputs of its "
           "own modality), captured under TorchDynamo, then `mend fix` (verification only, nothing written) "
           "over every (model, mode) pair that breaks (or, in the reports that re-trace over the same calls, "
           "recompiles), from the sweep reports below.", "",
           f"**{grand.removed} of {grand.breaks} logged breaks ({grand.removed_pct:g} %) removed by verified "
           f"fixes; {grand.zeroed} of {grand.breaking} breaking pairs ({zero_share}) brought to zero; "
           f"{grand.recompiling} pairs recompile ({grand.recompiles} recompiles, {grand.recompiles_located} "
           "located to a source line).**", "", recompiles_headline(reports), "", "### Sources", ""]
    for r, name in zip(reports, names):
        out.append(f"- {_cell(r.library)} {_cell(r.library_version)} (torch {_cell(r.torch_version or '?')}, "
                   f"{r.cpus} CPUs, --jobs {r.jobs}, modes {','.join(r.run_modes)}; {r.totals.wall_s / 60:.0f} min, "
                   f"mend fix {r.fix_wall_s / 60:.0f} min of it): {_cell(r.selection)}; "
                   f"{len(r.skipped)} left out by the enumeration. `{name}`, from {_code(r.command)}")
    heads = [h for h, _ in POPULATION]
    out += ["", "### The population table", "", "| " + " | ".join(heads) + " |",
            "|---|---|" + "---:|" * (len(heads) - 2)]
    # a report made before sweeps told a recompile's frame and re-traced after mend fix counts neither
    unmeasured = {id(p) for r in reports if not measured_recompiles(r) for p in r.population}
    for p in [p for r in reports for p in r.population] + [grand]:
        cells = [_cell("–" if id(p) in unmeasured and f in UNMEASURED else str(getattr(p, f))) for _, f in POPULATION]
        if p is grand or p.modality == ALL:
            cells = [f"**{c}**" for c in cells]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", _cell(POPULATION_NOTE), "", "### What remains, ranked", "",
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
    return out


def recompiles(reports: list[SweepReport]) -> list[str]:
    """Every recompile cause across libraries, most recompiles first; which reports hold none
    because they were made before sweeps named them."""
    rows = sorted(((r, c) for r in reports for c in r.recompile_causes),
                  key=lambda rc: (-rc[1].recompiles, -len(rc[1].models), rc[0].library, rc[1].rule))
    told = [(r, sum(c.recompiles for c in r.recompile_causes),
             getattr(library_row(r), "recompiles", 0)) for r in reports]
    older = [r.library for r, n, total in told if total and not n]
    partly = [f"{r.library} ({n} of its {total})" for r, n, total in told if 0 < n < total]
    out = ["", "### Recompiles, ranked", "",
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




# -- the other result files ------------------------------------------------------------------


def _load(path: Path):
    return json.loads(read_report_text(path))


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def same_population(a: SweepReport, b: SweepReport) -> list[str]:
    """The population-table fields whose library-wide totals ``a`` and ``b`` differ in (none: the
    same table, whichever executor ran it)."""
    pa, pb = library_row(a), library_row(b)
    if pa is None or pb is None:
        return ["population"]
    return [f for f in SUMMED if getattr(pa, f) != getattr(pb, f)]


def timing_lines(timing: list[tuple[str, SweepReport]], reports: list[SweepReport]) -> list[str]:
    """What each population run again another way (on Ray) shows against the library's report."""
    out = []
    for name, t in timing:
        base = next((r for r in reports if r.library == t.library), None)
        if base is None:
            continue
        differ = same_population(base, t)
        out.append(f"`{name}` ran the {t.library} population again with `--jobs {t.jobs}` on {t.executor}: "
                   f"{t.totals.wall_s / 60:.0f} min against {base.totals.wall_s / 60:.0f} min with `--jobs {base.jobs}` "
                   f"on {base.executor} ({t.totals.wall_s / base.totals.wall_s:.2f}x), "
                   + ("the same population table." if not differ else
                      f"a population table that differs in {', '.join(differ)}."))
    return out


def verification_section(files: list[tuple[str, SweepReport]]) -> list[str]:
    """The time ``mend fix`` took in each sweep report (its ``fix_wall_s``), over the pairs it ran on, and
    on which executor."""
    out = ["## Verification cost: the time `mend fix` took in the population", "",
           "Per sweep report: the (model, mode) pairs `mend fix` ran on (those that break or recompile), how many "
           "of them kept a verified or partially verified fix, and the wall time of `mend fix` over them (all "
           "checks, fresh workers), as the report recorded it.", "",
           "| report | library | CPUs, --jobs, executor | pairs fixed | kept a fix | mend fix min | s per pair | sweep min |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    for name, r in files:
        ran = [row for row in r.rows if row.fix]
        kept = sum(row.fix in ("verified", "partial") for row in ran)
        per = f"{r.fix_wall_s / len(ran):.0f}" if ran else "–"
        out.append(f"| `{name}` | {_cell(r.library)} {_cell(r.library_version)} | {r.cpus}, {r.jobs}, {r.executor} | {len(ran)} | "
                   f"{kept} | {r.fix_wall_s / 60:.0f} | {per} | {r.totals.wall_s / 60:.0f} |")
    return out


def golden_section(results: Path) -> list[str]:
    """Agreement of mend sweep with the public corpus sweep (benchmarks/golden_compare.py)."""
    out = ["## Agreement with the public corpus sweep", ""]
    for path in sorted(results.glob("golden-agreement-*.json")):
        d = _load(path)
        meta = d.get("meta", {})
        out += [f"`{path.name}` (`python -m benchmarks golden_compare compare`): `mend sweep transformers` against "
                f"{_cell(meta.get('golden', ''))}, torch {meta.get('torch')}, transformers "
                f"{meta.get('transformers')}; {len(d.get('classes', []))} classes, {_cell(meta.get('sample', ''))}.", "",
                f"**{d['agree']} of {d['compared']} (class, mode) pairs captured on both sides agree "
                f"({_pct(d.get('share'))}).** {len(d.get('disagreements', []))} disagree (each with its reason "
                f"in the file); {len(d.get('not_both_built', []))} pairs were not captured on both sides.", "",
                "| mode | compared | agree | share |", "|---|---:|---:|---:|"]
        out += _mode_rows(d.get("by_mode", {}))
        out += _fullgraph_terms(d.get("fullgraph"), meta)
        sweeps = sorted(p.name for p in results.glob("golden-sweep-*.json*"))
        if sweeps:
            out += ["", "The sweep reports kept of those samples: " + ", ".join(f"`{n}`" for n in sweeps) + "."]
        runs = sorted(p.name for p in results.glob("golden-same-program-*.jsonl"))
        if runs:
            out += ["", "The same-program runs: " + ", ".join(f"`{n}`" for n in runs) + "."]
    return out


def _mode_rows(by_mode: dict) -> list[str]:
    """A comparison's rows per run mode: compared, agree, share."""
    return [f"| {mode} | {m['compared']} | {m['agree']} | {_pct(m['agree'] / m['compared'] if m['compared'] else None)} |"
            for mode, m in by_mode.items()]


def _fullgraph_terms(fg: Optional[dict], meta: dict) -> list[str]:
    """The same pairs compared as the public sweep compiles them (golden_compare --fullgraph-sweep)."""
    if not fg:
        return []
    check, same = fg.get("check", {}), fg.get("same_program")
    out = ["", "That is mend's default compile, the one `mend fix` repairs. The public sweep compiles with "
           "`fullgraph=True`, which traces the data-dependent scalars and shapes the default compile breaks on. "
           "Compared on its terms (`mend sweep transformers --fullgraph --calls 1` over every class above the "
           "default compile broke on and every 10th of the rest"
           + (f", and {fg['more_classes']} more golden classes swept with `--fullgraph` alone"
              if fg.get("more_classes") else "")
           + f"; a pair the default compile captured as one graph kept as one graph, {fg.get('kept_clean', 0)} "
           f"pairs, after {check.get('one_graph', 0)} of the {check.get('run', 0)} such pairs run again were one "
           f"graph again), over {fg.get('classes', len(meta.get('classes', [])))} classes:", "",
           f"**{fg['agree']} of {fg['compared']} pairs agree ({_pct(fg.get('share'))}).** "
           f"{len(fg.get('disagreements', []))} disagree; {len(fg.get('not_both_built', []))} pairs were not "
           "captured on both sides with fullgraph=True.", "",
           "| mode | compared | agree | share |", "|---|---:|---:|---:|"]
    out += _mode_rows(fg.get("by_mode", {}))
    if same:
        both, left = fg["agree"] + same["agree"], same["run"] - same["agree"]
        out += ["", f"{same['run']} of the {len(fg.get('disagreements', []))} disagreements were run again on the "
                "public sweep's own model, inputs and call (`golden_compare same-program`: its worker, with mend's "
                f"capture as its `torch.compile`): {same['agree']} agree there, so those two sweeps differed in their "
                "inputs, not in what they capture"
                + (f"; of the {left} that still differ, the corpus's own worker run on this machine gives mend's "
                   f"status in {same.get('worker_here_same', 0)} (the golden set was recorded on a GPU)" if left else "")
                + f". On one program, **{both} of {fg['compared']} pairs agree "
                f"({_pct(both / fg['compared'] if fg['compared'] else None)})**."]
    return out


def build_rate_section(results: Path) -> list[str]:
    """The transformers build rate (benchmarks/hf_build_rate.py writes a page: its headline and table)."""
    out = ["## transformers: classes built tiny and run", ""]
    for path in sorted(results.glob("hf-build-rate-*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        title = lines[0].lstrip("# ").strip() if lines else path.name
        cut = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
        keep = [line for line in lines[1:cut] if line.startswith("**") or line.startswith("|")]
        out += [f"`{path.name}` (`python -m benchmarks hf_build_rate`, every reason a class was not built is "
                f"in the file): {title}.", ""] + [k if k.startswith("|") else k + "\n" for k in keep]
    return out


def scan_recall_section(results: Path) -> list[str]:
    """Recall and precision of the static scan against Dynamo's logged breaks (benchmarks/scan_recall.py)."""
    out = ["## The static scan against Dynamo's breaks", ""]
    for path in sorted(results.glob("scan-recall-*.json")):
        d = _load(path)
        out += [f"`{path.name}` (`python -m benchmarks scan_recall`): *recall*, the break lines a static rule "
                "flagged; *precision*, the findings a dynamic break confirmed, of those judged (*strict*: of all).", "",
                "| code | break lines | flagged | recall | findings | confirmed | unjudged | precision | strict | missed |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for name, r in d.items():
            out.append(f"| {name} | {r['break_lines']} | {r['flagged']} | {_pct(r['recall'])} | {r['findings']} | "
                       f"{r['confirmed']} | {r['unjudged']} | {_pct(r['precision'])} | {_pct(r['precision_strict'])} | "
                       f"{_cell('; '.join(r.get('missed', [])) or '–')} |")
        out.append("")
    return out[:-1]


def outside_section(results: Path) -> list[str]:
    """Breaks mend fix removes from programs written outside the repo (benchmarks/outside_breaks.py)."""
    out = ["## Programs written outside the repo", ""]
    for path in sorted(results.glob("outside-breaks*.json")):
        d = _load(path)
        t = d["total"]
        out += [f"`{path.name}` (`python -m benchmarks outside_breaks`, tests/fixtures/outside_programs/): "
                f"**{t['removed']} of {t['before']} logged breaks removed, {t['after']} left.**", "",
                "| target | logged before | after | Dynamo breaks before → after | frames skipped before → after |",
                "|---|---:|---:|---|---|"]
        for name, r in d["targets"].items():
            b, a = r["before"], r["after"]
            out.append(f"| `{name}` | {b['logged']} | {a['logged']} | {b['graph_break_count']} → {a['graph_break_count']} | "
                       f"{b['frames_skipped']} → {a['frames_skipped']} |")
    return out


def _rows(items, target: str, mode: str, run_mode: str) -> list:
    """BenchRows of arm figures: a list of rows naming their arm, or a mapping {arm: figures}."""
    from graphmend.core.model import BenchRow

    names = {f.name for f in fields(BenchRow)} - {"lowering", "target", "arm"}
    pairs = items.items() if isinstance(items, dict) else [(x.get("arm"), x) for x in items]
    out = []
    for arm, x in pairs:
        if not isinstance(x, dict) or not arm:
            continue
        kw = {k: v for k, v in x.items() if k in names and v is not None}
        kw.setdefault("device", "")
        kw["mode"] = x.get("mode") or mode or "–"  # a file that does not say
        kw["run_mode"] = x.get("run_mode") or run_mode
        out.append(BenchRow(target=x.get("target") or target, arm=arm, **kw))
    return out


def _ratios(r, target: str, mode: str, run_mode: str) -> list:
    from graphmend.core.model import BenchRatio

    if isinstance(r, dict):
        return [BenchRatio(target=target, name=k, value=v, mode=mode or "–", run_mode=run_mode)
                for k, v in r.items()]
    names = {f.name for f in fields(BenchRatio)}
    return [BenchRatio(**{k: v for k, v in x.items() if k in names}) for x in r or () if isinstance(x, dict)]


def _bench_reports(d, label: str = "") -> list:
    """A bench file as Reports: a ``mend bench -f json`` report as it is; in any other file, each
    group of arm figures (one measurement: a target's arms, with the ratios the file gives
    beside them) as a Report of its own, its targets named with where in the file it is."""
    from graphmend.core.model import Report

    if isinstance(d, dict) and "schema_version" in d and "bench" in d:
        return [Report.from_json(json.dumps(d))]
    out = []
    if isinstance(d, list):
        for x in d:
            out += _bench_reports(x, label)
        return out
    if not isinstance(d, dict):
        return out
    label = ", ".join(x for x in (label, f"{d['call']}" if "call" in d else "",
                                  f"run {d['run']}" if "run" in d else "") if x)
    target, mode, run_mode = d.get("target") or "", d.get("mode") or "", d.get("run_mode") or "eval"
    arms = d.get("arms")
    if arms is None and isinstance(d.get("bench"), list) and all(isinstance(x, dict) and "arm" in x for x in d["bench"]):
        arms = d["bench"]
    if arms:
        rows = _rows(arms, target, mode, run_mode)
        ratios = _ratios(d.get("ratios"), target, mode, run_mode)
        if label:
            for x in [*rows, *ratios]:
                x.target = f"{x.target} ({label})"
        return [Report(bench=rows, ratios=ratios)] if rows else []
    for k, v in d.items():
        if k in ("gate", "checks", "emit_cost", "ratios"):
            continue
        here = label if k in ("bench", "calls", "jobs") or not isinstance(v, dict) else ", ".join(x for x in (label, k) if x)
        out += _bench_reports(v, here)
    return out


def _describe(d) -> str:
    if not isinstance(d, dict):
        return ""
    parts = []
    for key in ("machine", "device", "torch", "transformers", "dtype", "protocol", "command"):
        v = d.get(key)
        if isinstance(v, str) and v and v not in ("fix", "bench", "analyze"):
            parts.append(f"{key} {v}" if key in ("torch", "transformers", "dtype") else v)
    if isinstance(d.get("versions"), list):
        parts.append(", ".join(v for v in d["versions"] if "MISSING" not in v))
    if "torch_version" in d and "torch" not in d:
        parts.append(f"torch {d['torch_version']}")
    return _cell("; ".join(parts))[:600]


def speed_section(results: Path) -> list[str]:
    """Every bench file: one row per target and mode (reports.bench_md's summary table)."""
    out = ["## Speed: the saved bench reports", "",
           "One row per target, mode and file: graphs and breaks of the compiled original and mended arms, the "
           "median of the timed calls per arm, and the ratios the bench computed in that run (below 1: the "
           "numerator is faster). *unstable*: an IQR above a quarter of its median. Ratios compare arms of one "
           "run only; rows of files from other machines do not compare."]
    names = sorted(p.name for p in results.iterdir() if p.name.endswith(".json")
                   and p.name.split("-")[0] in ("cpu", "gpu") or p.name.startswith("population-bench"))
    for name in names:
        d = _load(results / name)
        reports = [r for r in _bench_reports(d) if r.bench]
        if not reports:
            continue
        how = _describe(d) or _cell(reports[0].command or "")
        out += ["", f"### `{name}`", "", *([how, ""] if how else []), summary_table(reports).rstrip("\n")]
    return out


def _checks(d) -> list[dict]:
    """Every cost check (a mended/original verdict of the cost gate) anywhere in a file, each once
    (a file's summary may repeat the checks its units hold)."""
    def every(x):
        if isinstance(x, list):
            for y in x:
                yield from every(y)
        elif isinstance(x, dict):
            if "verdict" in x and "target" in x and "ratio" in x:
                yield x
            else:
                for y in x.values():
                    yield from every(y)

    seen, once = set(), []
    for c in every(d):
        key = tuple(str(c.get(k)) for k in ("target", "mode", "run_mode", "verdict", "ratio", "original_ms", "mended_ms"))
        if key not in seen:
            seen.add(key)
            once.append(c)
    return once


def cost_gate_section(results: Path) -> list[str]:
    """Every cost gate verdict in the result files, counted per file, then listed."""
    out = ["## The cost gate", "",
           "Every verdict of the cost gate (`mend fix --bench`: the mended program timed against the original "
           "before a fix is kept) in the result files. *not slower*, *slower* (beyond noise: the fix is not "
           "applied), *untold* (the noise is too large to tell). A file may hold several runs of one target.", "",
           "| file | checks | not slower | slower | untold | other |", "|---|---:|---:|---:|---:|---:|"]
    every = []
    for path in sorted(results.glob("*.json")):
        checks = _checks(_load(path))
        if not checks:
            continue
        n = {v: sum(c["verdict"] == v for c in checks) for v in ("not slower", "slower", "untold")}
        out.append(f"| `{path.name}` | {len(checks)} | {n['not slower']} | {n['slower']} | {n['untold']} | "
                   f"{len(checks) - sum(n.values())} |")
        every += [(path.name, c) for c in checks]
    total = {v: sum(c["verdict"] == v for _, c in every) for v in ("not slower", "slower", "untold")}
    out.append(f"| **every file** | **{len(every)}** | **{total['not slower']}** | **{total['slower']}** | "
               f"**{total['untold']}** | **{len(every) - sum(total.values())}** |")
    out += ["", "| file | target | mode | run mode | device | verdict | mended/original | original ms | mended ms | "
            "graphs: original → mended |", "|---|---|---|---|---|---|---:|---:|---:|---|"]
    for name, c in every:
        # a file may hold a figure as the summary table printed it (a string)
        ratio, *ms = ["–" if c.get(k) is None else f"{float(c[k]):.3f}" for k in ("ratio", "original_ms", "mended_ms")]
        graphs = (f"{c['graphs_original']} → {c['graphs_mended']}" if c.get("graphs_original") is not None
                  else "–")
        out.append(f"| `{name}` | {_cell(c['target'].rpartition('/')[2])} | {c.get('mode') or '–'} | "
                   f"{c.get('run_mode', 'eval')} | {c.get('device', '–')} | {c['verdict']} | {ratio} | {ms[0]} | {ms[1]} | "
                   f"{graphs} |")
    return out


def page(reports: list[SweepReport], names: list[str], results: Path = RESULTS,
         files: list[tuple[str, SweepReport]] = (), timing: list[tuple[str, SweepReport]] = ()) -> str:
    """The whole results page."""
    out = ["# Results", "",
           f"<!-- generated by `{COMMAND}`; do not edit by hand -->", "",
           f"Generated by `{COMMAND}` from the result files in benchmarks/results; every figure here is one of "
           "theirs, and a figure with no file behind it is not on this page. How each file is made, and the "
           "commands: [benchmarks.md](benchmarks.md). What changed when: [CHANGELOG.md](../CHANGELOG.md).", ""]
    out += population_section(reports, names)
    timing = list(timing)
    for section in (verification_section(list(files) + timing) + ([""] + timing_lines(timing, reports) if timing else []),
                    golden_section(results), build_rate_section(results),
                    scan_recall_section(results), outside_section(results), speed_section(results),
                    cost_gate_section(results)):
        out += [""] + section
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="*", type=Path,
                    help="sweep reports (mend sweep LIBRARY --fix -f json); default: SWEEPS in --results")
    ap.add_argument("-o", "--output", type=Path, help="the page (default: stdout)")
    ap.add_argument("--amend", type=Path, action="append", default=[],
                    help="a later sweep of some models of one of the libraries (see above); default: AMEND")
    ap.add_argument("--timing", type=Path, action="append", default=[],
                    help="a population sweep run again another way (--executor ray): only its time is shown; "
                         "default: TIMING")
    ap.add_argument("--results", type=Path, default=RESULTS, help="the result files (default: benchmarks/results)")
    args = ap.parse_args(argv)
    if not args.reports:
        args.reports = [args.results / n for n in SWEEPS]
        args.amend = args.amend or [args.results / n for n in AMEND]
        args.timing = args.timing or [args.results / n for n in TIMING]
    reports, names, files = [], [], []
    later = {}
    for path in args.amend:
        try:
            rep = SweepReport.from_json(read_report_text(path))
        except (OSError, ValueError) as exc:
            print(f"results_page: --amend {path}: {exc}", file=sys.stderr)
            return 2
        later.setdefault(rep.library, []).append((rep, path))
    for path in args.reports:
        try:
            rep = SweepReport.from_json(read_report_text(path))
            files.append((path.name, rep))
            if rep.library in later:
                files += [(p.name, r) for r, p in later[rep.library]]
                rep = amend(rep, combine([r for r, _ in later.pop(rep.library)]))
        except (OSError, ValueError) as exc:
            print(f"results_page: {path}: {exc}", file=sys.stderr)
            return 2
        if not rep.population:
            print(f"results_page: {path}: no population table (run mend sweep with --fix)", file=sys.stderr)
            return 2
        reports.append(rep)
        names.append(path.name)
    for parts in later.values():
        print(f"results_page: --amend {parts[0][1]}: no report of its library given", file=sys.stderr)
        return 2
    timing = []
    for path in args.timing:
        try:
            timing.append((path.name, SweepReport.from_json(read_report_text(path))))
        except (OSError, ValueError) as exc:
            print(f"results_page: --timing {path}: {exc}", file=sys.stderr)
            return 2
    text = page(reports, names, args.results, files, timing)
    if args.output:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
