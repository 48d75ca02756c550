"""RMS scaling with rsqrt guarded by ``var.min() > 0``: a zero row makes x * rsqrt(0) =
0 * inf in the unselected arm."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "rsqrt", "non-total")


class RmsScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        if var.min() > 0:
            y = x * torch.rsqrt(var)
        else:
            y = x
        return y * self.weight


def mend_target_nan_rsqrt():
    torch.manual_seed(0)
    x = torch.randn(3, 6)
    trig = torch.randn(3, 6)
    trig[1] = 0.0
    return target(RmsScale(), (x,), inputs=[((trig,), {})])


NAIVE = naive(__file__, """
        if var.min() > 0:
            y = x * torch.rsqrt(var)
        else:
            y = x
""", """
        y = torch.where(var.min() > 0, x * torch.rsqrt(var), x)
""")
