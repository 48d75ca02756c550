"""A gate whose output a ``sigmoid`` saved for backward is zeroed where a mask says, under
a guard that asks whether any is. With the guard, a batch with nothing to zero never writes
into the output; without it, the empty write still bumps the output's version, and the
backward of ``sigmoid`` (which reads its output) raises "modified by an inplace operation"
in training. Dropping the guard is unsound here: verification's train mode on the empty
mask sees it."""

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("modified by an inplace operation",)


class Gate(nn.Module):
    def __init__(self, d=6):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        g = self.proj(x).sigmoid()
        dead = x.abs() > 3.0
        if dead.any():
            g[dead] = 0.0
        return g * x


def mend_target_masked_write_saved_output():
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    hot = x.clone()
    hot[1, 2] = 5.0
    return target(Gate(), (x,), inputs=[((hot,), {})])
