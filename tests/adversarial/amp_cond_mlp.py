"""A ``torch.cond``-worthy arm calling an MLP, the other arm the input scaled: under
autocast bf16 the arms return bfloat16 and float32 (cond refuses, where promotes)."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("autocast", "dtype", "bf16", "bfloat16", "half", "precision", "module")


class Refine(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x):
        if x.mean() > 0:
            y = self.mlp(x)
        else:
            y = x * 0.5
        return y


def mend_target_amp_cond_mlp():
    torch.manual_seed(0)
    x = torch.rand(2, 8)
    return target(Refine(), (x,), inputs=[((-x,), {})])


NAIVE = naive(__file__, """
        if x.mean() > 0:
            y = self.mlp(x)
        else:
            y = x * 0.5
""", """
        y = torch.where(x.mean() > 0, self.mlp(x), x * 0.5)
""")
