"""Masked mean with an empty mask: ``s / m.sum()`` is 0 / 0 in the unselected arm."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "division", "divide", "non-total", "empty")


def masked_mean(x, m):
    if m.sum() > 0:
        s = (x * m).sum()
        y = s / m.sum()
    else:
        y = x.sum() * 0.0
    return y


def mend_target_nan_masked_mean():
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    m = (torch.rand(3, 4) > 0.5).float()
    m[0, 0] = 1.0
    return target(masked_mean, (x, m), inputs=[((torch.randn(3, 4), torch.zeros(3, 4)), {})])


NAIVE = naive(__file__, """
    if m.sum() > 0:
        s = (x * m).sum()
        y = s / m.sum()
    else:
        y = x.sum() * 0.0
""", """
    y = torch.where(m.sum() > 0, (x * m).sum() / m.sum(), x.sum() * 0.0)
""")
