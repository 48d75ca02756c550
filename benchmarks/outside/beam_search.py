"""Beam search step of a seq2seq decoder (fairseq / OpenNMT style): length penalty,
early stopping and score normalisation on tensors."""

import torch
from torch import nn


class BeamStep(nn.Module):
    def __init__(self, vocab=11, dim=8, beam=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, vocab)
        self.beam = beam

    def step(self, tokens, scores, length_penalty):
        h = self.embed(tokens)
        logp = self.proj(h).log_softmax(-1)
        cand = scores.unsqueeze(-1) + logp
        best = cand.amax(-1)
        return best, logp, cand

    def forward(self, tokens, scores, length_penalty: float = 1.0, min_len: int = 2):
        print("beam step", tokens.shape)
        best, logp, cand = self.step(tokens, scores, length_penalty)
        norm = logp.exp().sum(-1).mean().item()
        out = cand + self.proj(self.embed(tokens)) * norm
        if min_len > 1 and best.max() > 0:
            out = out - 1.0
        if length_penalty > 0 and out.mean() < -100.0:
            out = out * 0.5
        return out


def mend_target_beam_search():
    from graphmend import Target

    torch.manual_seed(0)
    tokens = torch.randint(0, 11, (2, 3))
    # scores that make the best candidate positive, and ones that sink the mean below -100
    return Target(BeamStep(), (tokens, torch.zeros(2, 3)),
                  inputs=[((tokens, torch.full((2, 3), 5.0)), {}), ((tokens, torch.full((2, 3), -500.0)), {})])
