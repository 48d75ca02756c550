"""A WGAN-GP critic whose features are soft-capped when they blow up, trained with a
gradient penalty: ``autograd.grad(critic(x).sum(), x, create_graph=True)`` and a backward
through the gradient's norm. ``tanh`` and the scaling are total and twice differentiable,
so a ``torch.where`` rewrite keeps the penalty's second derivatives."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 8))
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        h = self.body(x)
        if h.abs().amax() > 3.0:  # soft cap against exploding features
            h = 3.0 * torch.tanh(h / 3.0)
        return self.head(h)


def mend_target_critic_gradient_penalty():
    torch.manual_seed(0)
    real = torch.randn(6, 4)
    return target(Critic(), (real,), inputs=[((real * 40,), {})])
