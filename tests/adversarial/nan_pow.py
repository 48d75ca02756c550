"""Fractional power ``x ** 1.5`` of a negative number is NaN, and so is its derivative."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "pow", "non-total")


def soft_power(x):
    if (x >= 0).all():
        y = x ** 1.5
    else:
        y = x.abs() ** 1.5
    return y.sum(0)


def mend_target_nan_pow():
    torch.manual_seed(0)
    return target(soft_power, (torch.rand(3, 4),), inputs=[((torch.randn(3, 4),), {})])


NAIVE = naive(__file__, """
    if (x >= 0).all():
        y = x ** 1.5
    else:
        y = x.abs() ** 1.5
""", """
    y = torch.where((x >= 0).all(), x ** 1.5, x.abs() ** 1.5)
""")
