"""A contrastive head (HuBERT's pre-training loss): negatives equal to their positive are
masked to -inf, under a guard that asks whether any is. A write through a mask with no
element set writes nothing, so the guard can go; the masked write stays in place on the
logits, whose gradient flows through it either way."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class ContrastiveHead(nn.Module):
    def __init__(self, d=6):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x, pos, negs):
        p, negs = self.proj(x), negs.transpose(0, 1)  # negs: (batch, k, d) -> (k, batch, d)
        neg_is_pos = (pos == negs).all(-1)
        logits = torch.cosine_similarity(p, torch.cat([pos[None], negs], 0), dim=-1) / 0.1
        if neg_is_pos.any():
            logits[1:][neg_is_pos] = float("-inf")
        return logits.transpose(0, 1).log_softmax(-1)


def mend_target_masked_write_guard():
    torch.manual_seed(0)
    x, pos, negs = torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 3, 6)
    drawn = negs.clone()
    drawn[2, 1] = pos[2]  # a negative drawn from the positive's own class
    return target(ContrastiveHead(), (x, pos, negs), inputs=[((x, pos, drawn), {})])
