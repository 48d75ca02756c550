"""The layout of generated code: a comparison too long for its line is split before its
operator. It used to recurse without end (split -> parenthesize -> operators -> split of the
same comparison), which left transformers' Longformer unfixed: its size asserts sit deep
enough that one `_mend_check(size(0) == ...)` line does not fit."""

from __future__ import annotations

import libcst as cst

from rewrites.fixes import fix_source
from rewrites.fixes.layout import lay_out

DEEP_ASSERT = '''import torch


class Attention(torch.nn.Module):
    def forward(self, scores, batch_size_times_the_number_of_heads, max_num_global_attn_indices):
        if scores is not None:
            if scores.dim() > 0:
                assert list(scores.size()) == [batch_size_times_the_number_of_heads * self.num_heads_of_this_layer, max_num_global_attn_indices], "wrong size"
        return scores
'''


def test_a_long_comparison_is_split_before_its_operator():
    stmt = cst.parse_statement("x = aaaaaaaaaaaaaaaaaaaaaaaaaaaa.size(0) == bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb * cccccccccccccccccccc\n")
    out = cst.Module(body=[lay_out(stmt, base=40, width=88)]).code
    cst.parse_module(out)
    assert "\n" in out.strip() and all(40 + len(line) <= 88 for line in out.splitlines()[1:]), out
    assert out.replace(" ", "").replace("\n", "").replace("(", "").replace(")", "") == \
        "x=aaaaaaaaaaaaaaaaaaaaaaaaaaaa.size0==bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb*cccccccccccccccccccc"


def test_a_deep_size_assert_is_rewritten_not_refused_as_too_deep():
    line = DEEP_ASSERT.splitlines().index(next(l for l in DEEP_ASSERT.splitlines() if "assert" in l)) + 1
    r = fix_source(DEEP_ASSERT, [line])
    assert r.error is None, r.error
    assert r.changed and "_mend_check(" in r.new_source and [s.rule for s in r.applied] == ["GM401"]
    cst.parse_module(r.new_source)


def test_a_long_comprehension_is_split_as_the_formatters_split_it():
    stmt = cst.parse_statement("y = [linecache.getline(frames[-1].filename, frames[-1].lineno + i).rstrip() "
                               "for i in (1, 2, 3) if i]\n")
    out = cst.Module(body=[lay_out(stmt, base=8, width=88)]).code
    assert out == ("y = [\n    linecache.getline(frames[-1].filename, frames[-1].lineno + i).rstrip()\n"
                   "    for i in (1, 2, 3)\n    if i\n]\n"), out


def test_a_long_ternary_is_split_before_if_and_else():
    """A Python elif chain folded into a torch.where arm (I-BERT's calibration) is a ternary: too
    long for its line, it goes one part per line inside its parentheses, as black and ruff put it."""
    stmt = cst.parse_statement("y = torch.where(c, a, (torch.min(self.x_min, x_min) if self.act_range_momentum == -1 "
                               "else self.x_min * self.act_range_momentum + x_min))\n")
    out = cst.Module(body=[lay_out(stmt, base=8, width=88)]).code
    assert out == ("y = torch.where(\n    c,\n    a,\n    (\n        torch.min(self.x_min, x_min)\n"
                   "        if self.act_range_momentum == -1\n"
                   "        else self.x_min * self.act_range_momentum + x_min\n    ),\n)\n"), out


def test_a_generator_argument_is_split_as_a_comprehension_without_a_comma():
    """``any(x for x in xs,)`` is a syntax error: a sole generator argument splits like black's
    (element, then its ``for`` clause, each on a line), with no trailing comma."""
    stmt = cst.parse_statement("if any(t.dtype != self.dtype for t in (*self.classifier.parameters(), "
                               "*self.classifier.buffers())):\n    pass\n")
    out = cst.Module(body=[lay_out(stmt, base=8, width=88)]).code
    cst.parse_module(out)
    assert out == ("if any(\n    t.dtype != self.dtype\n"
                   "    for t in (*self.classifier.parameters(), *self.classifier.buffers())\n):\n    pass\n")
