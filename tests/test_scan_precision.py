"""The issue's precise-detection lists, one assertion per pattern, inside a module's forward."""

from __future__ import annotations

import pytest

from rewrites.scan import scan_source

HEADER = """import torch
from torch import nn, Tensor


class M(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList([nn.Linear(4, 4)])

    def forward(self, x, t, h, mask=None, err=None, tol=1e-3):
        layers = self.layers
        h = h.float()
        err = (x - h).abs().max()
"""

NOT_BREAKS = [
    "if x.shape[0] > 1:", "if mask is None:", "if self.training:", "if isinstance(x, Tensor):",
    "if self.config.flag:", "if len(layers) > 2:", "if x.dim() == 3:", "if x.dtype == torch.float16:",
    'if x.device.type == "cuda":', "if torch.jit.is_scripting():", "if torch.compiler.is_compiling():",
    "if x.size(-1) != 4 and x.numel() > 0:", "if x.requires_grad or torch.is_tensor(x):",
    "while len(layers) > 3:",
]
BREAKS = [
    ("if (x > 0).any():", "GM101"), ("if h.abs().max() > 1e4:", "GM101"), ("if t.item() > 0:", "GM101"),
    ("while err > tol:", "GM104"), ("if torch.isinf(x).any():", "GM101"),
    ("if mask is not None and mask.sum() > 0:", "GM101"), ("if x.max(-1).values.min() > 0:", "GM101"),
]


def _codes(line: str) -> list[str]:
    body = HEADER + f"        {line}\n            x = x + 1\n        return x\n"
    result = scan_source(body, path="m.py")
    assert result.error is None
    return [f.rule for f, _k, _r in result.findings if f.line == body.count("\n") - 2]


@pytest.mark.parametrize("line", NOT_BREAKS)
def test_not_a_break(line):
    assert _codes(line) == []


@pytest.mark.parametrize("line,code", BREAKS)
def test_is_a_break(line, code):
    assert code in _codes(line)


def test_item_condition_is_gm1_and_gm3():
    assert set(_codes("if t.item() > 0:")) == {"GM101", "GM301"}


def test_assert_forms():
    src = HEADER + "        assert (x >= 0).all()\n        assert (x >= 0).all(), f'bad {x.sum()}'\n        return x\n"
    lines = [f.line for f, _k, _r in scan_source(src).findings if f.rule == "GM401"]
    # Dynamo turns a tensor assert with a constant (or no) message into torch._assert_async
    assert lines == [src.count("\n") - 1]


def test_positions_and_fields():
    src = "import torch\n\ndef f(x: torch.Tensor):\n    s = 'é'; v = x.sum().item()\n    return v\n"
    (finding, key, _root), = scan_source(src, path="/abs/f.py").findings
    assert (finding.rule, finding.line, finding.col) == ("GM301", 4, 17)  # 0-based characters, not bytes
    assert finding.end_line == 4 and finding.end_col == 31
    assert finding.function == "f" and key == "f" and finding.category == "host-scalar"
    assert finding.source_line == "    s = 'é'; v = x.sum().item()" and finding.status == "potential"
