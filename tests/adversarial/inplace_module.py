"""``nn.ReLU(inplace=True)`` behind a module attribute in a one-armed if: a module call is
not a tensor method, and this one writes its input."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("inplace", "in-place", "impure", "mutat", "module", "side effect")


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:
            h = self.act(h)
        return h * 2


def mend_target_inplace_module():
    torch.manual_seed(0)
    g = Gate()
    x = torch.randn(4, 5)
    return target(g, (x * 4,), inputs=[((-x * 4,), {})])


NAIVE = naive(__file__, """
        if h.mean() > 0:
            h = self.act(h)
""", """
        h = torch.where(h.mean() > 0, self.act(h), h)
""")
