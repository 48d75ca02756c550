"""A feature gain on a cyclic schedule (SGDR-style warm restarts) kept on the module as a
Python step count (``self.step += 1``, outside the state dict): in train mode every call
scales by a different factor, so two calls of the same model on the same batch differ. A tensor ``if``
follows. Verification cannot compare the train runs of a program that is not deterministic
there, so the rewrite's train check does not run: the fix is at best partially verified and
is not written by a plain ``--write``."""

import math

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("partially verified: not written without --accept-partial",)


class CyclicGain(nn.Module):
    def __init__(self, dim=6, period=10):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.period = period
        self.step = 0

    def forward(self, x):
        h = self.proj(x)
        if self.training:
            self.step += 1
            h = h * (0.75 + 0.25 * math.cos(math.pi * (self.step % self.period) / self.period))
        if h.abs().mean() > 0.02:
            h = h / 2
        return h


def mend_target_cyclic_schedule_partial():
    torch.manual_seed(0)
    x = torch.randn(3, 6) * 3
    return target(CyclicGain(), (x,), inputs=[((x * 1e-3,), {})])
