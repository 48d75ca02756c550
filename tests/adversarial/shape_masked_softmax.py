"""Attention over a padded batch with an additive mask (0 where kept, -inf where padded). A
sequence with no token makes a row all -inf, and eager code takes the clamped arm for that
batch. A plain ``torch.where`` still runs the softmax of the all -inf row: NaN, and its NaN
derivative reaches the scores' gradient. The sound form feeds that softmax 0 where its arm is
not selected."""

import torch

from graphmend import Target

from _adv import naive

EXPECT = "fix"
ACCEPT_REASONS = ()


def attend(scores, bias):
    if (bias == 0).any(-1).all():
        w = (scores + bias).softmax(-1)
    else:  # an empty sequence: its row of -inf would be NaN
        w = (scores + bias.clamp(min=-1e4)).softmax(-1)
    return w


def mend_target_shape_masked_softmax():
    torch.manual_seed(0)
    bias = torch.zeros(3, 5)
    bias[1, 3:] = float("-inf")
    empty = bias.clone()
    empty[2] = float("-inf")  # the padded batch holds an empty sequence
    # a batch with an empty sequence is one the user has, not one the example shows
    return Target(fn=attend, args=(torch.randn(3, 5), bias), perturb=[((torch.randn(3, 5), empty), {})])


NAIVE = naive(__file__, """
    if (bias == 0).any(-1).all():
        w = (scores + bias).softmax(-1)
    else:  # an empty sequence: its row of -inf would be NaN
        w = (scores + bias.clamp(min=-1e4)).softmax(-1)
""", """
    w = torch.where((bias == 0).any(-1).all(), (scores + bias).softmax(-1),
                    (scores + bias.clamp(min=-1e4)).softmax(-1))
""")
