"""A channels_last conv block (as ``model.to(memory_format=torch.channels_last)`` gives) in
a critic trained with a gradient penalty: hot maps are clipped, others go through ``relu``.
Both arms are total on every layout, and ``torch.where`` keeps the layout, but not the
second derivative: ``relu``'s backward reads its output, ``clamp``'s reads no operand, so
on a hot batch the penalty of the ``torch.where`` form reaches the norm's bias (a zero
gradient) where the original's never does (None)."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("double backward", "gradient of parameter", "nonetype vs tensor")


class ConvBlock(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        f = self.bn(self.conv(x))
        if f.abs().amax() > 4.0:
            f = f.clamp(-4.0, 4.0)
        else:
            f = f.relu()
        return f


def mend_target_channels_last_clip_penalty():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    hot = (x * 0.01).contiguous(memory_format=torch.channels_last)
    hot[0, 0, 0, 0] = 500.0
    return target(ConvBlock().to(memory_format=torch.channels_last), (x,), inputs=[((hot,), {})])


NAIVE = naive(__file__, """
        if f.abs().amax() > 4.0:
            f = f.clamp(-4.0, 4.0)
        else:
            f = f.relu()
""", """
        f = torch.where(f.abs().amax() > 4.0, f.clamp(-4.0, 4.0), f.relu())
""")
