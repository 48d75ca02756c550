"""The sweep stage: enumerate a library's architectures, write one generated target per
architecture, capture them with ``graphmend.collect`` (the machinery ``mend analyze`` runs:
worker subprocesses through graphmend.core.jobs, so a model that hangs or crashes costs
only itself), and aggregate into a ``SweepReport``. Nothing here prints; progress goes
through the hook analyze takes.

The seam: ``write_targets`` makes an ordinary folder of target files and ``capture``
hands it to ``collect`` as ``mend analyze DIR --dynamic-only`` would, so whatever runs
analyze's targets (jobs, an executor) runs a sweep's too, and each architecture's counts
are those of ``mend analyze`` of its file. ``aggregate`` and ``compare`` are pure: they
take the model's objects and import no torch. With ``fix``, ``mend fix`` then runs over the
breaking targets and the population table is counted (graphmend.sweep.population).
"""

from __future__ import annotations

import importlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from graphmend.core.config import Config
from graphmend.core.model import ADVICE, VERIFIED, Fix, Report, TargetResult
from graphmend.core.tables import (FIX_VERIFIED, SWEEP_BREAKS, SWEEP_CLEAN, SWEEP_FAILED, SWEEP_NOT_BUILT, SweepCause,
                                        SweepChange, SweepRecompileCause, SweepReport, SweepRow, SweepTotals)
from graphmend.sweep.population import fix_rows, run_fixes, population

# library name -> (module, target file prefix). A library module exposes ``version() -> str``,
# ``enumerate_models() -> (names to run in order, {skipped name: why})``, ``modality(name) -> str``,
# ``SELECTION`` (a phrase naming the population the enumeration is) and ``target(name) -> (model,
# args, kwargs)``, raising ``NotBuilt`` for a model it cannot build. Optional: ``accepts(name)``,
# for --only names beyond the enumeration's (transformers' model types).
LIBRARIES = {"transformers": ("graphmend.sweep.hf", "hf"), "timm": ("graphmend.sweep.timm_models", "timm"),
             "torchvision": ("graphmend.sweep.torchvision_models", "tv"),
             "torchaudio": ("graphmend.sweep.torchaudio_models", "ta"),
             "diffusers": ("graphmend.sweep.diffusers_models", "diffusers")}
NOT_BUILT_MARK = "raised NotBuilt: "
FIX_NOTE = ("Each root cause's fix is the planner's verdict at its sites (libcst only, no run, as mend analyze "
            "gives it): safe = mend fix plans a rewrite there (written only once verification passes), unsafe = "
            "only --unsafe-fixes would, advice = no rewrite is planned (the planner's reason is kept with the "
            "cause), none = no rule explains the break (GM9xx). Nothing is verified for this column: mend sweep "
            "--fix (the population table) or mend fix of a model's target verifies them.")
_WHERE = 3  # break sites a row lists


class SweepError(ValueError):
    """A bad library or --only name; the message says which and what is known."""


@dataclass
class SweepOptions:
    library: str = "transformers"
    only: Sequence[str] = ()  # models to run (all the enumeration keeps when empty)
    limit: Optional[int] = None  # the first N of the enumeration
    every: Optional[int] = None  # every Nth of the enumeration (a fixed sample), before --limit
    fix: bool = False  # then mend fix (verification, nothing written) over every breaking pair: the population table
    jobs: int = 1
    timeout: Optional[float] = None  # per architecture and mode (default: config.timeout)
    targets_dir: Optional[Path] = None  # where the generated targets are written and kept
    command: str = ""
    executor: str = "local"  # where the jobs ran (the CLI's executor scope): local or ray
    # more CollectOptions fields, as analyze's flags set them (an executor, when collect has
    # one): the capture is collect's, so whatever it can run on, a sweep runs on
    collect: dict = field(default_factory=dict)


