"""Standardisation guarded by ``std > 0``: a constant input gives 0 / 0 in the unselected arm."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "division", "divide", "non-total")


class Standardise(nn.Module):
    def forward(self, x):
        s = x.std()
        if s > 0:
            y = (x - x.mean()) / s
        else:
            y = x - x.mean()
        return y


def mend_target_nan_std_norm():
    torch.manual_seed(0)
    return target(Standardise(), (torch.randn(4, 3),), inputs=[((torch.full((4, 3), 2.0),), {})])


NAIVE = naive(__file__, """
        if s > 0:
            y = (x - x.mean()) / s
        else:
            y = x - x.mean()
""", """
        y = torch.where(s > 0, (x - x.mean()) / s, x - x.mean())
""")
