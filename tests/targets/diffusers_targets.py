"""Targets for diffusers models (an ecosystem beyond transformers), each built from
its constructor with tiny sizes and random weights (no downloads), so that a capture takes
seconds on a CPU:

    PYTHONPATH=. python -m graphmend analyze tests/targets/diffusers_targets.py --dynamic-only
    MEND_NO_CACHE=1 PYTHONPATH=. python -m graphmend fix tests/targets/diffusers_targets.py

diffusers is imported inside each target, so this file imports without it. The diffusers
population (`mend sweep diffusers`) is on docs/results.md.
"""

from __future__ import annotations

BATCH = 2
SIZE = 16  # latent height and width
TEXT = 8  # encoder tokens
CROSS = 32  # cross_attention_dim


def _seed():
    import torch

    torch.manual_seed(0)
    return torch


def _tiny_unet2d_condition():
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=SIZE, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), norm_num_groups=8, cross_attention_dim=CROSS,
        attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    ).eval()


def mend_target_diffusers_unet2d():
    """The unconditional UNet (DDPM-style), with an attention block at the low resolution."""
    torch = _seed()
    from diffusers import UNet2DModel

    model = UNet2DModel(
        sample_size=SIZE, in_channels=3, out_channels=3, layers_per_block=1,
        block_out_channels=(32, 64), norm_num_groups=8, attention_head_dim=8,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
    ).eval()
    sample = torch.randn(BATCH, 3, SIZE, SIZE)
    return model, (sample, torch.tensor(10)), {}


def mend_target_diffusers_unet2d_condition():
    """The Stable Diffusion UNet: cross-attention on text states, a tensor timestep per row."""
    torch = _seed()
    model = _tiny_unet2d_condition()
    sample = torch.randn(BATCH, 4, SIZE, SIZE)
    states = torch.randn(BATCH, TEXT, CROSS)
    return model, (sample, torch.tensor([10, 500])), {"encoder_hidden_states": states}


def mend_target_diffusers_autoencoder_kl():
    """The VAE: encode, sample the latent distribution's mode, decode (forward with defaults)."""
    torch = _seed()
    from diffusers import AutoencoderKL

    model = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), norm_num_groups=8, sample_size=SIZE,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
    ).eval()
    return model, (torch.randn(BATCH, 3, SIZE, SIZE),), {}


def mend_target_diffusers_dit():
    """DiT: patchified latents, adaLN-Zero conditioning on timestep and class label."""
    torch = _seed()
    from diffusers import DiTTransformer2DModel

    model = DiTTransformer2DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
        num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=10,
        norm_num_groups=8,
    ).eval()
    latents = torch.randn(BATCH, 4, 8, 8)
    return model, (latents,), {"timestep": torch.tensor([10, 500]),
                               "class_labels": torch.tensor([1, 3])}


def mend_target_diffusers_transformer2d():
    """The generic Transformer2DModel on continuous (image) input with cross-attention."""
    torch = _seed()
    from diffusers import Transformer2DModel

    model = Transformer2DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=32, num_layers=1,
        norm_num_groups=8, cross_attention_dim=CROSS,
    ).eval()
    hidden = torch.randn(BATCH, 32, 8, 8)
    return model, (hidden,), {"encoder_hidden_states": torch.randn(BATCH, TEXT, CROSS)}


def mend_target_diffusers_controlnet():
    """ControlNet beside the tiny SD UNet: a conditioning image through its own encoder."""
    torch = _seed()
    from diffusers import ControlNetModel

    model = ControlNetModel(
        in_channels=4, layers_per_block=1, block_out_channels=(32, 64), norm_num_groups=8,
        cross_attention_dim=CROSS, attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        conditioning_embedding_out_channels=(8, 16),
    ).eval()
    sample = torch.randn(BATCH, 4, SIZE, SIZE)
    cond = torch.randn(BATCH, 3, SIZE * 2, SIZE * 2)
    return model, (sample, torch.tensor([10, 500]), torch.randn(BATCH, TEXT, CROSS), cond), {}


class _SamplerLoop:
    """A denoising loop as a pipeline writes it: the UNet, then `scheduler.step` per timestep."""

    def __init__(self, unet, scheduler, steps):
        self.unet = unet
        self.scheduler = scheduler
        self.scheduler.set_timesteps(steps)

    def __call__(self, latents, states):
        latents = latents * self.scheduler.init_noise_sigma
        for t in self.scheduler.timesteps:
            model_in = self.scheduler.scale_model_input(latents, t)
            noise = self.unet(model_in, t, encoder_hidden_states=states).sample
            latents = self.scheduler.step(noise, t, latents).prev_sample
        return latents


def _sampler(scheduler_cls):
    torch = _seed()
    loop = _SamplerLoop(_tiny_unet2d_condition(), scheduler_cls(num_train_timesteps=100), 3)
    return loop, (torch.randn(BATCH, 4, SIZE, SIZE), torch.randn(BATCH, TEXT, CROSS)), {}


def mend_target_diffusers_ddim_loop():
    """Three DDIM steps over the tiny SD UNet."""
    from diffusers import DDIMScheduler

    return _sampler(DDIMScheduler)


def mend_target_diffusers_euler_loop():
    """Three Euler steps over the tiny SD UNet (its step keeps a step index on the scheduler)."""
    from diffusers import EulerDiscreteScheduler

    return _sampler(EulerDiscreteScheduler)
