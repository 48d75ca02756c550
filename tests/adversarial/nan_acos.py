"""acos in one arm: outside [-1, 1] acos is NaN and so is its derivative."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "acos", "non-total", "domain")


class ArcCos(nn.Module):
    def forward(self, c):
        if (c.abs() < 1).all():
            y = torch.acos(c)
        else:
            y = torch.acos(c.clamp(-1 + 1e-6, 1 - 1e-6))
        return y


def mend_target_nan_acos():
    torch.manual_seed(0)
    c = torch.rand(2, 4) * 1.8 - 0.9
    trig = torch.tensor([[1.5, 0.2, -0.3, 0.0], [-1.0, 0.5, 1.0, 0.1]])
    return target(ArcCos(), (c,), inputs=[((trig,), {})])


NAIVE = naive(__file__, """
        if (c.abs() < 1).all():
            y = torch.acos(c)
        else:
            y = torch.acos(c.clamp(-1 + 1e-6, 1 - 1e-6))
""", """
        y = torch.where((c.abs() < 1).all(), torch.acos(c), torch.acos(c.clamp(-1 + 1e-6, 1 - 1e-6)))
""")
