"""``x.add_(-1.0)`` in one arm: the caller's tensor changes on that path only."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("side effect", "inplace", "in-place", "mutat", "add_", "impure")


def shift(x):
    if x.max() > 1:
        y = x.add_(-1.0)
    else:
        y = x
    return y * 3


def mend_target_inplace_add_():
    torch.manual_seed(0)
    x = torch.rand(2, 5) * 0.5
    return target(shift, (x,), inputs=[((torch.rand(2, 5) + 1.0,), {})])


NAIVE = naive(__file__, """
    if x.max() > 1:
        y = x.add_(-1.0)
    else:
        y = x
""", """
    y = torch.where(x.max() > 1, x.add_(-1.0), x)
""")
