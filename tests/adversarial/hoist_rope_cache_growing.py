"""A rotary table for long sequences built lazily, the first time a sequence is longer than
the pretraining length, and scaled for THAT sequence's length (dynamic NTK scaling): the
lazy cache's fill reads ``seq_len``, a value of the call. Hoisting it in front of the tensor
``if`` (as the LongRoPE rewrite does for a table that reads only the config) would fill it on
the first call of any length: a short prompt first, and every later long prompt reuses a
table built for the short one. The calls run a short prompt, then a longer one: the hoisted
form's long output differs (by 0.73 in the summed projection here)."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
# the refusal must name why (a failed check says only that this example showed it)
ACCEPT_REASONS = ("reads `seq_len`, a value of this call",)


def _ntk_parameters(config, device, seq_len):
    dim = config["dim"]
    # the base grows with the length the table is built for
    base = 10000.0 * (seq_len / config["original_max"]) ** (dim / (dim - 2))
    exponent = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    return 1.0 / base ** exponent, 1.0


class NtkRotary(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.rope_init_fn = _ntk_parameters
        dim = config["dim"]
        inv_freq = 1.0 / 10000.0 ** (torch.arange(0, dim, 2).float() / dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.original_inv_freq = self.inv_freq

    def forward(self, x, position_ids):
        device = x.device
        seq_len = torch.max(position_ids) + 1
        if seq_len > self.config["original_max"]:
            if not hasattr(self, "long_inv_freq"):
                self.long_inv_freq, _ = self.rope_init_fn(self.config, device, seq_len=seq_len)
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            self.original_inv_freq = self.original_inv_freq.to(device)
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
        freqs = position_ids[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos() + x.flip(-1) * emb.sin()


class Prompts(nn.Module):
    """A short prompt, then a longer one, through one rotary table (a chat's two turns)."""

    def __init__(self):
        super().__init__()
        self.rotary = NtkRotary({"dim": 8, "original_max": 6})
        self.proj = nn.Linear(8, 8)

    def forward(self, x_short, x_long):
        outs = []
        for x in (x_short, x_long):
            position_ids = torch.arange(x.shape[1])[None].expand(x.shape[0], -1)
            outs.append(self.proj(self.rotary(x, position_ids)).sum())
        return torch.stack(outs)


def mend_target_hoist_rope_cache_growing():
    torch.manual_seed(0)
    model = Prompts()
    short, long = torch.randn(2, 4, 8), torch.randn(2, 12, 8)
    return target(model, (short, long), inputs=[((short.flip(0), long.flip(0)), {}), ((long, long), {})])


NAIVE = naive(__file__, """
        if seq_len > self.config["original_max"]:
            if not hasattr(self, "long_inv_freq"):
                self.long_inv_freq, _ = self.rope_init_fn(self.config, device, seq_len=seq_len)
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            self.original_inv_freq = self.original_inv_freq.to(device)
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
""", """
        if not hasattr(self, "long_inv_freq"):
            self.long_inv_freq, _ = self.rope_init_fn(self.config, device, seq_len=seq_len)
        self.original_inv_freq = self.original_inv_freq.to(device)
        self.register_buffer("inv_freq", torch.where(seq_len > self.config["original_max"],
                             self.long_inv_freq, self.original_inv_freq), persistent=False)
""")
