"""Diffusion sampling loops as diffusers pipelines write them: a denoiser called once per
timestep, then a scheduler that steps the sample. The Euler scheduler finds where the first
timestep is in its schedule with `nonzero` and reads the index back with `.item()` (every
diffusers scheduler's `index_for_timestep`), then counts steps in a Python int. The DDIM
scheduler indexes its `alphas_cumprod` with the timestep itself, a 0-d integer tensor, which
Python reads back as an int (`__index__`), and picks the previous step's value with a
conditional expression on it."""

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


class DDIMScheduler:
    """diffusers' DDIM scheduler, reduced to the alphas it reads at a timestep and the one before."""

    def __init__(self, train_steps: int = 1000, steps: int = 4):
        self.alphas_cumprod = torch.cumprod(1.0 - torch.linspace(1e-4, 0.02, train_steps), dim=0)
        self.final_alpha_cumprod = torch.tensor(1.0)
        self.step_ratio = train_steps // steps
        self.timesteps = torch.arange(steps - 1, -1, -1) * self.step_ratio

    def step(self, model_output, timestep: torch.Tensor, sample):
        prev_timestep = timestep - self.step_ratio
        alpha_prod_t = self.alphas_cumprod[timestep]
        alpha_prod_t_prev = self.alphas_cumprod[prev_timestep] if prev_timestep >= 0 else self.final_alpha_cumprod
        beta_prod_t = 1 - alpha_prod_t
        pred_original_sample = (sample - beta_prod_t**0.5 * model_output) / alpha_prod_t**0.5
        return alpha_prod_t_prev**0.5 * pred_original_sample + (1 - alpha_prod_t_prev) ** 0.5 * model_output


class DDIMLoop(nn.Module):
    def __init__(self, dim: int = 8, steps: int = 4):
        super().__init__()
        self.denoiser = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.scheduler = DDIMScheduler(steps=steps)

    def forward(self, sample):
        for t in self.scheduler.timesteps:
            noise = self.denoiser(sample)
            sample = self.scheduler.step(noise, t, sample)
        return sample


def mend_target_ddim_loop():
    torch.manual_seed(0)
    return DDIMLoop().eval(), (torch.randn(2, 8),)
