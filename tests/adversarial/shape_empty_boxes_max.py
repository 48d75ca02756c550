"""Detection: the best score of an image, 0 when no box passed the threshold. An image with
no boxes at all gives an empty score tensor; eager code never takes ``scores.max()`` there,
a plain ``torch.where`` does, and ``max`` of an empty tensor raises."""

import torch

from graphmend import Target

from _adv import naive

EXPECT = "refuse"
ACCEPT_REASONS = ("empty",)


def best_score(scores):
    if (scores > 0.05).any():
        best = scores.max() * 2.0
    else:
        best = scores.sum() * 0.0
    return best


def mend_target_shape_empty_boxes_max():
    torch.manual_seed(0)
    scores = torch.rand(6)
    # the image with no boxes is a batch the user has, not one the example shows
    return Target(fn=best_score, args=(scores,), perturb=[((torch.zeros(0),), {})])


NAIVE = naive(__file__, """
    if (scores > 0.05).any():
        best = scores.max() * 2.0
    else:
        best = scores.sum() * 0.0
""", """
    best = torch.where((scores > 0.05).any(), scores.max() * 2.0, scores.sum() * 0.0)
""")
