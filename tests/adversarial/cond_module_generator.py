"""An arm that calls a submodule (torch.cond-worthy) and adds noise from a generator the
module owns: torch.cond re-runs an arm in backward, and torch.where would draw on both
paths; either moves the generator where the original does not."""

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("generator", "random", "rng", "draw", "unsafe fix", "torch.cond")


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.gen = torch.Generator().manual_seed(3)

    def forward(self, x):
        if x.mean() > 0:
            y = self.fc(x) + torch.randn(x.shape, generator=self.gen)
        else:
            y = x * 2
        return y


def mend_target_cond_module_generator():
    torch.manual_seed(0)
    x = torch.rand(2, 6)
    return target(Noisy(), (x,), inputs=[((-x,), {})])
