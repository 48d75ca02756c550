"""A module with a sparse expert dispatch, differentiated with `torch.func.grad` inside the
forward (a per-example sensitivity, as influence functions do): an opaque op made of an
autograd.Function without `setup_context` cannot run under functorch transforms."""

import torch
from torch import nn
from torch.func import grad

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("functorch", "torch.func", "setup_context", "transform", "break", "graph", "re-trace", "fake tensor")


class Moe(nn.Module):
    def __init__(self, dim=6, n=3):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))

    def dispatch(self, x):
        expert = x.abs().argmax(-1) % len(self.experts)
        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            idx = torch.nonzero(expert == e).squeeze(-1)
            out[idx] = self.experts[e](x[idx])
        return out

    def forward(self, x):
        sensitivity = grad(lambda h: self.dispatch(h).pow(2).sum())(x.detach())
        return self.dispatch(x) + sensitivity


def mend_target_opaque_func_grad():
    torch.manual_seed(0)
    x = torch.randn(7, 6)
    # a second batch that routes differently (an expert gets no row)
    return target(Moe(), (x,), inputs=[((x[:2] * 3,), {})])
