"""The bench reference workload: a 12-block MLP stack with a logger call and a
data-dependent clamp in each block (4.3x on an H200 once hand-fixed: docs/benchmarks.md)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

logger = logging.getLogger(__name__)


@dataclass
class StackConfig:
    hidden_size: int = 64
    ffn_size: int = 256
    num_blocks: int = 12
    clamp_at: float = 0.5  # the blocks' outputs reach it on some inputs, not on others


class MLPBlock(nn.Module):
    def __init__(self, cfg: StackConfig, index: int):
        super().__init__()
        self.cfg = cfg
        self.index = index
        self.norm = nn.LayerNorm(cfg.hidden_size)
        self.up = nn.Linear(cfg.hidden_size, cfg.ffn_size)
        self.down = nn.Linear(cfg.ffn_size, cfg.hidden_size)

    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        logger.debug("block %d: activations computed", self.index)
        if h.abs().max() > self.cfg.clamp_at:
            h = h.clamp(-self.cfg.clamp_at, self.cfg.clamp_at)
        return x + h


class MLPBlockFixed(MLPBlock):
    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        h = torch.where(h.abs().max() > self.cfg.clamp_at, h.clamp(-self.cfg.clamp_at, self.cfg.clamp_at), h)
        return x + h


class MLPStack(nn.Module):
    def __init__(self, cfg: StackConfig, block_cls=MLPBlock):
        super().__init__()
        self.blocks = nn.ModuleList(block_cls(cfg, i) for i in range(cfg.num_blocks))
        self.final_norm = nn.LayerNorm(cfg.hidden_size)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.final_norm(x)


def mend_target_mlp_stack():
    torch.manual_seed(0)
    cfg = StackConfig()
    return MLPStack(cfg).eval(), (torch.randn(1, 16, cfg.hidden_size) * 2,)


def mend_target_mlp_stack_reference():
    torch.manual_seed(0)
    cfg = StackConfig()
    return MLPStack(cfg, MLPBlockFixed).eval(), (torch.randn(1, 16, cfg.hidden_size) * 2,)
