"""Rotary position embeddings with a length-dependent scaling branch (NTK / LongRoPE style).

Position ids arrive as a tensor, so "is this sequence longer than the trained context?" is a
question about tensor values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class RopeConfig:
    hidden_size: int = 64
    num_heads: int = 4
    base: float = 10000.0
    original_max_position: int = 16
    scaling_factor: float = 4.0
    short_factor: float = 1.0
    long_factor: float = 2.0


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class DynamicNTKRotary(nn.Module):
    def __init__(self, cfg: RopeConfig):
        super().__init__()
        self.cfg = cfg
        self.dim = cfg.hidden_size // cfg.num_heads
        inv_freq = 1.0 / (cfg.base ** (torch.arange(0, self.dim, 2).float() / self.dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _ntk_base(self, seq_len: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        ratio = c.scaling_factor * seq_len / c.original_max_position - (c.scaling_factor - 1)
        return c.base * ratio ** (self.dim / (self.dim - 2))

    def forward(self, q, k, position_ids):
        seq_len = position_ids.max() + 1
        if seq_len > self.cfg.original_max_position:
            base = self._ntk_base(seq_len)
            inv_freq = 1.0 / (base ** (torch.arange(0, self.dim, 2, device=position_ids.device).float() / self.dim))
        else:
            inv_freq = self.inv_freq
        freqs = position_ids[..., None].float() * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]
        return apply_rotary(q, k, emb.cos(), emb.sin())


class DynamicNTKRotaryFixed(DynamicNTKRotary):
    def forward(self, q, k, position_ids):
        seq_len = position_ids.max() + 1
        scaled = 1.0 / (self._ntk_base(seq_len) ** (torch.arange(0, self.dim, 2, device=position_ids.device).float() / self.dim))
        inv_freq = torch.where(seq_len > self.cfg.original_max_position, scaled, self.inv_freq)
        freqs = position_ids[..., None].float() * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]
        return apply_rotary(q, k, emb.cos(), emb.sin())


def _qk_positions(cfg: RopeConfig, seq: int = 24):
    head_dim = cfg.hidden_size // cfg.num_heads
    q = torch.randn(2, cfg.num_heads, seq, head_dim)
    k = torch.randn(2, cfg.num_heads, seq, head_dim)
    position_ids = torch.arange(seq)[None].expand(2, -1)
    return q, k, position_ids


def mend_target_rotary_ntk_scaling():
    torch.manual_seed(0)
    cfg = RopeConfig()
    return DynamicNTKRotary(cfg), _qk_positions(cfg)


def mend_target_rotary_ntk_scaling_reference():
    torch.manual_seed(0)
    cfg = RopeConfig()
    return DynamicNTKRotaryFixed(cfg), _qk_positions(cfg)


class LongRopeAttention(nn.Module):
    """Picks the long or short rescale factor with a ternary on the max position."""

    def __init__(self, cfg: RopeConfig):
        super().__init__()
        self.cfg = cfg
        self.rope = DynamicNTKRotary(cfg)
        self.proj = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, hidden, position_ids):
        b, s, h = hidden.shape
        heads = self.proj(hidden).view(b, s, self.cfg.num_heads, -1).transpose(1, 2)
        factor = self.cfg.long_factor if position_ids.max() >= self.cfg.original_max_position else self.cfg.short_factor
        freqs = position_ids[..., None].float() * (self.rope.inv_freq / factor)
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]
        q, k = apply_rotary(heads, heads, emb.cos(), emb.sin())
        return (q @ k.transpose(-1, -2)).softmax(-1) @ heads


def mend_target_longrope_ternary():
    torch.manual_seed(0)
    cfg = RopeConfig()
    hidden = torch.randn(2, 20, cfg.hidden_size)
    return LongRopeAttention(cfg).eval(), (hidden, torch.arange(20)[None].expand(2, -1))
