"""Per-row scales repeated by a count each row's features decide (``repeat_interleave`` with
tensor counts) at a function's end, where the scales carry a parameter's gradient. Compiled in
eval, the function's last lines become one custom op of unbacked size (GM504); in training that
op, which has no derivative, must not stand between the parameter and its gradient: the call
runs the lines there, and the parameter gets the gradient the original gives it."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"


def spread(scales, counts):
    return torch.repeat_interleave(scales, counts)


class RowScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.75))
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        h = self.proj(x)
        counts = (h[:, 0] > 0).long() + 1
        s = spread(self.scale * torch.linspace(0.5, 1.5, x.shape[0]), counts)
        return h * s.square().sum()


def mend_target_shape_tail_trained_scale():
    torch.manual_seed(0)
    return target(RowScale(), (torch.randn(5, 4),), inputs=[((torch.randn(3, 4) * 4,), {})])
