"""A submodule that records a running peak in a buffer every time it runs, called in one
arm: the impurity is hidden behind a module call."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("buffer", "state", "mutat", "impure", "module", "in-place", "inplace", "side effect")


class PeakTracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("peak", torch.ones(()))

    def forward(self, h):
        self.peak.copy_(torch.maximum(self.peak, h.detach().abs().max()))
        return h / self.peak


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)
        self.track = PeakTracker()

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:
            h = self.track(h)
        return h


def mend_target_state_running_max():
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(3, 5)
    flip = -x if net(x).mean() > 0 else x  # the other arm
    with torch.no_grad():
        net.track.peak.fill_(1.0)
    return target(net, (x * 3,), inputs=[((flip * 3,), {})])


NAIVE = naive(__file__, """
        if h.mean() > 0:
            h = self.track(h)
""", """
        h = torch.where(h.mean() > 0, self.track(h), h)
""")
