"""Sparse expert dispatch with a stochastic expert scale drawn from a Python `random.Random`
the module owns (expert dropout by a coin, per step, reproducible): a recomputing backward
draws the coins again, so the gradients follow other coins than the forward's."""

import random

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ("random", "rng", "draw", "coin", "not deterministic")


class CoinMoe(nn.Module):
    def __init__(self, dim=6, n=3):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))
        self.coins = random.Random(0)

    def forward(self, x):
        expert = x.abs().argmax(-1) % len(self.experts)
        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            idx = torch.nonzero(expert == e).squeeze(-1)
            out[idx] = self.experts[e](x[idx]) * (0.5 + self.coins.random())
        return out


def mend_target_opaque_python_random():
    torch.manual_seed(0)
    x = torch.randn(7, 6)
    # a second batch that routes differently (an expert gets no row)
    return target(CoinMoe(), (x,), inputs=[((x[:2] * 3,), {})])
