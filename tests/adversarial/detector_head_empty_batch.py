"""A detection head's per-class confidence over the proposals of one image: the strongest
logit of each class when any proposal fired, zeros otherwise. Evaluated on an image with no
proposals (an empty batch), eager code takes the zeros; a plain ``torch.where`` also runs
``amax(dim=0)`` over the empty proposals, which raises."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("empty", "raise", "amax", "total", "shape")


class DetHead(nn.Module):
    def __init__(self, dim=8, classes=3):
        super().__init__()
        self.cls = nn.Linear(dim, classes)

    def forward(self, feats):
        logits = self.cls(feats)
        if (logits.sigmoid() > 0.5).any():
            conf = logits.amax(dim=0)
        else:
            conf = logits.sum(0) * 0.0
        return conf


def mend_target_detector_head_empty_batch():
    torch.manual_seed(0)
    feats = torch.randn(6, 8)
    # eval on an image with no proposals
    return target(DetHead().eval(), (feats,), inputs=[((torch.zeros(0, 8),), {}), ((feats * -4,), {})])


NAIVE = naive(__file__, """
        if (logits.sigmoid() > 0.5).any():
            conf = logits.amax(dim=0)
        else:
            conf = logits.sum(0) * 0.0
""", """
        conf = torch.where((logits.sigmoid() > 0.5).any(), logits.amax(dim=0), logits.sum(0) * 0.0)
""")
