"""Character-level down- and up-sampling (CANINE-style, transformers 4.x): characters pooled
into molecules by a strided convolution, molecules repeated back to the character length,
the remainder computed in torch on two Python ints and read back with `.item()`."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class CharConfig:
    vocab: int = 120
    hidden: int = 32
    rate: int = 4


class CharUpsampler(nn.Module):
    def __init__(self, cfg: CharConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.down = nn.Conv1d(cfg.hidden, cfg.hidden, kernel_size=cfg.rate, stride=cfg.rate)
        self.proj = nn.Linear(2 * cfg.hidden, cfg.hidden)

    def repeat_molecules(self, molecules, char_seq_length: int):
        rate = self.cfg.rate
        repeated = torch.repeat_interleave(molecules[:, 1:-1, :], repeats=rate, dim=-2)
        last_molecule = molecules[:, -1:, :]
        remainder_length = torch.fmod(torch.tensor(char_seq_length), torch.tensor(rate)).item()
        remainder_repeated = torch.repeat_interleave(last_molecule, repeats=remainder_length + rate, dim=-2)
        return torch.cat([repeated, remainder_repeated], dim=-2)

    def forward(self, input_ids):
        chars = self.embed(input_ids)
        cls = chars[:, :1, :]
        molecules = self.down(chars.transpose(1, 2)).transpose(1, 2)
        molecules = torch.cat([cls, molecules], dim=1)
        up = self.repeat_molecules(molecules, input_ids.shape[-1])
        return self.proj(torch.cat([chars, up], dim=-1))


def mend_target_char_upsampling():
    torch.manual_seed(0)
    return CharUpsampler(CharConfig()).eval(), (torch.randint(0, 120, (2, 18)),)
