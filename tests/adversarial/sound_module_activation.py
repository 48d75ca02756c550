"""Choosing between two total activations of a Linear's output (parameter gradients flow
through either arm)."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class Switch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:
            y = torch.tanh(h)
        else:
            y = torch.sigmoid(h)
        return y


def mend_target_sound_module_activation():
    torch.manual_seed(0)
    x = torch.randn(3, 4) * 4
    return target(Switch(), (x,), inputs=[((-x,), {})])
