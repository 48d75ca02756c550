"""Verification's re-trace of the patched program sees what a user's first compiled call sees
(graphmend/verify/worker.py, ``_retrace``): it runs on the target loaded afresh, not on the
module the compared calls ran on. A module that caches something in a plain attribute on its
first call (torchvision's ``MultiScaleRoIAlign`` and its scales) skips, once called, the code
a fix there rewrote; re-traced on that module, a break the fix did not remove looked gone."""

from __future__ import annotations

from typing import Optional

import pytest

pytest.importorskip("torch")

from graphmend.core.discovery import TargetSpec  # noqa: E402
from graphmend.core.model import TargetResult  # noqa: E402
from graphmend.verify.run import run_original, verify_target  # noqa: E402

pytestmark = pytest.mark.slow

SRC = '''import torch
from torch import nn


class LazyScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.scale = None

    def forward(self, x):
        if self.scale is None:  # filled by the first call: not in the state_dict
            self.scale = float(x.abs().amax().round()){comment}
        return self.lin(x) * self.scale


def mend_target():
    torch.manual_seed(0)
    return LazyScale().eval(), (torch.randn(2, 8) * 4,)
'''


def test_the_retrace_runs_on_a_fresh_target(tmp_path):
    path = tmp_path / "lazy.py"
    path.write_text(SRC.format(comment=""), encoding="utf-8")
    spec = TargetSpec(name="lazy.py::mend_target", function="mend_target", file=str(path))
    original = run_original(spec, {}, str(tmp_path), timeout=120)
    assert original.error is None, original.error
    before = TargetResult(name=spec.name, file=str(path), function="mend_target", graph_count=2, graph_break_count=1)
    # a "fix" that changes nothing: the break at the float() must still be there
    v = verify_target(original, {str(path): SRC.format(comment="  # patched")}, before, {}, timeout=120)
    assert v.error is None, v.error
    assert v.after is not None
    assert (v.after.graph_count, v.after.graph_break_count) == (2, 1), v.after


def test_a_patched_program_that_recompiles_when_its_calls_are_made_again_got_worse():
    """Over the same calls the counts can tie (one recompile each) while the patched program,
    unlike the original, never settles: a later call of the same sizes compiles again."""
    from graphmend.core.model import Recompile
    from graphmend.verify.run import Verdict, compare_recompiles

    def result(replay):
        return TargetResult(name="m.py::t", file="m.py", function="t", replay_recompile=replay,
                            recompiles=[Recompile(function="forward", reason="self.k == 2", rule="GM702")])

    v = Verdict()
    compare_recompiles(v, result(""), result("forward at line 9: self.step == 3"))
    assert v.recompiles_grew == "its calls recompile again when made once more (forward at line 9: self.step == 3)"
    for before, after in (("", ""), ("forward at line 9: self.k == 2", "forward at line 9: self.k == 3"),
                          (None, "forward at line 9: self.step == 3")):
        v = Verdict()
        compare_recompiles(v, result(before), result(after))  # settled both, unsettled both, or not told
        assert v.recompiles_grew is None and v.replay_recompile == after


def _recompiled(*recompiles, graphs: int, replay: Optional[str] = ""):
    from graphmend.core.model import Recompile

    return TargetResult(name="m.py::t", file="m.py", function="t", graph_count=graphs, replay_recompile=replay,
                        recompiles=[Recompile(function=f, reason=why, rule=rule, expression=expr, limit=limit)
                                    for f, why, rule, expr, limit in recompiles])


STEP = ("step", "L['self']._step_index == 0", "GM702", "self._step_index", False)
INIT = ("step", "L['self']._step_index is None", "GM703", "self._step_index", False)
SIZE = ("forward", "L['x'].size()[0] == 2", "GM701", "x.shape[0]", False)


def test_a_fix_that_merges_frames_may_add_warm_up_recompiles_and_no_other():
    """A break removed merges a split-off frame into its caller, which then recompiles for
    both: one more recompile while the calls warm up (a step index set by the first call),
    accepted only where the calls made again compile nothing, none reaches the limit, each
    added one guards a value, an identity or a mode, and no more are added than graphs each
    call lost."""
    from graphmend.verify.run import Verdict, compare_recompiles

    before = _recompiled(STEP, graphs=3)
    v = Verdict()
    compare_recompiles(v, before, _recompiled(STEP, INIT, graphs=1))
    assert v.recompiles_grew is None and (v.recompiles_before, v.recompiles_after) == (1, 2)
    assert v.recompiles_warmup.startswith("1 more recompile(s) over its calls (2 instead of 1), while it warms up")
    assert v.recompiles_warmup.endswith("each call runs 2 graph(s) fewer")
    refusals = {
        "its calls recompile again when made once more": _recompiled(STEP, INIT, graphs=1, replay="step: x == 3"),
        "its calls were not made again to show it settles": _recompiled(STEP, INIT, graphs=1, replay=None),
        "a frame reaches the recompile limit": _recompiled(STEP, INIT[:4] + (True,), graphs=1),
        "GM701 forward: L['x'].size()[0] == 2 is not a warm-up recompile": _recompiled(STEP, SIZE, graphs=1),
        "more than the 1 graph(s) each call no longer compiles": _recompiled(STEP, INIT, INIT, graphs=2),
        "more than the 0 graph(s) each call no longer compiles": _recompiled(STEP, INIT, graphs=3),
    }
    for why, after in refusals.items():
        v = Verdict()
        compare_recompiles(v, before, after)
        assert v.recompiles_warmup is None and v.recompiles_grew.endswith(f"; {why}"), (why, v.recompiles_grew)
        assert v.recompiles_grew.startswith("the target now recompiles")
