"""diffusers: UNets, DiT/transformer models and VAEs built from tiny configs, and each
scheduler's sampling loop.

Enumeration (parent side): the model classes in ``MODELS`` (each with a tiny config and the
inputs its forward takes), then one ``scheduler:<Class>`` entry per scheduler class
diffusers exports (``*Scheduler``, Flax ones aside). Every other model class diffusers
exports (UNet*, *Transformer*, Autoencoder*, VQModel) is a skipped row: its forward takes
model-specific inputs no entry here builds yet.

Building (worker side): random weights, a batch of 2, one eager forward. A scheduler's
target is ``SamplingLoop``: the loop every pipeline runs (``set_timesteps``, then per
timestep ``scale_model_input``, the tiny ``UNet2DModel``, ``step``) over ``STEPS`` steps; a
scheduler whose ``step`` needs more than a sample and a noise prediction is not built, with
the reason.
"""

from __future__ import annotations

from typing import Any, Callable

from graphmend.core.worker import describe
from graphmend.sweep.building import NotBuilt, forward_checked

SELECTION = ("diffusers UNets, DiT/transformer models and VAEs with a tiny config here, and every scheduler's "
             "sampling loop, random weights")
B, STEPS = 2, 3
SCHEDULER = "scheduler:"
_FAMILY = ("UNet", "Autoencoder", "VQModel")


def _unet2d():
    import torch
    from diffusers import UNet2DModel

    model = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, block_out_channels=(16, 32), layers_per_block=1,
                        down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
                        norm_num_groups=8, attention_head_dim=8)
    return model, (torch.randn(B, 3, 16, 16), torch.tensor([10, 500])), {}


def _unet2d_condition():
    import torch
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, block_out_channels=(16, 32),
                                 layers_per_block=1, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=16,
                                 attention_head_dim=8, norm_num_groups=8)
    return model, (torch.randn(B, 4, 16, 16), torch.tensor([10, 500]), torch.randn(B, 5, 16)), {}


def _unet3d_condition():
    import torch
    from diffusers import UNet3DConditionModel

    model = UNet3DConditionModel(sample_size=16, in_channels=4, out_channels=4, block_out_channels=(16, 32),
                                 layers_per_block=1, down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
                                 up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"), cross_attention_dim=16,
                                 attention_head_dim=8, norm_num_groups=8)
    return model, (torch.randn(B, 4, 2, 16, 16), torch.tensor([10, 500]), torch.randn(B, 5, 16)), {}


def _autoencoder_kl():
    import torch
    from diffusers import AutoencoderKL

    model = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                          up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(16, 32), latent_channels=4,
                          norm_num_groups=8, layers_per_block=1)
    return model, (torch.randn(B, 3, 32, 32),), {}


def _vq():
    import torch
    from diffusers import VQModel

    model = VQModel(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                    up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(16, 32), latent_channels=4,
                    norm_num_groups=8, layers_per_block=1, num_vq_embeddings=16)
    return model, (torch.randn(B, 3, 32, 32),), {}


def _autoencoder_tiny():
    import torch
    from diffusers import AutoencoderTiny

    model = AutoencoderTiny(encoder_block_out_channels=(16, 16), decoder_block_out_channels=(16, 16),
                            num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1), latent_channels=4)
    return model, (torch.randn(B, 3, 32, 32),), {}


def _dit():
    import torch
    from diffusers import DiTTransformer2DModel

    model = DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, num_layers=2,
                                  sample_size=8, patch_size=2, num_embeds_ada_norm=10)
    return model, (torch.randn(B, 4, 8, 8), torch.tensor([10, 500]), torch.tensor([1, 3])), {}


def _pixart():
    import torch
    from diffusers import PixArtTransformer2DModel

    model = PixArtTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8,
                                     num_layers=2, sample_size=8, patch_size=2, cross_attention_dim=16,
                                     caption_channels=16)
    return model, (torch.randn(B, 4, 8, 8),), {
        "encoder_hidden_states": torch.randn(B, 5, 16), "timestep": torch.tensor([10, 500]),
        "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}}


def _sd3():
    import torch
    from diffusers import SD3Transformer2DModel

    model = SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8,
                                  num_attention_heads=2, joint_attention_dim=16, caption_projection_dim=16,
                                  pooled_projection_dim=16, out_channels=4)
    return model, (torch.randn(B, 4, 8, 8),), {"encoder_hidden_states": torch.randn(B, 5, 16),
                                               "pooled_projections": torch.randn(B, 16),
                                               "timestep": torch.tensor([10, 500])}


