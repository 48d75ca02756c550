"""A fix whose break was hiding another one at the same split point (Reformer's hashing
inside an autograd.Function whose backward Dynamo then reaches, in train mode): the graph already split
there, Dynamo's count falls, so the fix is verified and the break it surfaced is reported
at its original line. Anything else new still rejects the fix."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphmend.core.model import Break, Frame, TargetResult
from graphmend.verify.run import Verdict, compare_breaks, original_line

SCALE = '''import torch


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, layer):
        ctx.layer = layer
        if x.sum() > 0:
            y = x * 2
        else:
            y = x * 3
        return y

    @staticmethod
    def backward(ctx, grad):
        # the backward only runs in training, like Reformer's reversible layers
        assert not torch.compiler.is_compiling(), "the reversible backward runs eagerly"
        return grad * 2, None


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        h = _Scale.apply(h, self)
        return torch.relu(h)


def mend_target_block():
    torch.manual_seed(0)
    return Block().eval(), (torch.randn(2, 8),)
'''


def test_break_surfaced_at_the_same_split_is_verified_and_named_at_its_original_line(tmp_path):
    pytest.importorskip("torch")
    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "scale.py").write_text(SCALE, encoding="utf-8")
    # train mode: with grad on, Dynamo traces the autograd.Function's backward too
    run = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--train", "--format", "json", "--quiet",
                          str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    assert run.returncode == 1, run.stderr  # a verified fix left unwritten
    report = json.loads(run.stdout)
    fixes = [f for f in report["fixes"] if f["status"] == "verified"]
    assert [(f["rule"], f["line"]) for f in fixes] == [("GM101", 8)], report["fixes"]
    assert "still splits at scale.py:28" in fixes[0]["reason"] and "stops at GM901 at scale.py:17" in fixes[0]["reason"]
    target = report["fix_targets"][0]
    assert target["graph_breaks_after"] < target["graph_breaks_before"], target
    # line 17 of the file on disk (the rewrite shortened the patched file by three lines)
    assert [r.split(":")[0:2] for r in target["remaining"]] == [["GM901 scale.py", "17"]], target
    assert target["outputs_equal"] is True


def _brk(line, top, fn="f", reason="r"):
    return Break(rule="GM101", category="control-flow", reason=reason, file="/m.py", line=line, function=fn,
                 stack=[Frame("/m.py", top, "forward"), Frame("/m.py", line, fn)])


ORIGINAL = "def forward():\n    call()\n\ndef f():\n    if c:\n        x = 1\n    else:\n        x = 2\n    g()\n"
PATCHED = "def forward():\n    call()\n\ndef f():\n    x = where(c, 1, 2)\n    g()\n"


def _compare(after_breaks, count_after, count_before=3):
    before = TargetResult("t", "/m.py", "t", graph_break_count=count_before, breaks=[_brk(5, 2)])
    after = TargetResult("t", "/m.py", "t", graph_break_count=count_after, breaks=after_breaks)
    v = Verdict()
    compare_breaks(v, before, after, {"/m.py": PATCHED}, {"/m.py": ORIGINAL})
    return v


def test_surfaced_needs_the_same_split_and_fewer_breaks():
    v = _compare([_brk(6, 2, reason="g")], count_after=2)  # patched line 6 is original line 9
    assert v.new_breaks == [] and [(x.where, x.split, x.hid) for x in v.surfaced] == [
        ("GM101 at m.py:9: g", "m.py:2", [("/m.py", 5)])]
    assert v.remaining_reasons == ["GM101 m.py:9: g"]
    assert _compare([_brk(6, 2)], count_after=3).new_breaks  # Dynamo's count did not fall
    assert _compare([_brk(6, 1)], count_after=2).new_breaks  # the graph splits somewhere new
    # a break in the text the rewrite wrote is the rewrite's own
    v = _compare([_brk(5, 2)], count_after=2)
    assert v.surfaced == [] and "5 (a line the rewrite wrote)" in v.new_breaks[0]


def test_a_guard_on_an_unbacked_int_the_original_never_had_is_the_rewrites_own():
    # same split, fewer breaks: it would pass as surfaced, but the sizes the rewrite kept in the
    # graph as unbacked ints are what Dynamo could not guard on (an attention kernel asking u0 > 1)
    guard = "Could not guard on data-dependent expression u0 > 1 (unhinted: u0 > 1)"
    v = _compare([_brk(6, 2, reason=guard)], count_after=2)
    assert v.surfaced == [] and v.new_breaks == [f"GM101 at m.py:9: {guard}"]
    # where the original already guarded on an unbacked int, the split rule decides as before
    before = TargetResult("t", "/m.py", "t", graph_break_count=3, breaks=[_brk(5, 2), _brk(2, 1, fn="forward", reason=guard)])
    after = TargetResult("t", "/m.py", "t", graph_break_count=2, breaks=[_brk(6, 2, reason=guard)])
    v = Verdict()
    compare_breaks(v, before, after, {"/m.py": PATCHED}, {"/m.py": ORIGINAL})
    assert v.new_breaks == [] and len(v.surfaced) == 1


def test_original_line_maps_unchanged_lines_only():
    assert [original_line(ORIGINAL, PATCHED, n) for n in range(1, 7)] == [1, 2, 3, 4, None, 9]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "x = 1", ""]), min_size=1, max_size=30), st.data())
def test_original_line_is_an_unchanged_copy(lines, data):
    """A patch replaces one block of lines with others: every line the map names is a copy
    of the patched line, in order; with lines all distinct, every line outside the block is
    named (repeated lines may be matched elsewhere, as any diff may)."""
    start = data.draw(st.integers(0, len(lines)))
    end = data.draw(st.integers(start, len(lines)))
    block = data.draw(st.lists(st.sampled_from(["new()", "y = where(c, a, b)", "z"]), max_size=4))
    patched = lines[:start] + block + lines[end:]
    original_text, patched_text = "\n".join(lines) + "\n", "\n".join(patched) + "\n"
    mapped = [original_line(original_text, patched_text, n) for n in range(1, len(patched) + 1)]
    named = [(n, o) for n, o in enumerate(mapped, 1) if o is not None]
    assert all(lines[o - 1] == patched[n - 1] for n, o in named)
    assert [o for _, o in named] == sorted(o for _, o in named)
    distinct = [f"{i}: {text}" for i, text in enumerate(lines)]  # the same edit, every line unique
    patched_d = distinct[:start] + block + distinct[end:]
    got = [original_line("\n".join(distinct) + "\n", "\n".join(patched_d) + "\n", n)
           for n in range(1, len(patched_d) + 1)]
    assert got[:start] == list(range(1, start + 1))
    assert got[start + len(block):] == list(range(end + 1, len(lines) + 1))


LOOP = "def forward(xs):\n    print(xs.shape)\n    for x in xs:\n        if x.sum() > 0:\n            x = x * 2\n    return xs\n"
LOOP_FIXED = ("def forward(xs):\n    if not is_compiling():\n        print(xs.shape)\n    for x in xs:\n"
              "        if x.sum() > 0:\n            x = x * 2\n    return xs\n")


def _skip(line, frame="forward"):
    return Break(rule="GM201", category="side-effect", reason="print", file="/m.py", line=line, function="forward",
                 kind="frame_skipped", counted=False, skipped_frame=Frame("/m.py", 1, frame),
                 stack=[Frame("/m.py", line, "forward")])


def test_a_break_in_a_frame_dynamo_skipped_before_is_surfaced_not_new():
    # the print made Dynamo skip `forward` (ran eagerly): the branch further in was there all along
    inner = Break(rule="GM101", category="control-flow", reason="Data-dependent branching", file="/m.py", line=5,
                  function="torch_dynamo_resume_in_forward_at_3", stack=[Frame("/m.py", 5, "forward")])
    before = TargetResult("t", "/m.py", "t", graph_break_count=0, breaks=[_skip(2)])
    after = TargetResult("t", "/m.py", "t", graph_break_count=1, breaks=[inner])
    v = Verdict()
    compare_breaks(v, before, after, {"/m.py": LOOP_FIXED}, {"/m.py": LOOP})
    assert v.new_breaks == [] and [(x.where, x.skipped) for x in v.surfaced] == [
        ("GM101 at m.py:4: Data-dependent branching", "forward")]
    assert "no longer skips `forward`" in v.surfaced[0].note()
    # the frame is still skipped for the same break: nothing was unhidden, the break is new
    v = Verdict()
    compare_breaks(v, before, TargetResult("t", "/m.py", "t", breaks=[_skip(3), inner]),
                   {"/m.py": LOOP_FIXED}, {"/m.py": LOOP})
    assert v.surfaced == [] and v.new_breaks
    # another function's break is new
    v = Verdict()
    other = dataclasses.replace(inner, function="helper")
    compare_breaks(v, before, TargetResult("t", "/m.py", "t", breaks=[other]), {"/m.py": LOOP_FIXED},
                   {"/m.py": LOOP})
    assert v.surfaced == [] and v.new_breaks


def test_a_frame_still_skipped_for_a_break_further_in_is_the_same_skip():
    # Dynamo skipped a frame for the print (the first break of its loop); with the print fixed
    # it skips it for the branch, the loop's first break now: one skip before and after, moved.
    # The loop's frame is not a user file (a library's sampling loop): the skip names no frame
    def branch(line, kind="graph_break", fn="forward"):
        return Break(rule="GM101", category="control-flow", reason="Data-dependent branching", file="/m.py", line=line,
                     function=fn, kind=kind, counted=kind == "graph_break", stack=[Frame("/m.py", line, fn)])

    unnamed = dataclasses.replace(_skip(2), skipped_frame=None)
    before = TargetResult("t", "/m.py", "t", graph_break_count=2, frames_skipped=1, breaks=[unnamed, branch(4)])
    moved = TargetResult("t", "/m.py", "t", graph_break_count=1, frames_skipped=1,
                         breaks=[branch(5, "frame_skipped"), branch(5)])
    v = Verdict()
    compare_breaks(v, before, moved, {"/m.py": LOOP_FIXED}, {"/m.py": LOOP})
    assert v.new_breaks == [] and v.surfaced == []
    assert v.remaining_reasons == ["GM101 m.py:4: Data-dependent branching"] * 2
    # a second frame skipped is not the same skip
    v = Verdict()
    compare_breaks(v, before, dataclasses.replace(moved, frames_skipped=2), {"/m.py": LOOP_FIXED}, {"/m.py": LOOP})
    assert v.new_breaks == ["GM101 at m.py:4: Data-dependent branching"]