@dataclass
class Plan:
    """What a sweep will run: the models with their modality, and the library's others with why not."""

    library: str
    version: str
    models: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    selection: str = ""
    modalities: dict[str, str] = field(default_factory=dict)

    def listing(self, modes: Sequence[str]) -> list[dict]:
        """What ``mend sweep --list`` shows: one entry a model, in run order."""
        return [{"library": self.library, "model": m, "modality": self.modalities.get(m, ""), "modes": list(modes)}
                for m in self.models]


def _library(name: str):
    if name not in LIBRARIES:
        raise SweepError(f"unknown library {name!r}: mend sweep knows {', '.join(sorted(LIBRARIES))}")
    module, prefix = LIBRARIES[name]
    try:
        return importlib.import_module(module), prefix
    except ImportError as exc:
        raise SweepError(_not_installed(name, exc)) from None


def _not_installed(library: str, exc: BaseException) -> str:
    missing = getattr(exc, "name", None) or library
    return f"mend sweep {library}: {missing} is not installed (pip install {missing.split('.')[0]})"


def close_names(wanted: str, known: Sequence[str], n: int = 5) -> list[str]:
    """The known names nearest to ``wanted`` (difflib, case-insensitive), best first."""
    import difflib

    lower: dict[str, str] = {}
    for k in known:
        lower.setdefault(k.lower(), k)
    return [lower[c] for c in difflib.get_close_matches(wanted.lower(), list(lower), n=n, cutoff=0.6)]


def plan(options: SweepOptions) -> Plan:
    """The models to run (imports the library's registry, not its models)."""
    lib, _ = _library(options.library)
    try:
        version = lib.version()
        models, skipped = lib.enumerate_models()
    except ImportError as exc:
        raise SweepError(_not_installed(options.library, exc)) from None
    selection = f"{lib.SELECTION} ({len(models)} of {len(models) + len(skipped)})"
    if options.only:
        known = set(models) | set(skipped)
        accepts = getattr(lib, "accepts", None)
        unknown = [m for m in options.only if m not in known and not (accepts and accepts(m))]
        if unknown:
            close = [c for u in unknown for c in close_names(u, sorted(known))]
            raise SweepError(f"--only: no {options.library} model {', '.join(map(repr, unknown))}"
                             + (f" (closest: {', '.join(dict.fromkeys(close))})" if close else ""))
        # named explicitly: run even one the enumeration would leave out
        models = list(dict.fromkeys(options.only))
        selection = f"--only {' '.join(models)}"
    if options.every is not None and options.every > 1:
        models = models[::options.every]
        selection += f", one in {options.every} ({len(models)})"
    if options.limit is not None:
        models = models[:options.limit]
        selection += f", the first {len(models)}"
    return Plan(library=options.library, version=version, models=models,
                skipped={} if options.only else skipped, selection=selection,
                modalities={m: lib.modality(m) for m in models})


def _ident(model: str) -> str:
    return re.sub(r"\W", "_", model)


def write_targets(folder: Path, library: str, models: Sequence[str]) -> dict[str, str]:
    """One file per architecture in ``folder`` (``hf_<type>.py`` with ``mend_target_<type>``,
    which builds the model in the worker). Returns {file name: model type}."""
    from graphmend.core.sources import write_atomic

    module, prefix = LIBRARIES[library]
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for model in models:
        name = _ident(model)
        while f"{prefix}_{name}.py" in files:  # two types that differ only in punctuation
            name += "_"
        fname = f"{prefix}_{name}.py"
        write_atomic(folder / fname,
                     f'"""Generated by mend sweep: {library} {model!r}, built tiny from its config ({module})."""\n\n'
                     f"from {module} import target as _target\n\n\n"
                     f"def mend_target_{name}():\n    return _target({model!r})\n")
        files[fname] = model
    return files


