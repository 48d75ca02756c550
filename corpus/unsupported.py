"""Python the compiler cannot follow: deepcopy in forward, requires_grad flips, debug prints."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class EmaConfig:
    hidden_size: int = 32
    decay: float = 0.99


class EmaTeacher(nn.Module):
    """Self-distillation: the teacher is a frozen snapshot of the student taken in forward."""

    def __init__(self, cfg: EmaConfig):
        super().__init__()
        self.cfg = cfg
        self.student = nn.Sequential(nn.Linear(cfg.hidden_size, cfg.hidden_size), nn.GELU(), nn.Linear(cfg.hidden_size, 8))

    def forward(self, x):
        student_out = self.student(x)
        teacher = copy.deepcopy(self.student)
        with torch.no_grad():
            teacher_out = teacher(x * 0.99)
        return (student_out.log_softmax(-1) - teacher_out.log_softmax(-1)).pow(2).mean()


def mend_target_ema_teacher_deepcopy():
    torch.manual_seed(0)
    return EmaTeacher(EmaConfig()), (torch.randn(4, 32),)


class PartiallyFrozenEncoder(nn.Module):
    """Freezes the embedding after warm-up by flipping requires_grad inside forward."""

    def __init__(self, vocab: int = 100, hidden: int = 32, freeze_after: int = 0):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.freeze_after = freeze_after
        self.steps = 0

    def forward(self, input_ids):
        h = self.embed(input_ids)
        if self.steps >= self.freeze_after:
            self.embed.weight.requires_grad = False
        return self.proj(h).tanh().mean(1)


def mend_target_frozen_embedding_requires_grad():
    torch.manual_seed(0)
    return PartiallyFrozenEncoder(), (torch.randint(0, 100, (2, 10)),)


class DebugTransformerBlock(nn.Module):
    """A block that still carries the author's debugging print."""

    def __init__(self, hidden: int = 32, heads: int = 4):
        super().__init__()
        self.attn = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(hidden, 64), nn.ReLU(), nn.Linear(64, hidden))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x):
        a, _ = self.attn(x, x, x, need_weights=False)
        h = self.norm(x + a)
        print(f"[debug] block output {tuple(h.shape)}")
        return h + self.ff(h)


def mend_target_debug_print_block():
    torch.manual_seed(0)
    return DebugTransformerBlock().eval(), (torch.randn(2, 6, 32),)


class SinusoidEmbedding(nn.Module):
    """CTRL-style (transformers 5.x) positions: a sinusoid table registered as `nn.Buffer`
    and re-bound to the input's device and dtype on every call."""

    def __init__(self, vocab: int = 100, n_positions: int = 64, hidden: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
        rates = 1 / torch.pow(10000, (2 * (torch.arange(hidden)[None, :] // 2)) / hidden)
        angles = pos * rates
        table = torch.cat([angles[:, 0::2].sin(), angles[:, 1::2].cos()], dim=-1)
        self.pos_encoding = nn.Buffer(table, persistent=False)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, input_ids):
        inputs_embeds = self.embed(input_ids) * (self.embed.embedding_dim**0.5)
        position_ids = torch.arange(input_ids.shape[-1], device=input_ids.device)[None, :]
        # the table is not moved with the model (upstream's comment), so it is moved here
        self.pos_encoding = self.pos_encoding.to(device=inputs_embeds.device, dtype=inputs_embeds.dtype)
        pos_embeds = self.pos_encoding[position_ids, :]
        return self.out(inputs_embeds + pos_embeds).tanh()


def mend_target_sinusoid_buffer_rebind():
    torch.manual_seed(0)
    return SinusoidEmbedding().eval(), (torch.randint(0, 100, (2, 12)),)
