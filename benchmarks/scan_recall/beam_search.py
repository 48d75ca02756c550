"""Beam search over a tiny decoder, written the way seq2seq toolkits write it: Python lists of
hypotheses, tensor scores read back to pick finished beams, an early stop on EOS."""

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Hypothesis:
    tokens: list = field(default_factory=list)
    score: float = 0.0


class TinyDecoder(nn.Module):
    def __init__(self, vocab: int = 20, dim: int = 16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRUCell(dim, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens, state):
        state = self.rnn(self.emb(tokens), state)
        return F.log_softmax(self.out(state), dim=-1), state


def length_penalty(length: int, alpha: float = 0.6) -> float:
    return ((5 + length) / 6) ** alpha


def beam_search(decoder: TinyDecoder, state: torch.Tensor, bos: int, eos: int, beam: int = 3, max_len: int = 5):
    tokens = torch.full((beam,), bos, dtype=torch.long)
    state = state.expand(beam, -1).contiguous()
    scores = torch.zeros(beam)
    finished = []
    for step in range(max_len):
        logp, state = decoder(tokens, state)
        cand = (scores[:, None] + logp).view(-1)
        top_scores, top_idx = cand.topk(beam)
        beam_idx = top_idx // logp.shape[-1]
        tokens = top_idx % logp.shape[-1]
        state = state[beam_idx]
        scores = top_scores
        for b, tok in enumerate(tokens.tolist()):
            if tok == eos:
                finished.append(Hypothesis([tok], scores[b].item() / length_penalty(step + 1)))
        if len(finished) >= beam:
            break
    best = max(finished, key=lambda h: h.score) if finished else None
    return tokens, scores, best


def greedy_decode(decoder: TinyDecoder, state: torch.Tensor, bos: int, max_len: int = 5):
    tokens = torch.full((state.shape[0],), bos, dtype=torch.long)
    out = []
    for _ in range(max_len):
        logp, state = decoder(tokens, state)
        tokens = logp.argmax(-1)
        out.append(tokens)
    return torch.stack(out, dim=1)


def mend_target_beam():
    torch.manual_seed(0)
    return beam_search, (TinyDecoder().eval(), torch.randn(1, 16), 1, 2)


def mend_target_greedy():
    torch.manual_seed(0)
    return greedy_decode, (TinyDecoder().eval(), torch.randn(3, 16), 1)