def capture(folder: Path, config: Config, jobs: int, timeout: Optional[float], progress=None,
            extra: Optional[dict] = None, names: Optional[Sequence[str]] = None) -> Report:
    """The generated targets captured as ``mend analyze FOLDER --dynamic-only`` captures them,
    with the issues (one per cause and place, with fan-out and fixability) diagnosed. With
    ``names``, only those files of the folder (a --targets-dir --force folder may hold others)."""
    from graphmend.collect import CollectOptions, collect
    from graphmend.core.model import new_report
    from graphmend.correlate import diagnose

    report = new_report("analyze", root=str(folder))
    report.run_modes = list(config.modes)
    paths = [folder / n for n in names] if names is not None else [folder]
    got = collect(paths, config, CollectOptions(static=False, dynamic=True, jobs=jobs, timeout=timeout,
                                                **(extra or {})), progress)
    report.targets, report.errors, report.nested_graph_breaks = got.targets, got.errors, got.nested_graph_breaks
    diagnose(report)
    return report


def run_sweep(options: SweepOptions, config: Config, progress=None, torch_version: Optional[str] = None,
              baseline: Optional[SweepReport] = None, baseline_name: Optional[str] = None) -> SweepReport:
    from graphmend.core import env

    start = time.perf_counter()
    p = plan(options)
    keep = options.targets_dir
    tmp = None if keep else tempfile.TemporaryDirectory(prefix="mend-sweep-")
    folder = Path(keep) if keep else Path(tmp.name)  # type: ignore[union-attr]
    fix_runs: dict[str, object] = {}
    fix_wall = 0.0
    try:
        files = write_targets(folder, p.library, p.models)
        report = (capture(folder, config, options.jobs, options.timeout, progress, options.collect, names=sorted(files))
                  if files else Report())
        if files:
            from graphmend.fixing import plan_issues

            # each cause's fix is the planner's verdict at its site (libcst only, no run), as in analyze
            plan_issues(report, [folder], config, progress)
        if options.fix:
            fix_start = time.perf_counter()
            fix_runs = run_fixes(folder, files, report, config, options.jobs, options.timeout,
                                 options.collect.get("calls", 1), progress)
            fix_wall = time.perf_counter() - fix_start
    finally:
        if tmp is not None:
            tmp.cleanup()
    model_of = {}
    for t in report.targets:
        model_of[t.name] = files.get(Path(t.file).name, t.name)
    out = SweepReport(library=p.library, library_version=p.version, **env.stamp(torch_version),
                      cpus=os.cpu_count() or 0, jobs=options.jobs, executor=options.executor,
                      fullgraph=bool(options.collect.get("fullgraph")),
                      run_modes=list(config.modes),
                      selection=p.selection, command=options.command, targets_dir=str(keep) if keep else "",
                      skipped=p.skipped, fix_note=FIX_NOTE)
    aggregate(out, report, model_of, p.models)
    # a target discovery could not load (never expected of generated files) is a failed row
    for e in report.errors:
        out.rows.append(SweepRow(model=files.get(Path(e.file).name, e.file), run_mode=config.modes[0],
                                 status=SWEEP_FAILED, why=e.message))
    for row in out.rows:
        row.library, row.modality = p.library, p.modalities.get(row.model, "")
    if options.fix:
        for mode, run in fix_runs.items():
            fix_rep = run.report  # type: ignore[attr-defined]
            fix_rows(out.rows, mode, fix_rep.fix_targets, fix_rep.targets, fix_rep.fixes, files)
        count_removed(out, report, {mode: run.remaining for mode, run in fix_runs.items()})  # type: ignore[attr-defined]
        note_verdicts(out, [f for run in fix_runs.values() for f in run.report.fixes])  # type: ignore[attr-defined]
        out.population = population(out.rows, p.library)
        out.fix_wall_s = round(fix_wall, 1)
    out.totals.wall_s = round(time.perf_counter() - start, 1)
    if out.totals.wall_s > 0:
        out.totals.runs_per_hour = round(len(out.rows) * 3600 / out.totals.wall_s, 1)
    if baseline is not None:
        compare(out, baseline, baseline_name or "")
    return out


