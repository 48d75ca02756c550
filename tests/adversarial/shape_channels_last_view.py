"""A conv feature map flattened with ``.view`` on the rare saturated path. A
``channels_last`` input gives a ``channels_last`` map, which ``view`` cannot flatten: eager
code never reaches it on the inputs given, a plain ``torch.where`` does and raises. Written
``reshape``, the arm returns where the original, saturated on a ``channels_last`` map,
raises: verification's channels_last edge, scaled until it takes that arm, refuses it."""

import torch
from torch import nn

from graphmend import Target

from _adv import naive

EXPECT = "refuse"
ACCEPT_REASONS = ("original raised runtimeerror: view size is not compatible",)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        f = self.conv(x)
        b, c, h, w = f.shape
        if f.abs().mean() > 10.0:  # saturated: rescaled
            out = f.view(b, c * h * w) * 0.1
        else:
            out = f.flatten(1)
        return out


def mend_target_shape_channels_last_view():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6)
    # a channels_last batch is one the user has, not one the example shows
    return Target(fn=Head(), args=(x,), perturb=[((x.contiguous(memory_format=torch.channels_last),), {})])


NAIVE = naive(__file__, """
        if f.abs().mean() > 10.0:  # saturated: rescaled
            out = f.view(b, c * h * w) * 0.1
        else:
            out = f.flatten(1)
""", """
        out = torch.where(f.abs().mean() > 10.0, f.view(b, c * h * w) * 0.1, f.flatten(1))
""")
