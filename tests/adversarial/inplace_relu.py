"""``F.relu(x, inplace=True)`` in the else arm: evaluated on both paths it rewrites the
caller's tensor even when the other arm is taken."""

import torch
from torch.nn import functional as F

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("inplace", "in-place", "impure", "mutat", "side effect", "input")


def act(x):
    if x.mean() > 0:
        y = x * 0.5
    else:
        y = F.relu(x, inplace=True)
    return y + 1


def mend_target_inplace_relu():
    torch.manual_seed(0)
    x = torch.randn(3, 4) + 1.0
    return target(act, (x,), inputs=[((torch.randn(3, 4) - 1.0,), {})])


NAIVE = naive(__file__, """
    if x.mean() > 0:
        y = x * 0.5
    else:
        y = F.relu(x, inplace=True)
""", """
    y = torch.where(x.mean() > 0, x * 0.5, F.relu(x, inplace=True))
""")
