"""The population table (``mend sweep LIBRARY --fix``): after the sweep, ``mend fix`` over the
generated target of every (model, mode) pair that breaks or recompiles -- the same run as ``mend fix`` of
those files, verification only, nothing written -- and, per library and modality, the
models built, the pairs that break, Dynamo's logged breaks, the breaks verified fixes remove
and the pairs they bring to zero, the recompiles and those verified fixes remove. A fix whose proof is partial, or that ``mend fix --write``
would not write, is counted apart, never as safe.

``run_fixes`` runs the fixes (one ``run_fix`` per run mode: fix captures and re-traces in
one); ``fix_rows`` and ``population`` are pure: they read the model's objects and import no
torch. Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Optional, Sequence

from graphmend.core.config import Config
from graphmend.core.model import PARTIAL, VERIFIED, Fix, FixTarget, Report, TargetResult
from graphmend.core.tables import (FIX_ERROR, FIX_NONE, FIX_NOT_KEPT, FIX_PARTIAL, FIX_VERIFIED, SWEEP_BREAKS,
                                        SWEEP_CLEAN, SWEEP_NOT_BUILT, PopulationRow, SweepRow)

ALL = "all"  # the modality of a library's total row


def files_to_fix(report: Report, files: dict[str, str], mode: str) -> list[str]:
    """The generated files (names in ``files``) whose target breaks or recompiles (a recompile
    with a cause) in ``mode``, in order."""
    return sorted({Path(t.file).name for t in report.targets
                   if t.run_mode == mode and not t.error
                   and (t.breaks or t.graph_break_count or t.caused_recompiles)
                   and Path(t.file).name in files})


def run_fixes(folder: Path, files: dict[str, str], report: Report, config: Config, jobs: int,
              timeout: Optional[float], calls: int, progress=None) -> dict[str, object]:
    """{run mode: FixRun} of ``mend fix`` over the files of ``folder`` whose target breaks or
    recompiles in that mode (verification only: nothing is written), over the sweep's ``calls``."""
    from graphmend.fixing import FixOptions, run_fix

    runs: dict[str, object] = {}
    for mode in config.modes:
        names = files_to_fix(report, files, mode)
        if names:
            runs[mode] = run_fix([str(folder / n) for n in names], dataclasses.replace(config, modes=(mode,)),
                                 FixOptions(jobs=jobs, timeout=timeout, calls=calls), progress=progress)
    return runs


def _status(ft: FixTarget, by_site: dict[tuple[str, int], list[Fix]]) -> str:
    """How the breaks and recompiles ``ft`` lost were removed: by verified rewrites only, with
    a partially verified one among them, or with one ``mend fix --write`` would not write (or
    with no record of its own)."""
    if ft.error:
        return FIX_ERROR
    if ft.breaks_before - ft.breaks_after <= 0 and ft.recompiles_before - ft.recompiles_after <= 0:
        return FIX_NONE
    statuses = [f.status if f else "" for key in ft.fixes for f in by_site.get(_site_key(key), [None])]
    if statuses and all(st == VERIFIED for st in statuses):
        return FIX_VERIFIED
    if statuses and all(st in (VERIFIED, PARTIAL) for st in statuses):
        return FIX_PARTIAL
    return FIX_NOT_KEPT


def _site_key(site: str) -> tuple[str, int]:
    path, _, line = site.rpartition(":")
    return os.path.realpath(path), int(line) if line.isdigit() else 0


def fix_rows(rows: Sequence[SweepRow], mode: str, fix_targets: Sequence[FixTarget], targets: Sequence[TargetResult],
             fixes: Sequence[Fix], model_of_file: dict[str, str]) -> None:
    """Fill the fix fields of the ``mode`` rows from one ``run_fix`` report (its fix_targets,
    targets and fix records); ``model_of_file``: generated file name -> model."""
    by_site: dict[tuple[str, int], list[Fix]] = {}
    for f in fixes:
        by_site.setdefault((os.path.realpath(f.file), f.line), []).append(f)
    file_of = {t.name: Path(t.file).name for t in targets}
    row_of = {r.model: r for r in rows if r.run_mode == mode}
    for ft in fix_targets:
        row = row_of.get(model_of_file.get(file_of.get(ft.name, ""), ""))
        if row is None:
            continue
        row.fix = _status(ft, by_site)
        if row.fix == FIX_ERROR:
            row.fix_why = (ft.error or "").strip().splitlines()[0][:300] if ft.error else ""
            continue
        row.breaks_after = ft.breaks_after
        row.breaks_removed = max(0, ft.breaks_before - ft.breaks_after)
        row.recompiles_after = ft.recompiles_after
        row.recompiles_removed = max(0, ft.recompiles_before - ft.recompiles_after)
        if row.fix == FIX_NOT_KEPT:
            # the first rewrite mend fix would not write, and its own verdict (a timeout, a
            # difference another target showed)
            unkept = next((f for key in ft.fixes for f in by_site.get(_site_key(key), [])
                           if f.status not in (VERIFIED, PARTIAL)), None)
            row.fix_why = (f"{Path(unkept.file).name}:{unkept.line} {unkept.rule} {unkept.status}: "
                           f"{' '.join(unkept.reason.split())[:240]}" if unkept is not None else
                           "a rewrite that removed breaks here is not one mend fix --write writes (see mend fix)")


def _add(p: PopulationRow, rows: Sequence[SweepRow]) -> None:
    models = {r.model for r in rows}
    p.enumerated = len(models)
    p.built = len({r.model for r in rows if r.status != SWEEP_NOT_BUILT})
    ran = [r for r in rows if r.status in (SWEEP_CLEAN, SWEEP_BREAKS)]
    broke = [r for r in ran if r.status == SWEEP_BREAKS]
    p.pairs, p.breaking = len(ran), len(broke)
    p.breaks = sum(r.breaks for r in broke)
    p.graph_breaks = sum(r.graph_break_count for r in broke)
    p.recompiling = sum(1 for r in ran if r.recompiles)
    p.recompiles = sum(r.recompiles for r in ran)
    p.recompiles_located = sum(r.recompiles_located for r in ran)
    p.recompiles_after_break = sum(r.recompiles_after_break for r in ran)
    # of the fix's own recompiles, those gone where every rewrite applied is verified
    p.recompiles_removed = sum(r.recompiles_removed for r in ran if r.fix == FIX_VERIFIED)
    for r in broke:
        zero = r.breaks_after == 0 and r.breaks_removed > 0
        if r.fix == FIX_VERIFIED:
            p.removed += r.breaks_removed
            p.zeroed += zero
        elif r.fix == FIX_PARTIAL:
            p.removed_partial += r.breaks_removed
            p.zeroed_partial += zero
        elif r.fix == FIX_NOT_KEPT:
            p.removed_not_kept += r.breaks_removed
        elif r.fix == FIX_ERROR:
            p.fix_errors += 1
    p.removed_pct = round(100 * p.removed / p.breaks, 1) if p.breaks else 0.0


def population(rows: Sequence[SweepRow], library: str) -> list[PopulationRow]:
    """Per modality (in order of first appearance), then the library's total: the table the
    repair work is judged on."""
    by: dict[str, list[SweepRow]] = {}
    for r in rows:
        by.setdefault(r.modality or "-", []).append(r)
    out = []
    for modality, rs in list(by.items()) + [(ALL, list(rows))]:
        p = PopulationRow(library=library, modality=modality)
        _add(p, rs)
        out.append(p)
    return out
