"""A Python float threshold on ``.item()``: float32(0.3) > 0.3 in Python (double) but not
as a tensor comparison, which rounds 0.3 to the tensor's dtype -- in float32 and bf16."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("aliasing", "aliases", "item", "precision", "float", "tie", "threshold", "double", "dtype",
                  "values differ")  # an output difference measured at the tie is the symptom itself


def boost(h):
    if h.max().item() > 0.3:
        y = h * 2
    else:
        y = h
    return y


def mend_target_amp_item_tie():
    torch.manual_seed(0)
    tie = torch.tensor([[0.1, 0.3, 0.2], [-0.5, 0.25, 0.0]])
    return target(boost, (torch.rand(2, 3),), inputs=[((tie,), {})])


NAIVE = naive(__file__, """
    if h.max().item() > 0.3:
        y = h * 2
    else:
        y = h
""", """
    y = torch.where(h.max() > 0.3, h * 2, h)
""")
