"""A ternary over total arms."""

import torch

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


def half_or_negate(x):
    y = x * 0.5 if x.mean() > 0 else -x
    return y + 1


def mend_target_sound_ternary():
    torch.manual_seed(0)
    x = torch.rand(3, 4)
    return target(half_or_negate, (x,), inputs=[((-x,), {})])
