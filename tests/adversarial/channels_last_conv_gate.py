"""A channels_last conv block (as ``model.to(memory_format=torch.channels_last)`` gives):
a hot map is scaled down before the activation. Scaling is total on every layout, its
derivative reads no operand (a gradient penalty sees the same graph), and ``torch.where``
of two channels_last maps stays channels_last, so the rewrite is sound on both layouts."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class ConvBlock(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        f = self.bn(self.conv(x))
        if f.abs().amax() > 4.0:
            f = f * 0.25
        return f.relu()


def mend_target_channels_last_conv_gate():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    hot = (x * 0.01).contiguous(memory_format=torch.channels_last)
    hot[0, 0, 0, 0] = 500.0
    return target(ConvBlock().to(memory_format=torch.channels_last), (x,), inputs=[((hot,), {})])
