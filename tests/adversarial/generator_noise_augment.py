"""A feature augmentation with its own ``torch.Generator`` (seeded once, so a run is
reproducible apart from the global seed): noise is added only to a batch whose features are
large. A ``torch.where`` rewrite draws the noise on every batch, so the module's generator
moves where the original's did not, and every later batch gets different noise."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("generator", "random", "rng", "draw", "impure", "pure")


class NoisyFeatures(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gen = torch.Generator().manual_seed(7)

    def forward(self, x):
        h = self.fc(x)
        if h.abs().mean() > 1.0:
            h = h + 0.1 * torch.randn(h.shape, generator=self.gen)
        return h


def mend_target_generator_noise_augment():
    torch.manual_seed(0)
    x = torch.randn(3, 6)
    return target(NoisyFeatures(), (x * 0.01,), inputs=[((x * 10,), {})])


NAIVE = naive(__file__, """
        if h.abs().mean() > 1.0:
            h = h + 0.1 * torch.randn(h.shape, generator=self.gen)
""", """
        h = torch.where(h.abs().mean() > 1.0, h + 0.1 * torch.randn(h.shape, generator=self.gen), h)
""")
