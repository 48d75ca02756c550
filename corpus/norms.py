"""Normalisation layers that read statistics back to the host."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class NormConfig:
    hidden_size: int = 64
    eps: float = 1e-6
    max_scale: float = 30.0


class AdaptiveRMSNorm(nn.Module):
    """RMSNorm that rescales when activations blow up, deciding with a host scalar."""

    def __init__(self, cfg: NormConfig):
        super().__init__()
        self.cfg = cfg
        self.weight = nn.Parameter(torch.ones(cfg.hidden_size))

    def forward(self, x):
        rms = x.pow(2).mean(-1, keepdim=True).add(self.cfg.eps).rsqrt()
        peak = x.abs().max().item()
        scale = self.cfg.max_scale / peak if peak > self.cfg.max_scale else 1.0
        return x * rms * self.weight * scale


class AdaptiveRMSNormFixed(AdaptiveRMSNorm):
    def forward(self, x):
        rms = x.pow(2).mean(-1, keepdim=True).add(self.cfg.eps).rsqrt()
        peak = x.abs().max()
        scale = torch.where(peak > self.cfg.max_scale, self.cfg.max_scale / peak, torch.ones_like(peak))
        return x * rms * self.weight * scale


class NormBlock(nn.Module):
    def __init__(self, cfg: NormConfig, norm_cls=AdaptiveRMSNorm):
        super().__init__()
        self.proj = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.norm = norm_cls(cfg)

    def forward(self, x):
        return self.norm(self.proj(x) * 20)


def mend_target_rmsnorm_item_stats():
    torch.manual_seed(0)
    return NormBlock(NormConfig()).eval(), (torch.randn(2, 8, 64),)


def mend_target_rmsnorm_item_stats_reference():
    torch.manual_seed(0)
    return NormBlock(NormConfig(), AdaptiveRMSNormFixed).eval(), (torch.randn(2, 8, 64),)


class RunningGroupNorm(nn.Module):
    """Group norm that tracks a running std as a Python float (float(t), .tolist())."""

    def __init__(self, channels: int = 16, groups: int = 4, momentum: float = 0.1):
        super().__init__()
        self.groups = groups
        self.momentum = momentum
        self.running_std = 1.0
        self.affine = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        b, c, t = x.shape
        g = x.view(b, self.groups, -1)
        std = g.std(-1, keepdim=True)
        self.running_std = (1 - self.momentum) * self.running_std + self.momentum * float(std.mean())
        per_group = std.flatten().tolist()
        normed = ((g - g.mean(-1, keepdim=True)) / (std + 1e-5)).view(b, c, t)
        return self.affine(normed) * min(per_group)


def mend_target_groupnorm_running_stats():
    torch.manual_seed(0)
    return RunningGroupNorm().eval(), (torch.randn(2, 16, 20),)
