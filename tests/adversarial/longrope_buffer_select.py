"""transformers 4.52's LongRoPE update, as it is written there (Phi-3, Phi-4-mini): a tensor
``if`` whose arms hold a lazy ``hasattr`` cache, a device move and a ``register_buffer``.
The sound fix hoists the Python part and re-registers the buffer with a ``torch.where``.
The call runs a long prompt and then a short one through the same module: the in-place
form (``self.inv_freq.copy_(torch.where(...))``) would write the long table into
``original_inv_freq``, which IS the buffer here, and the short prompt would read it."""

from functools import wraps

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"  # an empty batch in float64: the buffer's dtype differs; the edge shapes reject it
ACCEPT_REASONS = ("empty_batch",)


def _longrope_parameters(config, device, seq_len=None):
    dim = config["dim"]
    factors = config["long_factor"] if seq_len and seq_len > config["original_max"] else config["short_factor"]
    ext = torch.tensor(factors, dtype=torch.float32, device=device)
    return 1.0 / (ext * 10000.0 ** (torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim)), 1.0


def dynamic_rope_update(rope_forward):
    def longrope_frequency_update(self, position_ids, device):
        """Longrope uses long factor if sequence is larger than original pretraining length, short otherwise."""
        seq_len = torch.max(position_ids) + 1
        original_max_position_embeddings = self.config["original_max"]
        if seq_len > original_max_position_embeddings:
            if not hasattr(self, "long_inv_freq"):
                self.long_inv_freq, _ = self.rope_init_fn(
                    self.config, device, seq_len=original_max_position_embeddings + 1
                )
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            # This .to() is needed if the model has been moved to a device after being initialized
            self.original_inv_freq = self.original_inv_freq.to(device)
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)

    @wraps(rope_forward)
    def wrapper(self, x, position_ids):
        longrope_frequency_update(self, position_ids, device=x.device)
        return rope_forward(self, x, position_ids)

    return wrapper


class RotaryEmbedding(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.rope_init_fn = _longrope_parameters
        inv_freq, self.attention_scaling = self.rope_init_fn(self.config, None)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.original_inv_freq = self.inv_freq

    @dynamic_rope_update
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype) * self.attention_scaling, emb.sin().to(x.dtype) * self.attention_scaling


class TwoPrompts(nn.Module):
    """A long prompt, then a short one, through one rotary table (a server's two requests)."""

    def __init__(self):
        super().__init__()
        self.rotary = RotaryEmbedding({"dim": 8, "original_max": 6, "short_factor": [1.0, 1.1, 1.2, 1.3],
                                       "long_factor": [2.0, 2.5, 3.0, 3.5]})
        self.proj = nn.Linear(8, 8)

    def forward(self, x_long, x_short):
        outs = []
        for x in (x_long, x_short):
            position_ids = torch.arange(x.shape[1])[None].expand(x.shape[0], -1)
            cos, sin = self.rotary(x, position_ids)
            outs.append(self.proj(x) * cos + x * sin)
        return outs[0].sum() + outs[1]


def mend_target_longrope_buffer_select():
    torch.manual_seed(0)
    model = TwoPrompts()
    long, short = torch.randn(2, 9, 8), torch.randn(2, 4, 8)
    # short only: the long arm never runs in that call; both long: the short arm never runs
    return target(model, (long, short), inputs=[((short, short.flip(0)), {}), ((long, long.flip(1)), {})])
