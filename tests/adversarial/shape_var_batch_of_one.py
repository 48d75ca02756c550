"""Batch-norm-like whitening, skipped when the batch carries no signal. The last batch of an
epoch may hold one sample: eager code takes the other arm when it is all zeros, a plain
``torch.where`` still computes the unbiased ``var(0)`` of one sample (0 / 0), and its NaN
derivative turns every gradient NaN."""

import torch

from graphmend import Target

from _adv import naive

EXPECT = "refuse"
ACCEPT_REASONS = ("one sample", "batch of one")


def whiten(x):
    if x.abs().sum() > 1e-6:
        y = (x - x.mean(0)) / (x.var(0) + 1e-5).sqrt()
    else:
        y = x * 0.0
    return y


def mend_target_shape_var_batch_of_one():
    torch.manual_seed(0)
    x = torch.randn(8, 4)
    # the last batch of one is a batch the user has, not one the example shows
    return Target(fn=whiten, args=(x,), perturb=[((torch.zeros(1, 4),), {})])


NAIVE = naive(__file__, """
    if x.abs().sum() > 1e-6:
        y = (x - x.mean(0)) / (x.var(0) + 1e-5).sqrt()
    else:
        y = x * 0.0
""", """
    y = torch.where(x.abs().sum() > 1e-6, (x - x.mean(0)) / (x.var(0) + 1e-5).sqrt(), x * 0.0)
""")
