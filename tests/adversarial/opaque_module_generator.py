"""Sparse expert dispatch whose experts add noise drawn from a generator the module owns (a
reproducible noisy-gating experiment): an opaque op that recomputes the region in backward
draws from that generator again (only the global RNG is replayed), so the gradients belong
to other noise and the generator ends elsewhere."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ("generator", "random", "rng", "noise", "draw")


class NoisyMoe(nn.Module):
    def __init__(self, dim=6, n=3):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))
        self.noise = torch.Generator().manual_seed(7)

    def forward(self, x):
        expert = x.abs().argmax(-1) % len(self.experts)
        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            idx = torch.nonzero(expert == e).squeeze(-1)
            h = self.experts[e](x[idx])
            out[idx] = h * (1 + 0.5 * torch.rand(h.shape, generator=self.noise))
        return out


def mend_target_opaque_module_generator():
    torch.manual_seed(0)
    x = torch.randn(7, 6)
    # a second batch that routes differently (an expert gets no row)
    return target(NoisyMoe(), (x,), inputs=[((x[:2] * 3,), {})])
