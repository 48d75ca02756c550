"""Dropout in one arm (a module): in train mode it draws random numbers only on that path."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("rng", "random", "dropout", "module", "train", "impure")


class DropMaybe(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            h = self.drop(h)
        return h


def mend_target_rng_dropout_module():
    torch.manual_seed(0)
    m = DropMaybe()
    x = torch.randn(3, 6) * 3
    return target(m, (x,), inputs=[((-x,), {}), ((x,), {})])


NAIVE = naive(__file__, """
        if h.sum() > 0:
            h = self.drop(h)
""", """
        h = torch.where(h.sum() > 0, self.drop(h), h)
""")
