"""Speech encoder front ends: frame masking from padded waveforms, per-utterance feature norm."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class AudioConfig:
    conv_dim: int = 32
    hidden_size: int = 48
    kernel: int = 10
    stride: int = 5


class FeatureEncoder(nn.Module):
    def __init__(self, cfg: AudioConfig):
        super().__init__()
        self.cfg = cfg
        self.conv = nn.Conv1d(1, cfg.conv_dim, cfg.kernel, cfg.stride)
        self.proj = nn.Linear(cfg.conv_dim, cfg.hidden_size)

    def output_lengths(self, input_lengths: torch.Tensor) -> torch.Tensor:
        return torch.div(input_lengths - self.cfg.kernel, self.cfg.stride, rounding_mode="floor") + 1

    def forward(self, input_values):
        return self.proj(torch.nn.functional.gelu(self.conv(input_values[:, None])).transpose(1, 2))


class FrameMaskingEncoder(nn.Module):
    """Zeroes the frames that came from padding, one utterance at a time (wav2vec2 style)."""

    def __init__(self, cfg: AudioConfig):
        super().__init__()
        self.features = FeatureEncoder(cfg)
        self.norm = nn.LayerNorm(cfg.hidden_size)

    def forward(self, input_values, attention_mask):
        hidden = self.features(input_values)
        frame_lengths = self.features.output_lengths(attention_mask.sum(-1))
        frame_mask = torch.zeros(hidden.shape[:2], dtype=torch.bool, device=hidden.device)
        for b, n in enumerate(frame_lengths.tolist()):
            frame_mask[b, :n] = True
        hidden = hidden * frame_mask[..., None]
        return self.norm(hidden), frame_mask


class FrameMaskingEncoderFixed(FrameMaskingEncoder):
    def forward(self, input_values, attention_mask):
        hidden = self.features(input_values)
        frame_lengths = self.features.output_lengths(attention_mask.sum(-1))
        frame_mask = torch.arange(hidden.shape[1], device=hidden.device)[None, :] < frame_lengths[:, None]
        hidden = hidden * frame_mask[..., None]
        return self.norm(hidden), frame_mask


def _padded_waveforms(batch: int = 2, samples: int = 800):
    values = torch.randn(batch, samples)
    mask = torch.ones(batch, samples, dtype=torch.long)
    mask[1, 560:] = 0
    values = values * mask
    return values, mask


def mend_target_audio_frame_masking():
    torch.manual_seed(0)
    model = FrameMaskingEncoder(AudioConfig()).eval()
    return model, _padded_waveforms()


def mend_target_audio_frame_masking_reference():
    torch.manual_seed(0)
    model = FrameMaskingEncoderFixed(AudioConfig()).eval()
    return model, _padded_waveforms()


class UtteranceNorm(nn.Module):
    """Zero-mean the valid samples of each batch (mask-then-reduce)."""

    def __init__(self, cfg: AudioConfig):
        super().__init__()
        self.features = FeatureEncoder(cfg)

    def forward(self, input_values, attention_mask):
        valid = attention_mask.bool()
        mean = input_values[valid].mean()
        centred = (input_values - mean) * attention_mask
        return self.features(centred)


class UtteranceNormFixed(UtteranceNorm):
    def forward(self, input_values, attention_mask):
        valid = attention_mask.to(input_values.dtype)
        mean = (input_values * valid).sum() / valid.sum()
        centred = (input_values - mean) * attention_mask
        return self.features(centred)


def mend_target_audio_utterance_norm():
    torch.manual_seed(0)
    return UtteranceNorm(AudioConfig()).eval(), _padded_waveforms()


def mend_target_audio_utterance_norm_reference():
    torch.manual_seed(0)
    return UtteranceNormFixed(AudioConfig()).eval(), _padded_waveforms()
