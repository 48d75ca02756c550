"""A TTS duration predictor (FastSpeech style): log-durations per phoneme, turned into frame
counts; negative predictions early in training are clamped, padded phonemes get zero
frames. ``clamp`` is total, so the one-armed ``if`` is a sound ``torch.where``."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class DurationPredictor(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, 3, padding=1)
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, 1)

    def forward(self, h, mask):
        # h: (batch, phonemes, dim); mask: (batch, phonemes), True for real phonemes
        x = self.conv(h.transpose(1, 2)).transpose(1, 2).relu()
        log_d = self.proj(self.norm(x)).squeeze(-1)
        dur = torch.exp(log_d) - 1.0
        if (dur < 0).any():
            dur = dur.clamp(min=0.0)
        return dur * mask


def mend_target_tts_duration_predictor():
    torch.manual_seed(0)
    h = torch.randn(2, 5, 8)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, 3:] = False
    short = mask.clone()
    short[0] = False  # an utterance with every phoneme padded
    return target(DurationPredictor(), (h, mask), inputs=[((h * 3 + 2, mask), {}), ((h, short), {})])
