"""A residual block that calls its refiner only when the activations run large. The refiner
counts its own uses in a buffer (a usage statistic that is saved with the checkpoint and
read to prune refiners nobody needs). A ``torch.where`` rewrite runs the refiner on every
call: the counter then counts calls, not uses, and the pruning decision changes."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("buffer", "uses", "module", "call", "state", "hook")


class Refiner(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.register_buffer("uses", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.uses += 1
        return self.lin(x)


class RefinedBlock(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.refine = Refiner(dim)

    def forward(self, x):
        h = self.norm(x)
        if x.abs().mean() > 1.0:
            h = h + self.refine(h)
        return h


def mend_target_state_usage_counter_arm():
    torch.manual_seed(0)
    block = RefinedBlock()
    small = torch.randn(2, 4, 8) * 0.1
    large = torch.randn(2, 4, 8) * 10
    return target(block, (small,), inputs=[((large,), {})])


NAIVE = naive(__file__, """
        if x.abs().mean() > 1.0:
            h = h + self.refine(h)
""", """
        h = torch.where(x.abs().mean() > 1.0, h + self.refine(h), h)
""")
