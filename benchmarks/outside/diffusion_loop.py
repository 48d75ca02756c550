"""A DDIM-style sampler loop (diffusers' scheduler step, written out): the loop carries the
sample through a denoiser; guidance and clipping are decided on tensors."""

import torch
from torch import nn


class Denoiser(nn.Module):
    def __init__(self, dim=8, steps=4):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])
        betas = torch.linspace(1e-4, 0.02, 1000)
        self.register_buffer("alphas_cumprod", torch.cumprod(1.0 - betas, 0))
        self.steps = steps

    def eps(self, x):
        for blk in self.blocks:
            x = x + torch.tanh(blk(x))
        return x

    def forward(self, sample):
        # timestep spacing: the number of halvings of the schedule, through torch
        octaves = float(torch.tensor(self.steps).log2().round())
        stride = 1000 // (self.steps * int(2 ** octaves))
        for i in range(self.steps):
            t = 999 - i * stride * int(2 ** octaves)
            print("step", t, sample.shape)
            if sample.abs().max() > 3.0:
                sample = sample.clamp(-3.0, 3.0)
            eps = self.eps(sample)
            gain = eps.abs().mean().item()
            eps = eps + self.eps(eps) * gain
            a = self.alphas_cumprod[t]
            x0 = (sample - (1 - a).sqrt() * eps) / a.sqrt()
            x0 = x0.clamp(-1.0, 1.0)
            sample = a.sqrt() * x0 + (1 - a).sqrt() * eps
        return sample


def mend_target_diffusion_loop():
    from graphmend import Target

    torch.manual_seed(0)
    # a sample small enough that x0 stays in [-1, 1], and one that does not
    return Target(Denoiser(), (torch.randn(2, 8),), inputs=[((torch.randn(2, 8) * 1e-3,), {}),
                                                           ((torch.randn(2, 8) * 100,), {})])
