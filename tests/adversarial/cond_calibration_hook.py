"""A refinement MLP run in one arm of a tensor `if` (torch.cond-worthy: a module call), with a
calibration hook on it, as post-training quantization registers: the hook records the
activation range. torch.cond refuses the hook's side effect (UncapturedHigherOrderOpError),
eager and compiled; hooks can be registered at any time, so the source cannot rule it out."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("hook", "unsafe fix", "torch.cond", "module", "side effect", "state")


class Refine(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x):
        if x.mean() > 0:
            y = self.mlp(x)
        else:
            y = x * 0.5
        return y


def mend_target_cond_calibration_hook():
    torch.manual_seed(0)
    m = Refine()
    ranges = []
    m.mlp.register_forward_hook(lambda mod, args, out: ranges.append(out.detach().abs().amax()))
    x = torch.rand(2, 8)
    return target(m, (x,), inputs=[((-x,), {})])


NAIVE = naive(__file__, """
        if x.mean() > 0:
            y = self.mlp(x)
        else:
            y = x * 0.5
""", """
        y = torch.cond(x.mean() > 0, lambda: self.mlp(x), lambda: x * 0.5)
""")
