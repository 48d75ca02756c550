"""Capture against torch._dynamo.explain, on every corpus target and the tracer's fixtures.

The captures run once per session (workers in parallel); the explain reference runs all
targets in one process."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphmend.config import Config
from graphmend.discovery import discover
from tracer.capture import capture_targets

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "tests" / "fixtures" / "dynamic" / "models"
CORPUS = ROOT / "corpus"


def _specs():
    specs = discover([str(SMALL)], Config()).targets
    if CORPUS.is_dir():
        specs += discover([str(CORPUS)], Config()).targets
    return specs


@pytest.fixture(scope="session")
def captured():
    specs = _specs()
    return specs, {r.name: r for r in capture_targets(specs, jobs=2, timeout=240)}


@pytest.fixture(scope="session")
def explained(tmp_path_factory, captured):
    specs, _ = captured
    path = tmp_path_factory.mktemp("explain") / "specs.json"
    path.write_text(json.dumps([dataclasses.asdict(s) for s in specs]))
    proc = subprocess.run([sys.executable, str(ROOT / "tests/fixtures/dynamic/explain_ref.py"), str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    line = [l for l in proc.stdout.splitlines() if l.startswith("EXPLAIN-JSON ")]
    assert line, proc.stderr[-2000:]
    return json.loads(line[-1][len("EXPLAIN-JSON "):])


def test_counts_equal_explain(captured, explained):
    specs, results = captured
    assert len(results) == len(specs) >= 5
    mismatches = []
    for name, ref in explained.items():
        r = results[name]
        if isinstance(ref, str):  # explain itself failed: so must the capture
            assert r.error, name
            continue
        graphs, breaks = ref
        # explain reports graph_count - 1, i.e. -1 for a target that compiled nothing
        if (r.graph_count, r.graph_break_count) != (graphs, max(breaks, 0)):
            mismatches.append((name, (r.graph_count, r.graph_break_count), ref))
    assert not mismatches


def test_counted_breaks_match_break_count(captured):
    _, results = captured
    for r in results.values():
        if r.error:
            continue
        assert sum(1 for b in r.breaks if b.counted) <= r.graph_break_count, r.name
        assert len(r.ops_per_graph) == r.graph_count


def test_small_models(captured):
    _, res = captured
    get = lambda fn: res[f"small.py::{fn}"]
    b = get("mend_target_branch")
    assert (b.graph_count, b.graph_break_count, b.error) == (2, 1, None)
    (brk,) = b.breaks
    assert brk.rule == "GM101" and brk.category == "control-flow" and brk.counted
    assert brk.gb_type == "Data-dependent branching" and brk.registry_id == "GB0170"
    assert brk.file == str(SMALL / "small.py") and brk.line == 7 and brk.col == 7
    assert brk.source_line == "if y.sum() > 0:" and brk.function == "branch"
    assert brk.explanation and brk.hints and brk.stack[-1].function == "branch"
    assert all("/torch/" not in f.file and "/tracer/" not in f.file for f in brk.stack)

    p = get("mend_target_print")
    assert [x.rule for x in p.breaks] == ["GM201"] and p.breaks[0].source_line == 'print("step")'
    i = get("mend_target_item")
    assert [x.rule for x in i.breaks] == ["GM301"]

    # a break in a loop: Dynamo skips the frame, explain counts nothing, we still report it
    lp = get("mend_target_loop")
    assert lp.graph_break_count == 0 and lp.frames_skipped >= 1
    (skip,) = lp.breaks
    assert skip.kind == "frame_skipped" and not skip.counted and skip.rule == "GM201" and skip.line == 26

    c = get("mend_target_clean")
    assert (c.graph_count, c.graph_break_count, c.breaks, c.error) == (1, 0, [], None)
    assert c.ops_per_graph and c.ops_per_graph[0] >= 3