def _short(path: Optional[str]) -> str:
    p = (path or "?").replace(os.sep, "/")
    return p.split("/site-packages/", 1)[-1]


def _row(t: TargetResult, model: str) -> SweepRow:
    row = SweepRow(model=model, run_mode=t.run_mode, status=SWEEP_CLEAN, target=t.name, graph_count=t.graph_count,
                   graph_break_count=t.graph_break_count, breaks=len(t.breaks), frames_skipped=t.frames_skipped,
                   duration_s=t.duration_s)
    caused = t.caused_recompiles
    row.recompiles, row.recompiles_located = len(caused), sum(rc.located for rc in caused)
    row.recompiles_after_break = sum(rc.after_break for rc in caused)
    row.recompile_limit = any(rc.limit for rc in t.recompiles)
    if t.error and NOT_BUILT_MARK in t.error:
        row.status, row.why = SWEEP_NOT_BUILT, t.error.split(NOT_BUILT_MARK, 1)[1]
    elif t.error:
        why = t.error[len(t.name) + 2:] if t.error.startswith(t.name + ": ") else t.error
        row.status, row.why = SWEEP_FAILED, (why.strip().splitlines() or [""])[0][:300]
    elif t.breaks or t.graph_break_count:
        row.status = SWEEP_BREAKS
    row.where = list(dict.fromkeys(f"{_short(b.file)}:{b.line}" if b.file else "(no source line)"
                                   for b in t.breaks))[:_WHERE]
    return row


def _cause_key(issue) -> tuple:
    src = " ".join((issue.source_line or "").split())
    return (issue.rule, src or issue.said.reason, issue.said.gb_type or "")


_FIX_RANK = {"safe": 0, "unsafe": 1, "advice": 2, "none": 3}


def aggregate(out: SweepReport, report: Report, model_of: dict[str, str], order: Sequence[str] = ()) -> None:
    """Rows (architecture-major, in ``order``), root causes with their fan-out, and the
    totals, from a capture report's targets and issues. Pure: no torch, no I/O."""
    rank = {m: i for i, m in enumerate(order)}
    targets = report.targets
    rows = [_row(t, model_of.get(t.name, t.name)) for t in targets]
    causes: dict[tuple, SweepCause] = {}
    cause_of: dict[tuple[int, int], tuple] = {}
    fixes: dict[tuple, list[str]] = {}
    for issue in report.issues:
        if not issue.breaks:
            continue  # a static-only finding: a sweep runs no scan
        key = _cause_key(issue)
        c = causes.get(key)
        if c is None:
            c = causes[key] = SweepCause(rule=issue.rule, category=issue.category, reason=issue.said.reason,
                                         source=key[1] if issue.source_line else "", gb_type=issue.said.gb_type)
        for ti, bi in issue.breaks:
            cause_of[(ti, bi)] = key
        _reached(c, issue, [(rows[ti].model, targets[ti].run_mode) for ti, _ in issue.breaks])
        c.breaks += len(issue.breaks)
        c.fan_out += issue.fan_out
        c.counted = c.counted or issue.counted
        c.frames_skipped += len(issue.skipped)
        fixes.setdefault(key, []).append(issue.fix or ("none" if issue.rule.startswith("GM9") else "advice"))
        c.fix_why = c.fix_why or (issue.fix_why if not issue.fix else "")
    for key, kinds in fixes.items():  # the best any of its sites has
        c = causes[key]
        c.fix = min(kinds, key=_FIX_RANK.__getitem__)
        if c.fix in ("safe", "unsafe"):
            c.fix_why = ""
        _ordered(c, rank)
    ranked = sorted(causes.values(), key=lambda c: (-len(c.models), -c.breaks, -c.fan_out, c.rule, c.reason))
    index = {id(c): i for i, c in enumerate(ranked)}
    by_key = {k: index[id(c)] for k, c in causes.items()}
    for (ti, bi), key in cause_of.items():
        row, ci = rows[ti], by_key[key]
        if ci not in row.causes:
            row.causes.append(ci)
        fix = ranked[ci].fix
        row.fixable += fix == "safe"
        row.fixable_unsafe += fix == "unsafe"
    for row in rows:
        row.causes.sort()
    rows.sort(key=lambda r: (rank.get(r.model, len(rank)), r.model))  # stable: modes stay in order
    out.rows, out.causes = rows, ranked
    out.recompile_causes = recompile_causes(report, model_of, rank)
    out.totals = totals(out)


