"""Verification tells float32 rounding from a change (graphmend/verify/worker.py): a patch
whose backward sums a gradient in another order differs from the original by the rounding
of the tensor's scale, and is accepted only because the same calls agree in float64; a
patch whose gradient really changed, by as little, is rejected by the float64 run."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from graphmend.core.discovery import TargetSpec  # noqa: E402
from graphmend.core.model import TargetResult  # noqa: E402
from graphmend.verify.run import run_original, verify_target  # noqa: E402

pytestmark = pytest.mark.slow

SRC = '''import torch
from torch import nn


class Rows(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(256))

    def forward(self, x):
{body}


def mend_target():
    torch.manual_seed(1)
    return Rows(), (torch.randn(64, 256) * torch.logspace(-3, 3, 64)[:, None],)
'''
ORIGINAL = "        return x * self.w"
# the same values row by row: the backward sums w's gradient in another order
REORDERED = "        return torch.stack([row * self.w for row in x])"
# the same forward, and a gradient changed by a millionth of each row's share
CHANGED = """        out = torch.stack([row * self.w for row in x])
        return out + x * (self.w - self.w.detach()) * 1e-6"""


@pytest.fixture(scope="module")
def verify(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rounding")
    path = tmp / "rows.py"
    path.write_text(SRC.format(body=ORIGINAL), encoding="utf-8")
    spec = TargetSpec(name="rows.py::mend_target", function="mend_target", file=str(path))
    original = run_original(spec, {}, str(tmp), timeout=120)
    assert original.error is None, original.error
    before = TargetResult(name=spec.name, file=str(path), function="mend_target", graph_count=1)

    def run(body: str):
        return verify_target(original, {str(path): SRC.format(body=body)}, before, {}, timeout=120)

    return original, run


def test_the_original_side_runs_train_mode_in_float64_too(verify):
    original, _ = verify
    assert "train+grad float64" in original.result["checks"]
    assert original.result["checks"].index("train+grad float64") < original.result["checks"].index("bf16")


def test_a_gradient_summed_in_another_order_is_rounding_when_float64_agrees(verify):
    _, run = verify
    v = run(REORDERED)
    assert v.error is None and v.mismatches == []
    assert len(v.rounding) == 1
    note = v.rounding[0]
    assert "the gradient of parameter w" in note and "equal in float64" in note


def test_a_gradient_that_changed_is_rejected_by_the_float64_run(verify):
    _, run = verify
    v = run(CHANGED)
    assert v.rounding == []
    assert any("train+grad float64 on input example: the gradient of parameter w" in m for m in v.mismatches)
    assert any(m.startswith("train+grad on input example") and m.endswith("; in float64 too") for m in v.mismatches)
