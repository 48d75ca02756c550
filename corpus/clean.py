"""Models with no graph break at all: what the tool must leave alone."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class CleanConfig:
    hidden_size: int = 32
    num_heads: int = 4
    vocab_size: int = 100


class ResidualMLP(nn.Module):
    def __init__(self, cfg: CleanConfig):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.hidden_size)
        self.fc1 = nn.Linear(cfg.hidden_size, 4 * cfg.hidden_size)
        self.fc2 = nn.Linear(4 * cfg.hidden_size, cfg.hidden_size)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def mend_target_clean_mlp():
    torch.manual_seed(0)
    return nn.Sequential(*(ResidualMLP(CleanConfig()) for _ in range(3))).eval(), (torch.randn(2, 8, 32),)


class ConvBlock(nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
        self.head = nn.Linear(channels, 10)

    def forward(self, pixel_values):
        x = F.relu(self.bn(self.conv1(pixel_values)))
        x = F.silu(self.conv2(x)) + x
        return self.head(x.mean((2, 3)))


def mend_target_clean_convnet():
    torch.manual_seed(0)
    return ConvBlock().eval(), (torch.randn(2, 3, 16, 16),)


class CausalLM(nn.Module):
    """Decoder-only LM with a causal + padding mask built with tensor ops only."""

    def __init__(self, cfg: CleanConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.out = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, input_ids, attention_mask):
        b, s = input_ids.shape
        h = self.embed(input_ids)
        q, k, v = self.qkv(h).view(b, s, 3, self.cfg.num_heads, -1).permute(2, 0, 3, 1, 4)
        causal = torch.ones(s, s, dtype=torch.bool, device=h.device).tril()
        allowed = causal[None, None] & attention_mask[:, None, None, :].bool()
        scores = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~allowed, torch.finfo(h.dtype).min)
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)
        # clamp without asking whether it is needed: branch-free overflow guard
        h = self.norm(h + self.out(ctx)).clamp(-1e4, 1e4)
        return self.lm_head(h)


def mend_target_clean_causal_lm():
    torch.manual_seed(0)
    cfg = CleanConfig()
    ids = torch.randint(0, cfg.vocab_size, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    return CausalLM(cfg).eval(), (ids, mask)
