"""Division by a tensor guarded by ``(d != 0).all()``: the unselected x / 0 has an infinite
derivative, times the zero gradient of the arm: NaN."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("aliasing", "aliases", "grad", "nan", "not total", "division", "divide", "non-total")


def safe_ratio(x, d):
    if (d != 0).all():
        r = x / d
    else:
        r = x
    return r


def mend_target_nan_div_tensor():
    torch.manual_seed(0)
    x, d = torch.randn(2, 4), torch.rand(2, 4) + 0.5
    d0 = d.clone()
    d0[0, 1] = 0.0
    return target(safe_ratio, (x, d), inputs=[((torch.randn(2, 4), d0), {})])


NAIVE = naive(__file__, """
    if (d != 0).all():
        r = x / d
    else:
        r = x
""", """
    r = torch.where((d != 0).all(), x / d, x)
""")
