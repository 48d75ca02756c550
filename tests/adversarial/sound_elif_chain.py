"""if / elif / else over a reduction, every arm total arithmetic: nested torch.where."""

import torch

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


def piecewise(x):
    s = x.mean()
    if s > 1:
        y = x * 0.5
    elif s < -1:
        y = x * 2
    else:
        y = x + 0.0
    return y


def mend_target_sound_elif_chain():
    torch.manual_seed(0)
    x = torch.rand(3, 3)
    return target(piecewise, (x,), inputs=[((x + 2,), {}), ((-x - 2,), {})])
