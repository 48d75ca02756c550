"""A print in forward: a deferred print that prints the same line in eager is sound."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class Verbose(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        print("forward: batch", x.shape[0])
        return torch.tanh(h)


def mend_target_sound_print():
    torch.manual_seed(0)
    return target(Verbose(), (torch.randn(2, 4),), inputs=[((torch.randn(3, 4),), {})])
