"""A static KV cache for incremental decoding that logs as it fills up."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import torch
from torch import nn

logger = logging.getLogger(__name__)


@functools.lru_cache(None)
def warning_once(message: str) -> None:
    """Log ``message`` the first time only (the transformers helper, reimplemented)."""
    logger.warning(message)


@dataclass
class CacheConfig:
    hidden_size: int = 32
    num_heads: int = 4
    max_cache_len: int = 32


class StaticKVCache(nn.Module):
    def __init__(self, cfg: CacheConfig, batch: int):
        super().__init__()
        head_dim = cfg.hidden_size // cfg.num_heads
        self.register_buffer("keys", torch.zeros(batch, cfg.num_heads, cfg.max_cache_len, head_dim))
        self.register_buffer("values", torch.zeros(batch, cfg.num_heads, cfg.max_cache_len, head_dim))

    def update(self, k, v, cache_position):
        logger.debug("cache update at positions %s", cache_position)
        self.keys.index_copy_(2, cache_position, k)
        self.values.index_copy_(2, cache_position, v)
        return self.keys, self.values


class CachedAttention(nn.Module):
    def __init__(self, cfg: CacheConfig, batch: int = 2):
        super().__init__()
        self.cfg = cfg
        self.head_dim = cfg.hidden_size // cfg.num_heads
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.cache = StaticKVCache(cfg, batch)

    def forward(self, hidden, cache_position):
        b, s, _ = hidden.shape
        q, k, v = self.qkv(hidden).view(b, s, 3, self.cfg.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        keys, values = self.cache.update(k, v, cache_position)
        visible = torch.arange(self.cfg.max_cache_len, device=q.device)[None, :] <= cache_position[:, None]
        scores = (q @ keys.transpose(-1, -2)).masked_fill(~visible, float("-inf"))
        return (scores.softmax(-1) @ values).transpose(1, 2).reshape(b, s, -1)


def mend_target_kv_cache_update():
    torch.manual_seed(0)
    cfg = CacheConfig()
    model = CachedAttention(cfg).eval()
    return model, (torch.randn(2, 4, cfg.hidden_size), torch.arange(8, 12))


class SlidingWindowCache(CachedAttention):
    """Warns (once) when generation runs past the cache and wraps around."""

    def forward(self, hidden, cache_position):
        b, s, _ = hidden.shape
        q, k, v = self.qkv(hidden).view(b, s, 3, self.cfg.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        warning_once("sliding window cache: positions past max_cache_len wrap around")
        slot = cache_position % self.cfg.max_cache_len
        keys, values = self.cache.update(k, v, slot)
        return ((q @ keys.transpose(-1, -2)).softmax(-1) @ values).transpose(1, 2).reshape(b, s, -1)


def mend_target_sliding_cache_warning_once():
    torch.manual_seed(0)
    cfg = CacheConfig()
    return SlidingWindowCache(cfg).eval(), (torch.randn(2, 4, cfg.hidden_size), torch.arange(30, 34))
