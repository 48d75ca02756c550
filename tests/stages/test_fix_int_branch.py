"""A branch on an int read from data is no tensor branch. Dynamo calls both "Data-dependent
branching" (GM101); its debug context tells them apart ("attempted to jump with
SymNodeVariable()" against "TensorVariable()"). In eager such a condition is a Python int,
which ``torch.where`` cannot take: the line gives the planner no hint that its condition is a
tensor, and the fix says why it leaves it (graphmend/fix_candidates.py ``_jumps_on_int``).
Such branches appear once another fix keeps a read-back int in the graph (diffusers' step index
after its ``nonzero`` lookup is kept as an unbacked int)."""

from __future__ import annotations

import pytest

from graphmend.core.model import Break
from graphmend.fix_candidates import _jumps_on_int

PROGRAM = '''import torch
from torch import nn


def _count(t):
    return int(t.sum().item())


def _fake(t):
    # an int read from data: unbacked under torch.compile
    return torch.library.get_ctx()._shape_env.create_unbacked_symint()


count = torch.library.custom_op("intbranch::count", _count, mutates_args=(), schema="(Tensor t) -> SymInt")
count.register_fake(_fake)


class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        n = count(x > 0)
        h = self.fc(x)
        if n < 3:
            h = h * 2
        return h


def mend_target_counted():
    torch.manual_seed(0)
    return Counted(), (torch.randn(2, 4),)
'''


def test_which_branches_are_on_an_int():
    def jump(context, reason="Data-dependent branching"):
        return Break(rule="GM101", category="control-flow", reason=reason, context=context)

    assert _jumps_on_int(jump("attempted to jump with SymNodeVariable()"))
    assert _jumps_on_int(jump("", reason="generic_jump SymNodeVariable()"))  # older torch: the reason says it
    assert not _jumps_on_int(jump("attempted to jump with TensorVariable()"))
    assert not _jumps_on_int(jump(""))


@pytest.mark.slow
def test_a_branch_on_an_unbacked_int_is_left_with_its_reason(tmp_path, mend_fix_write):
    path = tmp_path / "counted.py"
    path.write_text(PROGRAM)
    _, report = mend_fix_write(path)
    (brk,) = [b for t in report["targets"] for b in t["breaks"]]
    assert (brk["rule"], brk["line"]) == ("GM101", 26) and "SymNodeVariable" in brk["context"], brk
    (fix,) = report["fixes"]
    assert fix["status"] == "advice" and "`n < 3` is not a tensor expression" in fix["reason"], fix
    assert path.read_text() == PROGRAM