def _reached(c, issue, hits: Sequence[tuple[str, str]]) -> None:
    """Add to root cause ``c`` (of breaks or of recompiles) the place of ``issue`` and the
    (model, mode) pairs it hit, each once."""
    site = f"{_short(issue.file)}:{issue.line}" if issue.file else "(no source line)"
    if site not in c.sites:
        c.sites.append(site)
    for model, mode in hits:
        if model not in c.models:
            c.models.append(model)
        if mode not in c.modes:
            c.modes.append(mode)


def _ordered(c, rank: dict[str, int]) -> None:
    """A cause's models in the enumeration's order, its sites sorted."""
    c.models.sort(key=lambda m: (rank.get(m, len(rank)), m))
    c.sites.sort()


def recompile_causes(report: Report, model_of: dict[str, str], rank: dict[str, int]) -> list[SweepRecompileCause]:
    """The recompile issues (GM7xx, one per cause and place) merged by rule and guarded value
    over the copies of one line, most recompiles first."""
    causes: dict[tuple, SweepRecompileCause] = {}
    for issue in report.issues:
        if not issue.recompiles:
            continue
        rcs = [(report.targets[ti], report.targets[ti].recompiles[ri]) for ti, ri in issue.recompiles]
        first = rcs[0][1]
        source = " ".join((issue.source_line or "").split())
        what = source or first.expression or ""
        key = (issue.rule, what, "" if source else issue.function or "")
        c = causes.get(key)
        if c is None:
            c = causes[key] = SweepRecompileCause(rule=issue.rule, what=what,
                                                  reason=(first.reason or "").strip().split("\n")[0][:300],
                                                  function=issue.function or "")
        _reached(c, issue, [(model_of.get(t.name, t.name), t.run_mode) for t, _ in rcs])
        for _, rc in rcs:
            c.recompiles += 1
            c.located += rc.located
            c.after_break += rc.after_break
            c.limit = c.limit or rc.limit
    for c in causes.values():
        _ordered(c, rank)
    return sorted(causes.values(), key=lambda c: (-c.recompiles, -len(c.models), c.rule, c.what))


def count_removed(out: SweepReport, report: Report, left: dict[str, dict[str, list]]) -> None:
    """Each root cause's breaks verified fixes removed (``SweepCause.removed``): a break of a
    pair whose fix is verified that the re-trace of the fixed program no longer has. ``left``:
    {run mode: {target: the breaks its fixed program still has}} (``FixRun.remaining``)."""
    kept = {(Path(name.split("::")[0]).name, mode): {(os.path.realpath(b.file or ""), b.line) for b in breaks}
            for mode, by_target in left.items() for name, breaks in by_target.items()}
    rows = {(Path(r.target.split("::")[0]).name, r.run_mode): r for r in out.rows if r.target}
    by_key = {(c.rule, c.source or c.reason, c.gb_type or ""): c for c in out.causes}
    for issue in report.issues:
        c = by_key.get(_cause_key(issue))
        for ti, bi in issue.breaks if c is not None else ():
            t = report.targets[ti]
            at = (Path(t.file).name, t.run_mode)
            row, b = rows.get(at), t.breaks[bi]
            if row is not None and row.fix == FIX_VERIFIED and at in kept \
                    and (os.path.realpath(b.file or ""), b.line) not in kept[at]:
                c.removed += 1


