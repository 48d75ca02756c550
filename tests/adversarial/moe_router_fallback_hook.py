"""An MoE router with a load monitor: forward hooks on the router's layers count how many
times each ran (a routing dashboard). When the router is unsure (a flat distribution) the
tokens go through a dense fallback layer instead. Rewritten as ``torch.where``, both the
fallback and the sharpening run on every batch: the monitor's counts change, and so does
the sequence of module calls a hook sees."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("hook", "module call", "calls", "called", "torch.cond", "cond", "pure")

CALLS: dict = {}


def _count(name):
    def hook(mod, args, out):
        CALLS[name] = CALLS.get(name, 0) + 1

    return hook


class Router(nn.Module):
    def __init__(self, dim=6, experts=4):
        super().__init__()
        self.gate = nn.Linear(dim, experts)
        self.fallback = nn.Linear(dim, experts)
        self.gate.register_forward_hook(_count("gate"))
        self.fallback.register_forward_hook(_count("fallback"))

    def forward(self, x):
        probs = self.gate(x).softmax(-1)
        if probs.max() < 0.4:  # unsure: dense fallback scores
            probs = self.fallback(x).softmax(-1)
        return probs


def mend_target_moe_router_fallback_hook():
    torch.manual_seed(0)
    x = torch.randn(5, 6)
    return target(Router(), (x,), inputs=[((x * 0.01,), {}), ((x * 20,), {})])


NAIVE = naive(__file__, """
        if probs.max() < 0.4:  # unsure: dense fallback scores
            probs = self.fallback(x).softmax(-1)
""", """
        probs = torch.where(probs.max() < 0.4, self.fallback(x).softmax(-1), probs)
""")
