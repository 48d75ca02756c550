"""Sparse expert dispatch (a `nonzero` per expert) whose experts carry an expert-load monitor:
a forward hook per expert counts the rows it saw into a buffer of the router. An opaque op
that recomputes the region in backward runs every hook twice a training step."""

import torch
from torch import nn

from _adv import target

# the router's parameters get no gradient in the original (argmax); the mended program
# compiled gives them zeros, which verification's compiled run sees (None vs a tensor)
EXPECT = "refuse"
ACCEPT_REASONS = ("hook", "buffer", "load", "twice", "recompute", "gradient of parameter")


class Moe(nn.Module):
    def __init__(self, dim=6, n=3):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))
        self.router = nn.Linear(dim, n)
        self.register_buffer("load", torch.zeros(n))
        for i, e in enumerate(self.experts):
            e.register_forward_hook(self._monitor(i))

    def _monitor(self, i):
        def hook(mod, args, out):  # returns None: the expert's output stays its own
            self.load[i].add_(args[0].shape[0])

        return hook

    def forward(self, x):
        expert = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            idx = torch.nonzero(expert == e).squeeze(-1)
            out[idx] = self.experts[e](x[idx])
        return out


def mend_target_opaque_moe_load_monitor():
    torch.manual_seed(0)
    x = torch.randn(7, 6)
    # a second batch that routes differently (an expert gets no row)
    return target(Moe(), (x,), inputs=[((x[:2] * 3,), {})])
