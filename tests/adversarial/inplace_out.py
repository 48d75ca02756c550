"""``torch.mul(x, 2.0, out=self.buf)`` in one arm: ``out=`` writes a buffer, and autograd
refuses out= on inputs that require grad."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("out=", "impure", "mutat", "buffer", "in-place", "inplace", "side effect")


class Doubler(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(3, 4))

    def forward(self, x):
        if x.sum() > 0:
            y = torch.mul(x, 2.0, out=self.buf)
        else:
            y = x - 1.0
        return y * 2


def mend_target_inplace_out():
    torch.manual_seed(0)
    x = torch.rand(3, 4)
    return target(Doubler(), (x,), inputs=[((-torch.rand(3, 4),), {})])


NAIVE = naive(__file__, """
        if x.sum() > 0:
            y = torch.mul(x, 2.0, out=self.buf)
        else:
            y = x - 1.0
""", """
        y = torch.where(x.sum() > 0, torch.mul(x, 2.0, out=self.buf), x - 1.0)
""")