def _flux():
    import torch
    from diffusers import FluxTransformer2DModel

    model = FluxTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                   attention_head_dim=8, num_attention_heads=2, joint_attention_dim=16,
                                   pooled_projection_dim=16, axes_dims_rope=(4, 2, 2))
    ids = torch.zeros(16, 3)
    ids[:, 1], ids[:, 2] = torch.arange(16) // 4, torch.arange(16) % 4
    return model, (torch.randn(B, 16, 16),), {"encoder_hidden_states": torch.randn(B, 5, 16),
                                              "pooled_projections": torch.randn(B, 16),
                                              "timestep": torch.tensor([0.1, 0.5]), "img_ids": ids,
                                              "txt_ids": torch.zeros(5, 3)}


# class name -> its tiny build: (model, args, kwargs)
MODELS: dict[str, Callable[[], tuple]] = {
    "UNet2DModel": _unet2d, "UNet2DConditionModel": _unet2d_condition, "UNet3DConditionModel": _unet3d_condition,
    "AutoencoderKL": _autoencoder_kl, "VQModel": _vq, "AutoencoderTiny": _autoencoder_tiny,
    "DiTTransformer2DModel": _dit, "PixArtTransformer2DModel": _pixart, "SD3Transformer2DModel": _sd3,
    "FluxTransformer2DModel": _flux,
}


def version() -> str:
    import diffusers

    return diffusers.__version__


def _schedulers() -> list[str]:
    import diffusers

    return sorted(n for n in dir(diffusers) if n.endswith("Scheduler") and not n.startswith("Flax"))


def enumerate_models() -> tuple[list[str], dict[str, str]]:
    import diffusers

    names = set(dir(diffusers))  # the lazy module lists its names without importing them
    models = [n for n in MODELS if n in names]
    skipped = {n: "no tiny config here (its forward takes model-specific inputs)" for n in sorted(names)
               if n not in MODELS and not n.startswith("Flax")
               and (n.startswith(_FAMILY) or ("Transformer" in n and n[:1].isupper() and "Pipeline" not in n))}
    return models + [SCHEDULER + s for s in _schedulers()], skipped


def modality(name: str) -> str:
    return "video" if "3D" in name else "image"


def _loop_class():
    import torch

    class SamplingLoop(torch.nn.Module):
        """A pipeline's denoising loop: set the timesteps, then per step scale the input, predict
        the noise with the UNet and let the scheduler step."""

        def __init__(self, unet, scheduler, steps: int):
            super().__init__()
            self.unet, self.scheduler, self.steps = unet, scheduler, steps
            # flow-matching schedulers have no input scaling; their pipelines skip the call
            self.scaled = hasattr(scheduler, "scale_model_input")

        def forward(self, sample):
            self.scheduler.set_timesteps(self.steps)
            for t in self.scheduler.timesteps:
                x = self.scheduler.scale_model_input(sample, t) if self.scaled else sample
                noise = self.unet(x, t).sample
                sample = self.scheduler.step(noise, t, sample).prev_sample
            return sample

    return SamplingLoop


def _scheduler(cls_name: str):
    import diffusers

    unet, (sample, _), _ = _unet2d()
    try:
        scheduler = getattr(diffusers, cls_name)()
    except Exception as exc:
        raise NotBuilt(f"scheduler: {describe(exc)}") from None
    return _loop_class()(unet, scheduler, STEPS), (sample * float(getattr(scheduler, "init_noise_sigma", 1.0) or 1.0),), {}


def target(name: str) -> tuple[Any, tuple, dict]:
    """What a generated ``mend_target_*`` returns; ``NotBuilt`` with why not."""
    try:
        import diffusers  # noqa: F401
        import torch
    except Exception as exc:
        raise NotBuilt(f"diffusers does not import: {describe(exc)}") from None
    torch.manual_seed(0)
    try:
        if name.startswith(SCHEDULER):
            model, args, kwargs = _scheduler(name[len(SCHEDULER):])
        elif name in MODELS:
            model, args, kwargs = MODELS[name]()
        else:
            raise NotBuilt(f"no tiny config for diffusers {name!r}")
        model.eval()
    except NotBuilt:
        raise
    except Exception as exc:
        raise NotBuilt(f"model: {describe(exc)}") from None
    return forward_checked(model, args, kwargs)
