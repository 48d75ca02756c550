"""``F.dropout(x, training=self.training)`` in one arm: a torch function, so it looks pure,
but in train mode it consumes the global RNG."""

import torch
from torch import nn
from torch.nn import functional as F

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("rng", "random", "dropout", "train", "impure")


class NoisyGate(nn.Module):
    def forward(self, x):
        if x.mean() > 0:
            y = F.dropout(x, 0.2, training=self.training)
        else:
            y = x * 1.0
        return y


def mend_target_rng_dropout_functional():
    torch.manual_seed(0)
    x = torch.rand(3, 4)
    return target(NoisyGate(), (x,), inputs=[((-x,), {})])


NAIVE = naive(__file__, """
        if x.mean() > 0:
            y = F.dropout(x, 0.2, training=self.training)
        else:
            y = x * 1.0
""", """
        y = torch.where(x.mean() > 0, F.dropout(x, 0.2, training=self.training), x * 1.0)
""")
