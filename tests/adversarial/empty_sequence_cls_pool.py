"""Sentence pooling for a batch of token features: the first token (a CLS token) when the
batch has any real token, the mean otherwise. Evaluated on a batch whose sequences are empty
(length 0), eager code takes the mean (NaN, no error); a plain ``torch.where`` also indexes
``h[:, 0]`` on the empty length, which raises."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("empty", "index", "raise", "shape", "total")


class Pooler(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, h, mask):
        h = self.proj(h)
        if mask.any():
            pooled = h[:, 0] * 1.0
        else:
            pooled = h.mean(1)
        return pooled


def mend_target_empty_sequence_cls_pool():
    torch.manual_seed(0)
    h = torch.randn(2, 4, 6)
    mask = torch.ones(2, 4, dtype=torch.bool)
    # a zero-length sequence batch in eval
    return target(Pooler().eval(), (h, mask),
                  inputs=[((torch.zeros(2, 0, 6), torch.zeros(2, 0, dtype=torch.bool)), {}),
                          ((h, torch.zeros_like(mask)), {})])


NAIVE = naive(__file__, """
        if mask.any():
            pooled = h[:, 0] * 1.0
        else:
            pooled = h.mean(1)
""", """
        pooled = torch.where(mask.any(), h[:, 0] * 1.0, h.mean(1))
""")
