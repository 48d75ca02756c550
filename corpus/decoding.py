"""Decoding steps: greedy generation with early exit, beam bookkeeping, confidence exits."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class DecoderConfig:
    vocab_size: int = 64
    hidden_size: int = 32
    eos_token_id: int = 2
    max_new_tokens: int = 6


class TinyDecoder(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.cell = nn.GRUCell(cfg.hidden_size, cfg.hidden_size)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size)

    def step(self, token, state):
        state = self.cell(self.embed(token), state)
        return self.lm_head(state), state


class GreedyGenerator(nn.Module):
    """Generates until every sequence has emitted EOS (a while loop on a tensor)."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.decoder = TinyDecoder(cfg)

    def forward(self, bos, state):
        token = bos
        finished = torch.zeros_like(bos, dtype=torch.bool)
        tokens = []
        while not finished.all():
            logits, state = self.decoder.step(token, state)
            token = logits.argmax(-1).masked_fill(finished, self.cfg.eos_token_id)
            tokens.append(token)
            finished = finished | (token == self.cfg.eos_token_id)
            if len(tokens) >= self.cfg.max_new_tokens:
                break
        return torch.stack(tokens, 1)


def mend_target_greedy_generate_while():
    torch.manual_seed(0)
    cfg = DecoderConfig()
    return GreedyGenerator(cfg).eval(), (torch.tensor([1, 1]), torch.randn(2, cfg.hidden_size))


class EarlyExitDecoder(nn.Module):
    """Layer-skipping decoder: return after the shallow layers when already confident."""

    def __init__(self, cfg: DecoderConfig, num_layers: int = 4, threshold: float = 0.05):
        super().__init__()
        self.threshold = threshold
        self.layers = nn.ModuleList(nn.Linear(cfg.hidden_size, cfg.hidden_size) for _ in range(num_layers))
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size)

    def _run(self, layers, hidden):
        for layer in layers:
            hidden = hidden + torch.tanh(layer(hidden))
        return hidden

    def forward(self, hidden):
        hidden = self._run(self.layers[:2], hidden)
        probs = self.lm_head(hidden).softmax(-1)
        if probs.max(-1).values.min() > self.threshold:
            return probs
        hidden = self._run(self.layers[2:], hidden)
        return self.lm_head(hidden).softmax(-1)


class EarlyExitDecoderFixed(EarlyExitDecoder):
    def forward(self, hidden):
        hidden = self._run(self.layers[:2], hidden)
        probs = self.lm_head(hidden).softmax(-1)
        deep = self.lm_head(self._run(self.layers[2:], hidden)).softmax(-1)
        return torch.where(probs.max(-1).values.min() > self.threshold, probs, deep)


def mend_target_early_exit_decoder():
    torch.manual_seed(0)
    cfg = DecoderConfig()
    return EarlyExitDecoder(cfg).eval(), (torch.randn(2, cfg.hidden_size),)


def mend_target_early_exit_decoder_reference():
    torch.manual_seed(0)
    cfg = DecoderConfig()
    return EarlyExitDecoderFixed(cfg).eval(), (torch.randn(2, cfg.hidden_size),)


class RepetitionPenaltyStep(nn.Module):
    """One sampling step: penalties applied only when needed, decided with and/or on tensors."""

    def __init__(self, cfg: DecoderConfig, penalty: float = 1.3):
        super().__init__()
        self.cfg = cfg
        self.penalty = penalty
        self.decoder = TinyDecoder(cfg)

    def forward(self, prev_tokens, state):
        logits, state = self.decoder.step(prev_tokens[:, -1], state)
        seen = torch.zeros_like(logits, dtype=torch.bool).scatter(1, prev_tokens, prev_tokens >= 3)  # not specials
        should_penalise = seen.any() and logits.max() > 0
        if should_penalise:
            penalised = torch.where(logits > 0, logits / self.penalty, logits * self.penalty)
            logits = torch.where(seen, penalised, logits)
        logits = logits if state.abs().max() < 10 else logits / 2
        return logits.log_softmax(-1), state


def mend_target_repetition_penalty_and_or():
    import graphmend

    torch.manual_seed(0)
    cfg = DecoderConfig()
    prev = torch.randint(3, cfg.vocab_size, (2, 5))
    state = torch.randn(2, cfg.hidden_size)
    # a prompt of special tokens only: nothing seen, no penalty
    return graphmend.Target(RepetitionPenaltyStep(cfg).eval(), (prev, state),
                            inputs=[((torch.zeros_like(prev), state), {})])
