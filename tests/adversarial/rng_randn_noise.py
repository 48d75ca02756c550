"""Jitter with ``torch.randn_like`` when the spread is small: evaluating the noise arm on
both paths advances the global RNG on the path that never drew."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("rng", "random", "randn", "impure")


def jitter(x):
    if x.std() < 0.5:
        y = x + 0.1 * torch.randn_like(x)
    else:
        y = x
    return y


def mend_target_rng_randn_noise():
    torch.manual_seed(0)
    return target(jitter, (torch.rand(3, 4) * 0.1,), inputs=[((torch.randn(3, 4) * 3,), {})])


NAIVE = naive(__file__, """
    if x.std() < 0.5:
        y = x + 0.1 * torch.randn_like(x)
    else:
        y = x
""", """
    y = torch.where(x.std() < 0.5, x + 0.1 * torch.randn_like(x), x)
""")
