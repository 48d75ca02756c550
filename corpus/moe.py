"""Mixture-of-experts routing: top-1 router with capacity checks, and token dispatch.

The sparse version gathers each expert's tokens with ``nonzero`` and walks the per-expert
counts on the host (``.tolist()``); the reference computes the same thing densely.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

logger = logging.getLogger(__name__)


@dataclass
class MoEConfig:
    hidden_size: int = 32
    ffn_size: int = 64
    num_experts: int = 4
    capacity_factor: float = 1.0


class Expert(nn.Module):
    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.up = nn.Linear(cfg.hidden_size, cfg.ffn_size)
        self.down = nn.Linear(cfg.ffn_size, cfg.hidden_size)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Top1Router(nn.Module):
    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.cfg = cfg
        self.gate = nn.Linear(cfg.hidden_size, cfg.num_experts, bias=False)

    def forward(self, tokens: torch.Tensor):
        probs = self.gate(tokens).softmax(-1)
        weight, expert = probs.max(-1)
        capacity = int(self.cfg.capacity_factor * tokens.shape[0] / self.cfg.num_experts)
        counts = nn.functional.one_hot(expert, self.cfg.num_experts).sum(0)
        if (counts > capacity).any():
            logger.warning("router overflow: %d tokens over capacity", int((counts - capacity).clamp(min=0).sum()))
        return weight, expert, counts


class SparseMoE(nn.Module):
    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.router = Top1Router(cfg)
        self.experts = nn.ModuleList(Expert(cfg) for _ in range(cfg.num_experts))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        b, s, h = hidden.shape
        tokens = hidden.reshape(-1, h)
        weight, expert, counts = self.router(tokens)
        out = torch.zeros_like(tokens)
        for e, n in enumerate(counts.tolist()):
            if n == 0:
                continue
            idx = (expert == e).nonzero().squeeze(-1)
            out[idx] = self.experts[e](tokens[idx]) * weight[idx, None]
        return out.view(b, s, h)


class DenseMoE(SparseMoE):
    """Every expert on every token, masked: same outputs, no host round trips."""

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        b, s, h = hidden.shape
        tokens = hidden.reshape(-1, h)
        probs = self.router.gate(tokens).softmax(-1)
        weight, expert = probs.max(-1)
        out = torch.zeros_like(tokens)
        for e, layer in enumerate(self.experts):
            routed = (expert == e).to(tokens.dtype)[:, None]
            out = out + layer(tokens) * weight[:, None] * routed
        return out.view(b, s, h)


def mend_target_moe_router():
    torch.manual_seed(0)
    model = SparseMoE(MoEConfig()).eval()
    return model, (torch.randn(2, 8, 32),)


def mend_target_moe_router_reference():
    torch.manual_seed(0)
    model = DenseMoE(MoEConfig()).eval()
    return model, (torch.randn(2, 8, 32),)


class GroupedExperts(nn.Module):
    """Megablocks-style: sort tokens by expert, expand by per-expert counts."""

    def __init__(self, cfg: MoEConfig, top_k: int = 2):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(cfg.hidden_size, cfg.num_experts, bias=False)
        self.w_in = nn.Parameter(torch.randn(cfg.num_experts, cfg.hidden_size, cfg.ffn_size) * 0.05)
        self.w_out = nn.Parameter(torch.randn(cfg.num_experts, cfg.ffn_size, cfg.hidden_size) * 0.05)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        tokens = hidden.reshape(-1, hidden.shape[-1])
        scores, experts = self.gate(tokens).softmax(-1).topk(self.top_k, dim=-1)
        per_expert = nn.functional.one_hot(experts.flatten(), self.w_in.shape[0]).sum(0)
        expert_ids = torch.arange(self.w_in.shape[0], device=tokens.device).repeat_interleave(per_expert)
        order = experts.flatten().argsort(stable=True)
        x = tokens.repeat_interleave(self.top_k, dim=0)[order]
        y = torch.bmm(torch.relu(torch.bmm(x[:, None], self.w_in[expert_ids])), self.w_out[expert_ids])[:, 0]
        out = torch.zeros_like(y).index_copy(0, order, y) * scores.flatten()[:, None]
        return out.view(-1, self.top_k, tokens.shape[-1]).sum(1).view_as(hidden)


def mend_target_moe_grouped_experts():
    torch.manual_seed(0)
    model = GroupedExperts(MoEConfig()).eval()
    return model, (torch.randn(2, 8, 32),)


class TopKDispatch(nn.Module):
    """Mixtral's sparse MoE block (transformers 4.46): top-k routing, per-expert gather by
    ``torch.where(expert_mask[e])``, scatter with ``index_add_``."""

    def __init__(self, cfg: MoEConfig, top_k: int = 2):
        super().__init__()
        self.num_experts, self.top_k = cfg.num_experts, top_k
        self.gate = nn.Linear(cfg.hidden_size, cfg.num_experts, bias=False)
        self.experts = nn.ModuleList(Expert(cfg) for _ in range(cfg.num_experts))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        routing_weights = torch.softmax(self.gate(hidden_states), dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros_like(hidden_states)
        expert_mask = nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        return final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)


def mend_target_moe_topk_dispatch():
    torch.manual_seed(0)
    model = TopKDispatch(MoEConfig(num_experts=8)).eval()
    return model, (torch.randn(2, 8, 32),)
