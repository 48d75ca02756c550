"""torch.cond rewrites of a tensor `if` (rewrites/fixes/gm1_where.py) are UNSAFE fixes: a
calibration hook on a module an arm runs makes torch.cond raise, and a second derivative
through it fails, limits the source cannot rule out. Without --unsafe-fixes no torch.cond is
written and the finding says why; with it the rewrite is offered (and verified like every fix)."""

from __future__ import annotations

import pytest

from rewrites.fixes import fix_source

REFINE = '''import torch
from torch import nn


class Refine(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 8))

    def forward(self, x):
        if x.mean() > 0:
            y = self.mlp(x)
        else:
            y = torch.tanh(x)
        return y
'''


def _build(source: str, name: str, monkeypatch):
    import sys
    import types

    mod = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, mod)  # torch.cond's tracing imports the arms' module
    exec(compile(source, f"{name}.py", "exec"), mod.__dict__)
    return mod.Refine


def test_cond_is_not_written_without_the_unsafe_flag_and_says_why():
    safe = fix_source(REFINE, lines={11}, module="refine")
    assert not safe.changed and "torch.cond" not in safe.new_source
    reasons = " ".join(r.reason for r in safe.refused if r.line == 11)
    assert "unsafe fix" in reasons and "second derivative" in reasons and "hook" in reasons, safe.refused
    assert any("--unsafe-fixes" in r.advice for r in safe.refused), safe.refused
    unsafe = fix_source(REFINE, lines={11}, module="refine", unsafe=True)
    assert [s.strategy for s in unsafe.applied] == ["cond"]


def test_the_limits_that_make_cond_unsafe(monkeypatch):
    """What the unsafe rewrite does to everyday programs on the installed torch: a recording
    calibration hook raises, a physics-informed second derivative fails; the original runs both."""
    torch = pytest.importorskip("torch")
    patched = fix_source(REFINE, lines={11}, module="refine", unsafe=True).new_source
    for source, tag in ((REFINE, "orig"), (patched, "cond")):
        torch.manual_seed(0)
        m = _build(source, f"refine_{tag}", monkeypatch)()
        ranges = []
        h = m.mlp.register_forward_hook(lambda mod, args, out: ranges.append(out.detach().abs().amax()))
        x = torch.rand(2, 8)
        try:
            m(x)
            hooked = None
        except Exception as exc:  # the measurement: which error torch.cond gives
            hooked = type(exc).__name__
        h.remove()
        t = torch.rand(2, 8).requires_grad_()
        (du,) = torch.autograd.grad(m(t).sum(), t, create_graph=True)
        try:
            torch.autograd.grad(du.sum(), t)
            second = None
        except RuntimeError as exc:
            second = str(exc)
        if source is REFINE:
            assert hooked is None and second is None and len(ranges) == 1
        else:
            assert hooked == "UncapturedHigherOrderOpError"
            assert second is not None and "does not require grad" in second
