"""log in one arm, inputs with an exact zero: log(0) = -inf in the unselected arm and its
backward is 0 / 0."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "log", "non-total")


class LogOrIdentity(nn.Module):
    def forward(self, x):
        if (x > 0).all():
            y = torch.log(x)
        else:
            y = x
        return y.sum(-1)


def mend_target_nan_log():
    torch.manual_seed(0)
    x = torch.rand(2, 3) + 0.5
    trig = torch.tensor([[0.0, 1.0, 2.0], [0.5, 0.0, 3.0]])
    return target(LogOrIdentity(), (x,), inputs=[((trig,), {})])


NAIVE = naive(__file__, """
        if (x > 0).all():
            y = torch.log(x)
        else:
            y = x
""", """
        y = torch.where((x > 0).all(), torch.log(x), x)
""")
