"""A table lookup whose fallback arm no input reaches (``prev_t`` is never negative here),
written as a ternary on a 0-d index tensor: two rewrites at one line, the index kept in the
graph (GM303) and the ternary made a ``torch.where`` (GM102). The ternary's rewrite cannot be
verified (its other arm never runs), and the index's rewrite cannot be written without it:
neither may be marked verified."""

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("never ran", "applied only with")


class Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.linspace(0.1, 1.0, 10))
        self.register_buffer("one", torch.tensor(1.0))
        self.fc = nn.Linear(4, 4)

    def forward(self, x, t):
        prev_t = t.abs() + 1
        scale = self.table[prev_t] if prev_t >= 0 else self.one
        return self.fc(x) * scale


def mend_target_index_ternary_one_arm():
    torch.manual_seed(0)
    return target(Lookup(), (torch.randn(2, 4), torch.tensor(6)), inputs=[((torch.randn(3, 4), torch.tensor(2)), {})])
