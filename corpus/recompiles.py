"""Models that compile whole but recompile on later calls: what `mend analyze --calls` surfaces
(GM7xx). No graph break in any of them; each later call of other batch and sequence sizes
meets a guard the first call's graph was specialised on."""

from __future__ import annotations

import math

import torch
from torch import nn


class StepScaled(nn.Module):
    """A training-step counter kept as a Python int: every step is a new constant."""

    def __init__(self, hidden: int = 16):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)
        self.step = 0

    def forward(self, x):
        self.step += 1
        warmup = min(1.0, self.step / 100)
        return self.proj(x) * warmup


def mend_target_step_counter():
    torch.manual_seed(0)
    return StepScaled(), (torch.randn(2, 5, 16),)


class AnnealedSoftmax(nn.Module):
    """A sampling temperature annealed on each call, held as a Python float."""

    def __init__(self, hidden: int = 16):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)
        self.temperature = 1.0

    def forward(self, x):
        logits = self.proj(x) / self.temperature
        self.temperature = max(0.5, self.temperature * 0.9)
        return torch.softmax(logits, dim=-1)


def mend_target_temperature():
    from graphmend import Target

    torch.manual_seed(0)
    # calls of one shape: the recompile is the temperature's alone (a size change would be
    # the guard Dynamo names first)
    return Target(AnnealedSoftmax(), (torch.randn(2, 5, 16),),
                  calls=[((torch.randn(2, 5, 16),), {}), ((torch.randn(2, 5, 16),), {})])


class LazyRotary(nn.Module):
    """A rotary cache grown lazily to the longest sequence seen, its length a Python int."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.dim = dim
        self.proj = nn.Linear(dim, dim)
        self.max_seq_len_cached = 0
        self.cos_cached = torch.zeros(0, dim)

    def forward(self, x):
        seq_len = x.shape[1]
        if seq_len > self.max_seq_len_cached:
            self.max_seq_len_cached = seq_len
            pos = torch.arange(seq_len, dtype=torch.float32)[:, None]
            freq = torch.exp(torch.arange(self.dim) * (-math.log(10000.0) / self.dim))
            self.cos_cached = torch.cos(pos * freq)
        return self.proj(x) * self.cos_cached[:seq_len]


def mend_target_lazy_rope_cache():
    torch.manual_seed(0)
    return LazyRotary(), (torch.randn(2, 5, 16),)


class Chunked(nn.Module):
    """A branch on the sequence length in Python: the length is bounded by it, never dynamic."""

    def __init__(self, hidden: int = 16):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        if x.shape[1] > 6:
            x = x[:, -6:]
        return self.proj(x)


def mend_target_shape_specialised():
    torch.manual_seed(0)
    return Chunked(), (torch.randn(2, 5, 16),)
