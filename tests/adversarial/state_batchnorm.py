"""``if c: h = self.norm(h)`` with BatchNorm1d: in train mode the norm updates its running
stats; any form that runs it on the untaken path too changes the buffers."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("buffer", "running", "state", "batchnorm", "mutat", "train", "impure", "module")


class MaybeNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.norm = nn.BatchNorm1d(6)

    def forward(self, x):
        h = self.fc(x)
        if h.abs().mean() > 1.0:
            h = self.norm(h)
        return torch.relu(h)


def mend_target_state_batchnorm():
    torch.manual_seed(0)
    x = torch.randn(4, 6) * 4
    return target(MaybeNorm(), (x,), inputs=[((torch.randn(4, 6) * 0.05,), {})])


NAIVE = naive(__file__, """
        if h.abs().mean() > 1.0:
            h = self.norm(h)
""", """
        h = torch.where(h.abs().mean() > 1.0, self.norm(h), h)
""")
