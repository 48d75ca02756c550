"""Missing values replaced, else the input itself kept; the result is then clamped in place,
which in eager code clamps the caller's tensor whenever nothing was missing. A plain
``torch.where`` makes the kept arm a copy, and the caller's tensor is no longer clamped."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("alias", "caller's tensor", "in place")


def fill_missing(x):
    if torch.isnan(x).any():
        y = torch.nan_to_num(x)
    else:
        y = x
    y.clamp_(-3.0, 3.0)
    return y.sum()


def step(x):
    s = fill_missing(x)
    return s + x.sum()


def mend_target_alias_inplace_after():
    torch.manual_seed(0)
    x = torch.randn(4, 3) * 3
    holes = x.clone()
    holes[1, 1] = float("nan")
    return target(step, (x,), inputs=[((holes,), {})])


NAIVE = naive(__file__, """
    if torch.isnan(x).any():
        y = torch.nan_to_num(x)
    else:
        y = x
""", """
    y = torch.where(torch.isnan(x).any(), torch.nan_to_num(x), x)
""")
