"""The corpus table (``mend corpus``): analyze + fix over a corpus, one row per target.

``build_table(path, config, skip_hf=False, progress=None) -> (CorpusTable, FixRun)`` runs
``graphmend.fixing.run_fix`` over the corpus folder (dynamic capture, rewrites,
verification -- the same run as ``mend fix``), reads ``manifest.toml`` beside it when there
is one, and returns per target: breaks before by category, breaks after every verified fix,
fixed, the manifest's fixable sites and how many of them went, outputs equal, branches never
exercised, and why each remaining break stays (the fix record's reason: refused
precondition, failed verification or advice; the manifest's ``why`` where it has one).
The shape follows GraphMend's evaluation table (model | breaks by type | fixed | remaining).
Rendering is ``reports.corpus_md.render`` (pure). Nothing here prints or writes.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable, Optional

from graphmend.core.config import Config
from graphmend.core.env import transformers_version
from graphmend.core.model import Break
from graphmend.core.tables import CorpusRow, CorpusTable


class CorpusError(Exception):
    pass


def load_manifest(root: Path) -> dict:
    """``manifest.toml`` targets ({} when there is none)."""
    path = root / "manifest.toml"
    if not path.is_file():
        return {}
    from graphmend.core.config import tomllib  # tomli on Python 3.10

    try:
        return tomllib.loads(path.read_text(encoding="utf-8")).get("targets", {})
    except (tomllib.TOMLDecodeError, OSError) as exc:
        raise CorpusError(f"{path}: cannot read the manifest: {exc}")


def hf_files(manifest: dict) -> list[str]:
    files = sorted({name.split("::")[0] for name, t in manifest.items() if t.get("hf")})
    return files or ["hf_models.py"]


def build_table(path: str | os.PathLike[str], config: Config, skip_hf: bool = False, timeout: Optional[float] = None,
                progress: Optional[Callable[[str, int], Callable[..., None]]] = None, jobs: int = 1):
    from graphmend.fixing import FixOptions, run_fix

    root = Path(path)
    if not root.is_dir():
        raise CorpusError(f"{path}: not a folder")
    manifest = load_manifest(root)
    if skip_hf:
        config = dataclasses.replace(config, exclude=tuple(config.exclude) + tuple(hf_files(manifest)))
    run = run_fix([str(root)], config, FixOptions(timeout=timeout, jobs=jobs), progress=progress)
    return table_from_run(run, manifest, str(root), skip_hf), run


def table_from_run(run, manifest: dict, root: str, skipped_hf: bool = False) -> CorpusTable:
    rep = run.report
    before = {t.name: t for t in rep.targets}
    rows: list[CorpusRow] = []
    seen_cats: set[str] = set()
    for ft in rep.fix_targets:
        t = before.get(ft.name)
        entry = manifest.get(ft.name, {})
        cats: dict[str, int] = {}
        for b in (t.breaks if t else []):
            cats[b.category or "unexplained"] = cats.get(b.category or "unexplained", 0) + 1
        seen_cats.update(cats)
        left = run.remaining.get(ft.name, []) if t is not None else []
        row = CorpusRow(target=ft.name, before_by_category=cats, breaks_before=ft.breaks_before,
                        breaks_after=ft.breaks_after, fixed=max(0, ft.breaks_before - ft.breaks_after),
                        outputs_equal=ft.outputs_equal, unexercised=list(ft.unexercised_branches),
                        error=ft.error or (t.error if t is not None and t.error and not t.breaks else None),
                        hf=bool(entry.get("hf")), graph_breaks_before=ft.graph_breaks_before,
                        graph_breaks_after=ft.graph_breaks_after)
        row.remaining = [_why(b, rep.fixes, entry) for b in left]
        if entry and not entry.get("hf"):
            # the table is mend fix's default (eval) run: sites only train mode reports are not in it
            fixable = [s for s in entry.get("sites", []) if s.get("fixable") and s.get("dynamic", True)
                       and "eval" in s.get("modes", ("eval", "train"))]
            file = ft.name.split("::")[0]
            gone = [s for s in fixable if not any(
                b.line == s["line"] and os.path.basename(b.file or "") == os.path.basename(file) for b in left)]
            row.fixable, row.fixable_removed = len(fixable), len(gone)
        rows.append(row)
    totals = CorpusRow(target="total", hf=False)
    for r in rows:
        for c, n in r.before_by_category.items():
            totals.before_by_category[c] = totals.before_by_category.get(c, 0) + n
        totals.breaks_before += r.breaks_before
        totals.breaks_after += r.breaks_after
        totals.fixed += r.fixed
        for name in ("graph_breaks_before", "graph_breaks_after"):
            if getattr(r, name) is not None:
                setattr(totals, name, (getattr(totals, name) or 0) + getattr(r, name))
        if r.fixable is not None:
            totals.fixable = (totals.fixable or 0) + r.fixable
            totals.fixable_removed = (totals.fixable_removed or 0) + (r.fixable_removed or 0)
    compared = [r.outputs_equal for r in rows]
    totals.outputs_equal = all(c is True for c in compared) if compared else None
    totals.unexercised = [u for r in rows for u in r.unexercised]
    from rewrites.rules import CATEGORIES

    cats = [c for c in CATEGORIES if c in seen_cats] + sorted(seen_cats - set(CATEGORIES))
    return CorpusTable(root=root, torch_version=rep.torch_version, transformers_version=transformers_version(),
                       skipped_hf=skipped_hf, categories=cats, rows=rows, totals=totals)


def _why(b: Break, fixes, entry: dict) -> str:
    """``rule file:line [status]: reason`` for a break that stays."""
    f_abs = os.path.realpath(b.file) if b.file else ""
    where = f"{os.path.basename(b.file or '?')}:{b.line}"
    reason = ""
    for f in fixes:
        if f.file == f_abs and b.line is not None and f.line <= b.line <= (f.end_line or f.line):
            reason = f"[{f.status}] {f.reason}"
            if f.status != "verified":
                break
    if not reason:
        reason = f"[not rewritten] {b.reason}"
    for s in entry.get("sites", []):
        if s.get("line") == b.line and s.get("why") and not entry.get("hf"):
            reason += f" (manifest: {s['why']})"
    return f"{b.rule} {where} {reason}"
