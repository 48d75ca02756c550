"""Breaks only a training step hits: ``self.training`` branches, LayerDrop, the logging
of gradient checkpointing, loss guards and training-time logging of an aux loss.

In eval mode (``.eval()`` under ``no_grad``) each of these models compiles to one graph;
in train mode (``.train()``, grad on, a backward) each breaks. Every one has a hand-fixed
``_reference`` that compiles whole in both modes and computes the same forward.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

log = logging.getLogger("corpus.training")


class Block(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class LayerDropEncoder(nn.Module):
    """LayerDrop as transformers' wav2vec2 / BART encoders write it: a random draw decides,
    in Python, whether a layer runs."""

    def __init__(self, layers: int = 4, layerdrop: float = 0.3):
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(layers))
        self.layerdrop = layerdrop
        self.norm = nn.LayerNorm(32)  # the output has weights to train even when every layer drew "skip"

    def forward(self, x):
        for layer in self.layers:
            if self.training:
                dropout_probability = torch.rand([])
                if dropout_probability < self.layerdrop:  # data-dependent: breaks in training only
                    continue
            x = layer(x)
        return self.norm(x)


class LayerDropEncoderReference(LayerDropEncoder):
    """The draw stays a tensor: a skipped layer's residual update is multiplied by zero."""

    def forward(self, x):
        for layer in self.layers:
            if self.training:
                keep = (torch.rand([]) >= self.layerdrop).to(x.dtype)
                x = x + keep * (layer(x) - x)
            else:
                x = layer(x)
        return self.norm(x)


class CheckpointedStack(nn.Module):
    """Gradient checkpointing as transformers' decoders switch it on: in training it cannot
    keep a KV cache, and says so through the logger before turning the cache off."""

    def __init__(self, layers: int = 3):
        super().__init__()
        self.embed = nn.Linear(32, 32)
        self.layers = nn.ModuleList(Block() for _ in range(layers))
        self.gradient_checkpointing = True

    def forward(self, x, use_cache: bool = True):
        x = self.embed(x)
        if self.gradient_checkpointing and self.training and use_cache:
            log.warning("use_cache=True is incompatible with gradient checkpointing; setting use_cache=False")
            use_cache = False
        cache = []
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
            if use_cache:
                cache.append(x)
        return x, cache


class CheckpointedStackReference(CheckpointedStack):
    """The cache decision without the log line: the caller is told by the docs, not at run time."""

    def forward(self, x, use_cache: bool = True):
        x = self.embed(x)
        use_cache = use_cache and not (self.gradient_checkpointing and self.training)
        cache = []
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
            if use_cache:
                cache.append(x)
        return x, cache


class GuardedLoss(nn.Module):
    """A classifier whose training forward refuses a non-finite loss, as training loops do,
    then scales it for gradient accumulation."""

    def __init__(self, d: int = 32, classes: int = 10, accumulation_steps: int = 4):
        super().__init__()
        self.body = Block(d)
        self.head = nn.Linear(d, classes)
        self.accumulation_steps = accumulation_steps

    def forward(self, x, labels):
        logits = self.head(self.body(x))
        loss = F.cross_entropy(logits, labels)
        if self.training and not torch.isfinite(loss):  # the guard reads the loss on the host
            raise FloatingPointError("non-finite loss")
        return loss / self.accumulation_steps


class GuardedLossReference(GuardedLoss):
    """The guard as an in-graph assertion: it still raises eagerly, and compiles."""

    def forward(self, x, labels):
        logits = self.head(self.body(x))
        loss = F.cross_entropy(logits, labels)
        if self.training:
            torch._assert_async(torch.isfinite(loss), "non-finite loss")
        return loss / self.accumulation_steps


class LoggedAuxLoss(nn.Module):
    """A mixture layer that logs its load-balancing loss during training."""

    def __init__(self, d: int = 32, experts: int = 4):
        super().__init__()
        self.router = nn.Linear(d, experts)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(experts))

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        out = sum(probs[..., i:i + 1] * e(x) for i, e in enumerate(self.experts))
        if self.training:
            aux = (probs.mean(dim=(0, 1)) ** 2).sum() * len(self.experts)
            log.debug("aux loss %.4f", aux.item())  # a host read and a logging call: training only
            out = out + 0.0 * aux
        return out


class LoggedAuxLossReference(LoggedAuxLoss):
    """The aux loss stays in the graph; nothing is read back to log."""

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        out = sum(probs[..., i:i + 1] * e(x) for i, e in enumerate(self.experts))
        if self.training:
            aux = (probs.mean(dim=(0, 1)) ** 2).sum() * len(self.experts)
            out = out + 0.0 * aux
        return out


def _x(seed: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(2, 8, 32)


def mend_target_layerdrop():
    torch.manual_seed(0)
    return LayerDropEncoder(), (_x(),)


def mend_target_layerdrop_reference():
    torch.manual_seed(0)
    return LayerDropEncoderReference(), (_x(),)


def mend_target_gradient_checkpointing():
    torch.manual_seed(0)
    return CheckpointedStack(), (_x(),)


def mend_target_gradient_checkpointing_reference():
    torch.manual_seed(0)
    return CheckpointedStackReference(), (_x(),)


def mend_target_loss_guard():
    torch.manual_seed(0)
    return GuardedLoss(), (_x().view(16, 32), torch.randint(0, 10, (16,)))


def mend_target_loss_guard_reference():
    torch.manual_seed(0)
    return GuardedLossReference(), (_x().view(16, 32), torch.randint(0, 10, (16,)))


def mend_target_logged_aux_loss():
    torch.manual_seed(0)
    return LoggedAuxLoss(), (_x(),)


def mend_target_logged_aux_loss_reference():
    torch.manual_seed(0)
    return LoggedAuxLossReference(), (_x(),)
