"""Code that compiles without a single break: shape and config branches, Python-number math,
guarded logging and timing, tensor-only control flow. Every finding here is a false one."""

import logging
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

logger = logging.getLogger(__name__)


def is_torchdynamo_compiling():
    return torch.compiler.is_compiling()


class Attention(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 4, dropout: float = 0.0):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.dropout = dropout
        self.scale = 1.0 / math.sqrt(dim // heads)

    def forward(self, x, mask=None):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, n, self.heads, -1).transpose(1, 2)
        k = k.view(b, n, self.heads, -1).transpose(1, 2)
        v = v.view(b, n, self.heads, -1).transpose(1, 2)
        if mask is not None:
            mask = mask[:, None, None, :].to(torch.bool)
        if x.shape[1] > 1 and self.training:
            p = self.dropout
        else:
            p = 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        if not torch.compiler.is_compiling():
            logger.debug("attention out %s", out.shape)
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


def cosine_schedule(step: int, total: int, base_lr: float) -> float:
    return 0.5 * base_lr * (1 + math.cos(math.pi * step / total))


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    mask = mask.to(x.dtype)
    return (x * mask).sum(dim) / mask.sum(dim).clamp(min=1.0)


def soft_clip(x: torch.Tensor, limit: float = 3.0) -> torch.Tensor:
    return torch.where(x.abs() > limit, limit * torch.tanh(x / limit), x)


def step(model: Attention, x: torch.Tensor, mask: torch.Tensor, it: int = 10):
    t0 = None
    if not is_torchdynamo_compiling():
        t0 = time.perf_counter()
    lr = cosine_schedule(it, 100, 1e-3)
    h = model(x, mask)
    out = soft_clip(masked_mean(h, mask[..., None].expand_as(h), dim=1)) * lr
    if t0 is not None and not torch.compiler.is_compiling():
        print("step", time.perf_counter() - t0)
    if torch.compiler.is_dynamo_compiling():
        return out
    logger.info("eager step done")
    return out


def mend_target_attention():
    torch.manual_seed(0)
    return Attention().eval(), (torch.randn(2, 5, 16), torch.ones(2, 5))


def mend_target_step():
    torch.manual_seed(0)
    return step, (Attention().eval(), torch.randn(2, 5, 16), torch.ones(2, 5))
