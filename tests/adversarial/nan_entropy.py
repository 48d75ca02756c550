"""Entropy with ``p.log()`` at saturation: a one-hot p gives 0 * -inf in the unselected
arm, and log's backward at 0 is infinite."""

import torch
from torch import nn
from torch.nn import functional as F

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "log", "non-total")


class Entropy(nn.Module):
    def forward(self, p):
        if (p > 0).all():
            h = -(p * p.log()).sum(-1)
        else:
            h = -(p * p.clamp_min(1e-12).log()).sum(-1)
        return h.mean()


def mend_target_nan_entropy():
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(2, 5), -1)
    onehot = F.one_hot(torch.tensor([1, 3]), 5).float()
    return target(Entropy(), (p,), inputs=[((onehot,), {})])


NAIVE = naive(__file__, """
        if (p > 0).all():
            h = -(p * p.log()).sum(-1)
        else:
            h = -(p * p.clamp_min(1e-12).log()).sum(-1)
""", """
        h = torch.where((p > 0).all(), -(p * p.log()).sum(-1), -(p * p.clamp_min(1e-12).log()).sum(-1))
""")
