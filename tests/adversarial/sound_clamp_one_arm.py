"""One-armed clamp: ``if x.max() > 6: x = x.clamp(max=6.0)`` (clamp is total)."""

import torch

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


def cap(x):
    if x.max() > 6:
        x = x.clamp(max=6.0)
    return x * 2


def mend_target_sound_clamp_one_arm():
    torch.manual_seed(0)
    x = torch.rand(2, 5) * 3
    big = x.clone()
    big[0, 0] = 9.0
    return target(cap, (x,), inputs=[((big,), {})])
