"""sqrt in one arm: the plain torch.where form evaluates sqrt(x) where x < 0 too, and its
backward multiplies the zero gradient of the unselected arm by NaN."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "sqrt", "non-total")


class SqrtOrAbs(nn.Module):
    def forward(self, x):
        if x.min() >= 0:
            y = x.sqrt()
        else:
            y = x.abs()
        return y * 2


def mend_target_nan_sqrt():
    torch.manual_seed(0)
    x = torch.rand(4, 3) + 0.1
    trig = torch.tensor([[-1.0, 0.5, 2.0], [0.25, -0.5, 1.0]])
    return target(SqrtOrAbs(), (x,), inputs=[((trig,), {})])


NAIVE = naive(__file__, """
        if x.min() >= 0:
            y = x.sqrt()
        else:
            y = x.abs()
""", """
        y = torch.where(x.min() >= 0, x.sqrt(), x.abs())
""")