def note_verdicts(out: SweepReport, fixes: Sequence[Fix]) -> None:
    """A cause with a rewrite planned that keeps breaks says why verification kept it out: the
    first rewrite at one of its sites that mend fix would not write, with its status and reason
    (``SweepCause.verdict``). ``fixes``: the fix runs' records, every mode's."""
    unkept = [(os.path.realpath(f.file or ""), str(f.line), f) for f in fixes if f.status not in (VERIFIED, ADVICE)]
    for c in out.causes:
        if c.fix not in ("safe", "unsafe") or c.removed >= c.breaks:
            continue
        for site in c.sites:
            rel, _, line = site.rpartition(":")
            f = next((f for path, at, f in unkept if at == line and path.endswith(os.sep + rel)), None)
            if f is not None:
                c.verdict = f"{f.status}: {' '.join((f.reason or '').split())}"[:240]
                break


def totals(out: SweepReport) -> SweepTotals:
    t = SweepTotals(enumerated=len({r.model for r in out.rows}), skipped=len(out.skipped), runs=len(out.rows))
    built = {r.model for r in out.rows if r.status != SWEEP_NOT_BUILT}
    t.built = len(built)
    t.not_built = len({r.model for r in out.rows} - built)
    for r in out.rows:
        mode = t.by_mode.setdefault(r.run_mode, {SWEEP_CLEAN: 0, SWEEP_BREAKS: 0, SWEEP_FAILED: 0, SWEEP_NOT_BUILT: 0})
        mode[r.status] = mode.get(r.status, 0) + 1
    t.causes = len(out.causes)
    t.causes_safe = sum(1 for c in out.causes if c.fix == "safe")
    t.causes_unsafe = sum(1 for c in out.causes if c.fix == "unsafe")
    t.breaks = sum(c.breaks for c in out.causes)
    t.breaks_fixable = sum(c.breaks for c in out.causes if c.fix == "safe")
    t.breaks_fixable_unsafe = sum(c.breaks for c in out.causes if c.fix == "unsafe")
    return t


def _state(r: Optional[SweepRow]) -> str:
    if r is None:
        return "absent"
    if r.status in (SWEEP_NOT_BUILT, SWEEP_FAILED):
        return f"{r.status}: {r.why}"
    g = f"{r.graph_count} graph{'s' if r.graph_count != 1 else ''}, {r.graph_break_count} counted " \
        f"break{'s' if r.graph_break_count != 1 else ''}"
    return g + (f", {r.breaks} listed" if r.breaks != r.graph_break_count else "")


def _ran(r: SweepRow) -> bool:
    return r.status in (SWEEP_CLEAN, SWEEP_BREAKS)


def compare(out: SweepReport, baseline: SweepReport, name: str = "") -> None:
    """Regressions and improvements against a previous sweep, per architecture and mode.
    A regression: one graph before and breaks now, more graphs now, or it ran before and
    does not now (not built, failed). Pairs only one side has are neither."""
    before = {(r.model, r.run_mode): r for r in baseline.rows}
    out.baseline = name or "baseline"
    out.regressions, out.improvements = [], []
    for r in out.rows:
        b = before.get((r.model, r.run_mode))
        if b is None:
            continue
        kind = None
        if _ran(b) and _ran(r):
            if b.status == SWEEP_CLEAN and r.status == SWEEP_BREAKS:
                kind, bad = "breaks", True
            elif r.graph_count > b.graph_count:
                kind, bad = "graphs", True
            elif b.status == SWEEP_BREAKS and r.status == SWEEP_CLEAN:
                kind, bad = "fixed", False
            elif r.graph_count < b.graph_count:
                kind, bad = "fewer graphs", False
        elif _ran(b):
            kind, bad = "fails", True
        elif _ran(r):
            kind, bad = "runs", False
        if kind is not None:
            (out.regressions if bad else out.improvements).append(
                SweepChange(model=r.model, run_mode=r.run_mode, kind=kind, before=_state(b), after=_state(r)))
    out.totals.regressions, out.totals.improvements = len(out.regressions), len(out.improvements)
