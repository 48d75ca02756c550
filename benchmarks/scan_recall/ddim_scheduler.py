"""A DDIM-style scheduler and its sampling loop, written as diffusion libraries write them: a
plain class holding the noise schedule, a ``step`` method called once per timestep, a
denoiser module, and a loop that the caller compiles."""

import math

import torch
from torch import nn


class DDIMScheduler:
    def __init__(self, num_train_timesteps: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02):
        self.num_train_timesteps = num_train_timesteps
        betas = torch.linspace(beta_start, beta_end, num_train_timesteps)
        self.alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        self.final_alpha_cumprod = torch.tensor(1.0)
        self.num_inference_steps = None
        self.timesteps = torch.arange(num_train_timesteps).flip(0)

    def set_timesteps(self, num_inference_steps: int):
        self.num_inference_steps = num_inference_steps
        ratio = self.num_train_timesteps // num_inference_steps
        self.timesteps = (torch.arange(0, num_inference_steps) * ratio).flip(0)

    def step(self, model_output: torch.Tensor, timestep: torch.Tensor, sample: torch.Tensor, eta: float = 0.0):
        prev_timestep = timestep - self.num_train_timesteps // self.num_inference_steps
        alpha_prod_t = self.alphas_cumprod[timestep]
        if prev_timestep >= 0:
            alpha_prod_t_prev = self.alphas_cumprod[prev_timestep]
        else:
            alpha_prod_t_prev = self.final_alpha_cumprod
        beta_prod_t = 1 - alpha_prod_t
        pred_original = (sample - beta_prod_t.sqrt() * model_output) / alpha_prod_t.sqrt()
        pred_original = pred_original.clamp(-1.0, 1.0)
        direction = (1 - alpha_prod_t_prev).sqrt() * model_output
        return alpha_prod_t_prev.sqrt() * pred_original + direction

    def add_noise(self, original: torch.Tensor, noise: torch.Tensor, timesteps: torch.Tensor):
        sqrt_alpha = self.alphas_cumprod[timesteps].sqrt().flatten()
        while len(sqrt_alpha.shape) < len(original.shape):
            sqrt_alpha = sqrt_alpha.unsqueeze(-1)
        sqrt_one_minus = (1 - self.alphas_cumprod[timesteps]).sqrt().flatten()
        while len(sqrt_one_minus.shape) < len(original.shape):
            sqrt_one_minus = sqrt_one_minus.unsqueeze(-1)
        return sqrt_alpha * original + sqrt_one_minus * noise


def timestep_embedding(timesteps: torch.Tensor, dim: int, max_period: int = 10000):
    half = dim // 2
    exponent = -math.log(max_period) * torch.arange(half, dtype=torch.float32) / half
    args = timesteps[:, None].float() * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TinyDenoiser(nn.Module):
    def __init__(self, channels: int = 4, dim: int = 16):
        super().__init__()
        self.dim = dim
        self.inp = nn.Conv2d(channels, dim, 3, padding=1)
        self.temb = nn.Linear(dim, dim)
        self.out = nn.Conv2d(dim, channels, 3, padding=1)

    def forward(self, x, t):
        if t.dim() == 0:
            t = t[None].expand(x.shape[0])
        emb = self.temb(timestep_embedding(t, self.dim))
        h = torch.nn.functional.silu(self.inp(x) + emb[:, :, None, None])
        return self.out(h)


def sample_loop(unet: nn.Module, scheduler: DDIMScheduler, latents: torch.Tensor):
    for t in scheduler.timesteps:
        noise_pred = unet(latents, t)
        latents = scheduler.step(noise_pred, t, latents)
    return latents


def mend_target_step():
    torch.manual_seed(0)
    sched = DDIMScheduler()
    sched.set_timesteps(10)
    x = torch.randn(2, 4, 8, 8)
    return sched.step, (torch.randn_like(x), torch.tensor(500), x)


def mend_target_add_noise():
    sched = DDIMScheduler()
    x = torch.randn(2, 4, 8, 8)
    return sched.add_noise, (x, torch.randn_like(x), torch.tensor([10, 20]))


def mend_target_sample():
    torch.manual_seed(0)
    sched = DDIMScheduler()
    sched.set_timesteps(4)
    unet = TinyDenoiser().eval()
    return sample_loop, (unet, sched, torch.randn(1, 4, 8, 8))
