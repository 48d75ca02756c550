"""A WGAN-GP critic whose body is a sparse expert dispatch: the gradient penalty takes the
input gradient with `create_graph=True`, so training differentiates the region twice. An
opaque op whose backward has no autograd formula raises on the second derivative."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ("double backward", "second derivative", "create_graph", "autograd formula", "higher-order")


class Critic(nn.Module):
    def __init__(self, dim=6, n=3):
        super().__init__()
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(dim, dim), nn.Tanh()) for _ in range(n))
        self.head = nn.Linear(dim, 1)

    def score(self, x):
        expert = x.abs().argmax(-1) % len(self.experts)
        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            idx = torch.nonzero(expert == e).squeeze(-1)
            out[idx] = self.experts[e](x[idx])
        return self.head(out)

    def forward(self, x):
        with torch.enable_grad():
            xi = x.detach().requires_grad_()
            s = self.score(xi)
            (g,) = torch.autograd.grad(s.sum(), xi, create_graph=True)
        penalty = ((g.norm(dim=-1) - 1) ** 2).mean()
        return s.mean() + 10 * penalty


def mend_target_opaque_wgan_gp():
    torch.manual_seed(0)
    x = torch.randn(7, 6)
    # a second batch that routes differently (an expert gets no row)
    return target(Critic(), (x,), inputs=[((x[:2] * 3,), {})])
