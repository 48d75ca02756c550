"""A fix planned for some lines walks only the statements covering them
(``Analysis.visit_covering``): on corpus files and outside-style programs, for the
lines the static scan flags (all of them, and subsets), it plans exactly what the walk
of the whole module plans: the same text, rewrites and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphmend.core.config import load_config
from rewrites.fixes import base, fix_source
from rewrites.scan import scan_paths

ROOT = Path(__file__).resolve().parents[2]
# files where several families plan (the whole comparison, on every corpus file, transformers'
# files and the outside programs, is in docs/benchmarks.md: 288 plans, none differ)
FILES = [ROOT / "corpus" / f for f in ("attention.py", "decoding.py", "moe.py", "training.py", "unsupported.py")] + [
    ROOT / "tests" / "fixtures" / "outside_programs" / f
    for f in ("detection_post.py", "diffusion_loop.py", "plain_block.py")]


def _plan(src: str, lines: list[int], unsafe: bool):
    r = fix_source(src, lines, tensor_lines=lines, shape_lines=lines, numpy_lines=lines, unsafe=unsafe,
                   module="m")
    return (r.new_source, [(s.rule, s.line, s.end_line, s.description) for s in r.applied],
            sorted((x.rule, x.line, x.reason) for x in r.refused), r.error)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_focused_walk_plans_what_the_whole_walk_plans(path, monkeypatch):
    src = path.read_text(encoding="utf-8")
    lines = sorted({f.line for f in scan_paths([str(path)], load_config([str(path)])).findings})
    assert lines, f"{path.name}: the scan flags nothing"
    # every flagged line, then every other one, then the first alone; with and without unsafe fixes
    sets = [(lines, False), (lines, True), (lines[::2], True), (lines[:1], True)]
    focused = [_plan(src, ls, unsafe) for ls, unsafe in sets]
    monkeypatch.setattr(base.Analysis, "visit_covering", lambda self, visitor, ctx: self.module.visit(visitor))
    whole = [_plan(src, ls, unsafe) for ls, unsafe in sets]
    assert focused == whole
    assert any(p[1] for p in whole) or any(p[2] for p in whole)  # something was planned or refused
