"""Plain arithmetic in both arms (total, pure): torch.where is a sound fix."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class Gain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            y = h * 2 + 1
        else:
            y = h - 1
        return y


def mend_target_sound_arith():
    torch.manual_seed(0)
    x = torch.randn(3, 6)
    return target(Gain(), (x,), inputs=[((-x * 5,), {}), ((x * 5,), {})])
