"""Self-attention with padding masks: an fp16 overflow clamp and a sparse/global switch.

Patterns from encoder models in the wild: the overflow clamp is decided on tensor values
(BART/T5 style), and the sparse-vs-global attention path is picked by looking at the mask
(Longformer/BigBird style).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class AttentionConfig:
    hidden_size: int = 64
    num_heads: int = 4
    intermediate_size: int = 128
    window: int = 4
    clamp_margin: float = 1000.0


def _expand_padding_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # [batch, seq] of 1/0 -> additive [batch, 1, 1, seq]
    inverted = 1.0 - attention_mask[:, None, None, :].to(dtype)
    return inverted * torch.finfo(dtype).min


class SelfAttention(nn.Module):
    def __init__(self, cfg: AttentionConfig):
        super().__init__()
        self.num_heads = cfg.num_heads
        self.head_dim = cfg.hidden_size // cfg.num_heads
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.out = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, hidden: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        b, s, _ = hidden.shape
        q, k, v = self.qkv(hidden).view(b, s, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + additive_mask
        ctx = scores.softmax(-1) @ v
        return self.out(ctx.transpose(1, 2).reshape(b, s, -1))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: AttentionConfig):
        super().__init__()
        self.cfg = cfg
        self.attn = SelfAttention(cfg)
        self.norm1 = nn.LayerNorm(cfg.hidden_size)
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.norm2 = nn.LayerNorm(cfg.hidden_size)

    def forward(self, hidden: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.norm1(hidden + self.attn(hidden, additive_mask))
        hidden = self.norm2(hidden + self.fc2(torch.nn.functional.gelu(self.fc1(hidden))))
        # fp16 overflow guard, decided on the values (breaks: a tensor condition)
        if torch.isinf(hidden).any() or torch.isnan(hidden).any():
            clamp_value = torch.finfo(hidden.dtype).max - self.cfg.clamp_margin
            hidden = torch.clamp(hidden, min=-clamp_value, max=clamp_value)
        return hidden


class EncoderLayerFixed(EncoderLayer):
    def forward(self, hidden: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.norm1(hidden + self.attn(hidden, additive_mask))
        hidden = self.norm2(hidden + self.fc2(torch.nn.functional.gelu(self.fc1(hidden))))
        clamp_value = torch.finfo(hidden.dtype).max - self.cfg.clamp_margin
        overflow = torch.isinf(hidden).any() | torch.isnan(hidden).any()
        return torch.where(overflow, torch.clamp(hidden, min=-clamp_value, max=clamp_value), hidden)


class PaddedEncoder(nn.Module):
    def __init__(self, cfg: AttentionConfig, layer_cls=EncoderLayer, num_layers: int = 2):
        super().__init__()
        self.layers = nn.ModuleList(layer_cls(cfg) for _ in range(num_layers))

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        additive = _expand_padding_mask(attention_mask, hidden.dtype)
        for layer in self.layers:
            hidden = layer(hidden, additive)
        return hidden


def _padded_batch(cfg: AttentionConfig, batch: int = 2, seq: int = 16):
    hidden = torch.randn(batch, seq, cfg.hidden_size)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, 11:] = 0  # the second sequence is padded
    return hidden, mask


def mend_target_padded_attention():
    torch.manual_seed(0)
    cfg = AttentionConfig()
    model = PaddedEncoder(cfg).eval()
    return model, _padded_batch(cfg)


def mend_target_padded_attention_reference():
    torch.manual_seed(0)
    cfg = AttentionConfig()
    model = PaddedEncoder(cfg, layer_cls=EncoderLayerFixed).eval()
    return model, _padded_batch(cfg)


class SparseGlobalAttention(nn.Module):
    """Banded local attention, or full attention when any token is marked global."""

    def __init__(self, cfg: AttentionConfig):
        super().__init__()
        self.cfg = cfg
        self.attn = SelfAttention(cfg)
        self.norm = nn.LayerNorm(cfg.hidden_size)

    def _band_mask(self, seq: int, like: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(seq, device=like.device)
        far = (pos[None, :] - pos[:, None]).abs() > self.cfg.window
        return torch.zeros(seq, seq, dtype=like.dtype, device=like.device).masked_fill(far, torch.finfo(like.dtype).min)

    def forward(self, hidden, attention_mask, global_attention_mask):
        padding = _expand_padding_mask(attention_mask, hidden.dtype)
        is_global = global_attention_mask.sum() > 0
        if is_global:
            out = self.attn(hidden, padding)
        elif attention_mask.min() == 0:
            out = self.attn(hidden, padding + self._band_mask(hidden.shape[1], hidden))
        else:
            out = self.attn(hidden, self._band_mask(hidden.shape[1], hidden)[None, None])
        return self.norm(hidden + out)


def mend_target_sparse_global_attention():
    import graphmend

    torch.manual_seed(0)
    cfg = AttentionConfig()
    model = SparseGlobalAttention(cfg).eval()
    hidden, mask = _padded_batch(cfg)
    global_mask = torch.zeros_like(mask)
    global_mask[:, 0] = 1  # CLS attends globally
    # a batch without padding and without global tokens takes the plain band-mask arm
    unpadded = (hidden, torch.ones_like(mask), torch.zeros_like(mask))
    return graphmend.Target(model, (hidden, mask, global_mask), inputs=[(unpadded, {})])
