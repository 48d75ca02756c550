"""Peak normalisation ``30.0 / peak`` guarded by ``peak > 0``: at peak == 0 the unselected
arm is inf and its backward -inf * 0."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "division", "divide", "non-total")


def normalise_peak(x):
    peak = x.abs().max()
    if peak > 0:
        scale = 30.0 / peak
    else:
        scale = torch.ones_like(peak)
    return x * scale


def mend_target_nan_peak_scale():
    torch.manual_seed(0)
    return target(normalise_peak, (torch.randn(2, 6),), inputs=[((torch.zeros(2, 6),), {})])


NAIVE = naive(__file__, """
    if peak > 0:
        scale = 30.0 / peak
    else:
        scale = torch.ones_like(peak)
""", """
    scale = torch.where(peak > 0, 30.0 / peak, torch.ones_like(peak))
""")
