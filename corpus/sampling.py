"""A diffusion sampling loop as diffusers pipelines write it: a denoiser called once per
timestep, then a scheduler that steps the sample. The scheduler finds where the first
timestep is in its schedule with `nonzero` and reads the index back with `.item()` (every
diffusers scheduler's `index_for_timestep`), then counts steps in a Python int."""

from __future__ import annotations

import torch
from torch import nn


class EulerScheduler:
    """diffusers' Euler scheduler, reduced to the step index and the sigmas it reads."""

    def __init__(self, steps: int = 4):
        self.timesteps = torch.linspace(999.0, 0.0, steps)
        self.sigmas = torch.cat([torch.linspace(1.0, 0.1, steps), torch.zeros(1)])
        self._step_index = None

    def set_timesteps(self) -> None:
        self._step_index = None

    def index_for_timestep(self, timestep, schedule_timesteps=None):
        if schedule_timesteps is None:
            schedule_timesteps = self.timesteps
        indices = (schedule_timesteps == timestep).nonzero()

        # the first step takes the second match, where there are two (img2img starts mid-schedule)
        pos = 1 if len(indices) > 1 else 0
        return indices[pos].item()

    def step(self, model_output, timestep, sample):
        if self._step_index is None:
            self._step_index = self.index_for_timestep(timestep)
        sigma = self.sigmas[self._step_index]
        dt = self.sigmas[self._step_index + 1] - sigma
        self._step_index += 1
        return sample + model_output * dt


class SamplingLoop(nn.Module):
    def __init__(self, dim: int = 8, steps: int = 4):
        super().__init__()
        self.denoiser = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.scheduler = EulerScheduler(steps)

    def forward(self, sample):
        self.scheduler.set_timesteps()
        for t in self.scheduler.timesteps:
            noise = self.denoiser(sample) * (t / 1000.0)
            sample = self.scheduler.step(noise, t, sample)
        return sample


def mend_target_sampling_loop():
    torch.manual_seed(0)
    return SamplingLoop().eval(), (torch.randn(2, 8),)
