"""Patch positions built image by image from ``grid_thw.tolist()`` at a function's end, then
broadcast against hidden states that need a gradient. Made one op of unbacked size, the
compiled training step would guard on that size and raise; the op serves inference only, and
no check compares its compiled values, so a plain ``mend fix`` must not offer it as verified."""

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("unsafe fix", "opaque region not made")


def positions(grid_thw):
    ids = []
    for t, h, w in grid_thw.tolist():
        ids.append(torch.arange(h * w).repeat(t))
    return torch.cat(ids)


class PatchRope(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.table = nn.Parameter(torch.linspace(0.1, 1.0, 64))

    def forward(self, x, grid_thw):
        pos = positions(grid_thw * 1)
        return self.proj(x) * self.table[pos][:, None].cos()


def mend_target_shape_tail_training_positions():
    torch.manual_seed(0)
    return target(PatchRope(), (torch.randn(10, 4), torch.tensor([[1, 2, 3], [1, 2, 2]])),
                  inputs=[((torch.randn(12, 4), torch.tensor([[2, 2, 3]])), {})])
