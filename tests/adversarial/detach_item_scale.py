"""``scale = h.abs().max().item(); y = h / scale``: the Python float is a constant to
autograd. Kept on device it must stay detached, or gradients flow through the max."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "fix"
ACCEPT_REASONS = ()


class ScaleNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)

    def forward(self, x):
        h = self.fc(x)
        scale = h.abs().max().item()
        return h / scale


def mend_target_detach_item_scale():
    torch.manual_seed(0)
    return target(ScaleNorm(), (torch.randn(3, 5),), inputs=[((torch.randn(3, 5) * 10,), {})])


NAIVE = naive(__file__, """
        scale = h.abs().max().item()
""", """
        scale = h.abs().max()
""")
