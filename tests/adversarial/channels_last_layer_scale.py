"""A channels_last conv block (as ``model.to(memory_format=torch.channels_last)`` gives)
whose per-channel layer scale ``gamma`` applies only when activations run hot. The arms are
total on every layout, but ``gamma`` is a parameter only one arm uses: on a batch that takes
the ``relu`` arm, eager code leaves ``gamma.grad`` None (an optimizer skips it: no weight
decay, no momentum step); a ``torch.where`` rewrite gives it a zero gradient."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("gradient of parameter", "nonetype vs tensor", "none")


class ConvBlock(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.gamma = nn.Parameter(torch.full((c,), 0.1))

    def forward(self, x):
        f = self.bn(self.conv(x))
        if f.abs().amax() > 4.0:
            f = f * self.gamma.view(1, -1, 1, 1)
        else:
            f = f.relu()
        return f


def mend_target_channels_last_layer_scale():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    hot = (x * 0.01).contiguous(memory_format=torch.channels_last)
    hot[0, 0, 0, 0] = 500.0
    return target(ConvBlock().to(memory_format=torch.channels_last), (x,), inputs=[((hot,), {})])


NAIVE = naive(__file__, """
        if f.abs().amax() > 4.0:
            f = f * self.gamma.view(1, -1, 1, 1)
        else:
            f = f.relu()
""", """
        f = torch.where(f.abs().amax() > 4.0, f * self.gamma.view(1, -1, 1, 1), f.relu())
""")
