"""``if (x < 0).any(): raise ValueError(...)`` called by code that catches ValueError: a guard
that raises RuntimeError instead escapes the caller's ``except``."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("exception", "valueerror", "raise", "guard", "type", "caught", "except")


class Checked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if (x < 0).any():
            raise ValueError("inputs must be non-negative")
        return self.fc(x)


class Robust(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Checked()

    def forward(self, x):
        try:
            return self.inner(x)
        except ValueError:
            return self.inner(x.abs())


def mend_target_exc_caught_valueerror():
    torch.manual_seed(0)
    return target(Robust(), (torch.rand(2, 4),), inputs=[((torch.randn(2, 4),), {})])


NAIVE = naive(__file__, """
        if (x < 0).any():
            raise ValueError("inputs must be non-negative")
""", """
        torch._assert_async(torch.logical_not((x < 0).any()), "inputs must be non-negative")
""")
