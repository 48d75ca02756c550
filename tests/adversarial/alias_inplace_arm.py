"""Outlier clipping that hands back the loader's batch itself when nothing needs clipping;
the caller then normalises the result in place, which in eager code reaches the batch. A
plain ``torch.where`` always returns a new tensor: the batch is left as it was."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("alias", "caller's tensor")


def clip(x):
    if x.abs().max() > 6.0:
        x = x.clamp(-6.0, 6.0)
    return x


def step(batch):
    out = clip(batch)
    out.mul_(0.5)  # normalised in place: the loader's batch too, when clip returned it
    return out.sum() + batch.sum()


def mend_target_alias_inplace_arm():
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    big = x.clone()
    big[0, 0] = 9.0
    return target(step, (x,), inputs=[((big,), {})])


NAIVE = naive(__file__, """
    if x.abs().max() > 6.0:
        x = x.clamp(-6.0, 6.0)
    return x
""", """
    x = torch.where(x.abs().max() > 6.0, x.clamp(-6.0, 6.0), x)
    return x
""")
