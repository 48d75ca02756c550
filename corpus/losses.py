"""Training losses with validation guards, masked token losses and label checks."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class LossConfig:
    vocab_size: int = 50
    hidden_size: int = 32
    ignore_index: int = -100
    label_smoothing: float = 0.1


class LMHeadWithLoss(nn.Module):
    """Checks its inputs the way careful training code does, then computes a smoothed CE."""

    def __init__(self, cfg: LossConfig):
        super().__init__()
        self.cfg = cfg
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size)

    def forward(self, hidden, labels, loss_mask):
        logits = self.lm_head(hidden)
        assert torch.isfinite(logits).all(), "logits contain inf/nan"
        if (labels >= self.cfg.vocab_size).any():
            raise ValueError(f"labels must be < vocab_size={self.cfg.vocab_size}")
        if not torch.equal(loss_mask, loss_mask.bool().to(loss_mask.dtype)):
            raise ValueError("loss_mask must hold only 0 and 1")
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=self.cfg.ignore_index,
                               label_smoothing=self.cfg.label_smoothing, reduction="none")
        return (loss * loss_mask.flatten()).sum() / loss_mask.sum()


class LMHeadWithLossFixed(LMHeadWithLoss):
    def forward(self, hidden, labels, loss_mask):
        logits = self.lm_head(hidden)
        torch._assert_async(torch.isfinite(logits).all(), "logits contain inf/nan")
        torch._assert_async(~(labels >= self.cfg.vocab_size).any(), f"labels must be < vocab_size={self.cfg.vocab_size}")
        torch._assert_async(torch.all(loss_mask == loss_mask.bool().to(loss_mask.dtype)), "loss_mask must hold only 0 and 1")
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=self.cfg.ignore_index,
                               label_smoothing=self.cfg.label_smoothing, reduction="none")
        return (loss * loss_mask.flatten()).sum() / loss_mask.sum()


def _lm_batch(cfg: LossConfig):
    hidden = torch.randn(2, 12, cfg.hidden_size)
    labels = torch.randint(0, cfg.vocab_size, (2, 12))
    labels[1, 9:] = cfg.ignore_index
    loss_mask = (labels != cfg.ignore_index).long()
    return hidden, labels, loss_mask


def mend_target_lm_loss_guards():
    torch.manual_seed(0)
    cfg = LossConfig()
    return LMHeadWithLoss(cfg), _lm_batch(cfg)


def mend_target_lm_loss_guards_reference():
    torch.manual_seed(0)
    cfg = LossConfig()
    return LMHeadWithLossFixed(cfg), _lm_batch(cfg)


class MaskedTokenLoss(nn.Module):
    """MLM loss over the masked positions only (mask-then-reduce)."""

    def __init__(self, cfg: LossConfig):
        super().__init__()
        self.cfg = cfg
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size)

    def forward(self, hidden, labels, masked_positions):
        logits = self.lm_head(hidden)
        token_loss = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
        return token_loss[masked_positions].sum() / masked_positions.sum().clamp(min=1)


class MaskedTokenLossFixed(MaskedTokenLoss):
    def forward(self, hidden, labels, masked_positions):
        logits = self.lm_head(hidden)
        token_loss = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
        return (token_loss * masked_positions).sum() / masked_positions.sum().clamp(min=1)


def _mlm_batch(cfg: LossConfig):
    hidden = torch.randn(2, 12, cfg.hidden_size)
    labels = torch.randint(0, cfg.vocab_size, (2, 12))
    masked = torch.rand(2, 12) < 0.3
    return hidden, labels, masked


def mend_target_masked_token_loss():
    torch.manual_seed(0)
    cfg = LossConfig()
    return MaskedTokenLoss(cfg), _mlm_batch(cfg)


def mend_target_masked_token_loss_reference():
    torch.manual_seed(0)
    cfg = LossConfig()
    return MaskedTokenLossFixed(cfg), _mlm_batch(cfg)


class FocalLoss(nn.Module):
    """Focal loss that still honours a deprecated argument, with a warning each call."""

    def __init__(self, gamma: float = 2.0, size_average=None):
        super().__init__()
        self.gamma = gamma
        self.size_average = size_average

    def forward(self, logits, targets):
        p = logits.sigmoid()
        ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
        if self.size_average is not None:
            warnings.warn("size_average is deprecated, use reduction='mean'", FutureWarning)
        p_t = p * targets + (1 - p) * (1 - targets)
        return (ce * (1 - p_t) ** self.gamma).mean()


def mend_target_focal_loss_warning():
    torch.manual_seed(0)
    logits = torch.randn(4, 10)
    targets = (torch.rand(4, 10) > 0.7).float()
    return FocalLoss(size_average=True), (logits, targets)
