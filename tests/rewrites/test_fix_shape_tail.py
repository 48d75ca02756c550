"""GM302 / GM504 shape tails (rewrites/fixes/gm5_shape_tail.py): a function's last lines whose
result's sizes depend on data become a custom op whose fake runs the same lines on fake tensors.
The rewritten code, as the family's cases write it, runs: eager calls are the lines themselves
(results and exceptions), compiled calls without grad keep one graph over grids of other sizes
and give the same values, lines that branch on a value they read break where the original broke,
with grad or under autocast the lines run as written (a parameter keeps its gradient), the fix is
offered only with --unsafe-fixes, and a rewrite an earlier family made inside the lines wins whole."""

from __future__ import annotations

import sys
import types

import pytest

from rewrites.fixes import fix_source, gm5_shape_tail
from rewrites.fixes.base import Analysis, Context

torch = pytest.importorskip("torch")

POSITIONS, ROWS = gm5_shape_tail.CASES[0], gm5_shape_tail.CASES[1]
GRIDS = ([[2, 4, 4], [1, 2, 6]], [[1, 6, 2], [2, 2, 2]], [[3, 2, 2], [1, 4, 4], [2, 2, 4]])


def _module(source: str, name: str) -> dict:
    """``source`` as the module ``name`` (Dynamo looks a traced function's module up)."""
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)
    return mod.__dict__


def _made(fn):
    """``fn`` of a grid the graph computes, as a model's is (Dynamo reads an input's values as constants)."""
    return lambda grid, *rest: fn(grid * 1, *rest)


def _explain(fn, *args):
    torch._dynamo.reset()
    return torch._dynamo.explain(_made(fn))(*args)


@pytest.mark.parametrize("case,entry,tensors", [(POSITIONS, "positions", 1), (ROWS, "patch_rows", 2)])
def test_compiled_the_lines_are_one_graph_and_give_the_original_values(case, entry, tensors):
    original = _module(case.before, "shape_tail_original")[entry]
    mended = _module(case.after, f"shape_tail_{entry}")[entry]
    assert _explain(original, torch.tensor(GRIDS[0])).graph_break_count >= 1  # the break the fix answers
    with torch.no_grad():  # the op serves inference
        assert _explain(mended, torch.tensor(GRIDS[0])).graph_break_count == 0
    torch._dynamo.reset()
    counts = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(_made(mended), backend=counts, fullgraph=True)
    for grid in GRIDS:
        g = torch.tensor(grid)
        with torch.no_grad():
            want, got = original(g), compiled(g)
        want, got = (want, got) if tensors > 1 else ((want,), (got,))
        for w, o in zip(want, got):
            assert w.dtype == o.dtype and w.shape == o.shape and torch.equal(w, o), grid
    assert counts.frame_count <= 2, "the sizes that depend on data are unbacked: no graph per grid"


def test_not_compiling_a_call_is_the_lines_themselves():
    mended = _module(POSITIONS.after, "shape_tail_eager")["positions"]
    original = _module(POSITIONS.before, "shape_tail_eager_original")["positions"]
    g = torch.tensor(GRIDS[2])
    assert torch.equal(mended(g), original(g))
    bad = torch.tensor([[1.5, 2.0, 2.0]])  # float sizes: arange's error, raised by the lines
    with pytest.raises(TypeError) as want:
        original(bad)
    with pytest.raises(TypeError) as got:
        mended(bad)
    assert str(got.value) == str(want.value)


def test_lines_that_branch_on_a_value_they_read_break_there_as_before():
    source = POSITIONS.before.replace("        ids.append(rows.repeat(t))",
                                      "        if t > 2:\n            rows = rows * 2\n        ids.append(rows.repeat(t))")
    r = fix_source(source, lines={7}, unsafe=True)
    assert [s.rule for s in r.applied] == ["GM302"]
    original = _module(source, "shape_tail_branch_original")["positions"]
    mended = _module(r.new_source, "shape_tail_branch")["positions"]
    with torch.no_grad():
        reasons = _explain(mended, torch.tensor(GRIDS[2])).break_reasons  # the fake cannot run the lines
        assert any("Data dependent" in b.reason for b in reasons), reasons
        torch._dynamo.reset()
        compiled = torch.compile(_made(mended), backend="aot_eager")
        for grid in GRIDS:
            assert torch.equal(compiled(torch.tensor(grid)), original(torch.tensor(grid)))


def test_with_grad_the_lines_run_and_a_parameter_keeps_its_gradient():
    source = '''import torch


def spread(grid_thw: torch.Tensor, w: torch.Tensor):
    counts = grid_thw.prod(-1)
    rows = torch.repeat_interleave(w, counts)
    return rows * rows
'''
    r = fix_source(source, lines={6}, shape_lines={6}, unsafe=True)
    assert [s.rule for s in r.applied] == ["GM504"]
    original = _module(source, "shape_tail_grad_original")["spread"]
    mended = _module(r.new_source, "shape_tail_grad")["spread"]
    g = torch.tensor([[1, 2, 2], [2, 1, 3]])
    w0 = torch.tensor([0.5, -2.0], requires_grad=True)
    w1 = w0.detach().clone().requires_grad_()
    original(g, w0).sum().backward()
    torch._dynamo.reset()
    torch.compile(_made(mended), backend="aot_eager")(g, w1).sum().backward()
    assert torch.equal(w0.grad, w1.grad)
    reasons = _explain(mended, g, w1).break_reasons  # grad on: the lines, and their break, as written
    assert any("Dynamic shape" in b.reason for b in reasons), reasons


def test_under_autocast_the_lines_run_as_written():
    """A compiled graph would run the op without the caller's autocast: the lines run instead."""
    mended = _module(POSITIONS.after, "shape_tail_autocast")["positions"]
    original = _module(POSITIONS.before, "shape_tail_autocast_original")["positions"]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        reasons = _explain(mended, torch.tensor(GRIDS[0])).break_reasons
        assert any("Data dependent" in b.reason for b in reasons), reasons
        torch._dynamo.reset()
        got = torch.compile(_made(mended), backend="aot_eager")(torch.tensor(GRIDS[0]))
        assert torch.equal(got, original(torch.tensor(GRIDS[0])))


def test_offered_only_with_unsafe_fixes_and_then_partially_verified():
    r = fix_source(POSITIONS.before, lines={7})
    assert not r.changed and any("unsafe fix" in x.reason and "--unsafe-fixes" in x.advice for x in r.refused)
    r = fix_source(POSITIONS.before, lines={7}, unsafe=True)
    assert [bool(s.caveat) for s in r.applied] == [True]  # a caveat: partially verified, however the checks go


def test_an_earlier_familys_rewrite_inside_the_lines_is_kept_whole():
    """GM302's split sizes (gm3_unbacked, a statement it claims first) inside lines this family
    would move: this family's edits, the removal of the lines after it included, all go."""
    source = '''import torch


def route(x, gates):
    sizes = gates.long().sum(0).tolist()
    parts = x.split(sizes, dim=0)
    return torch.cat([p * 2 for p in parts])
'''
    assert gm5_shape_tail.plan(Analysis(source), Context(lines={5}, unsafe=True)).edits, "it plans the lines alone"
    r = fix_source(source, lines={5}, unsafe=True)
    assert [s.strategy for s in r.applied] == ["unbacked"] and "list of unbacked ints" in r.applied[0].description
    assert "    parts = x.split(sizes, dim=0)\n    return torch.cat([p * 2 for p in parts])\n" in r.new_source
