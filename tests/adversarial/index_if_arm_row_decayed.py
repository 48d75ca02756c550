"""A table lookup under an ``if`` on a 0-d index tensor, whose arm decays the row it read in
place (``row.mul_(0.5)``): eager code's ``self.table[i]`` is a view, so the table itself
changes. GM303 keeps an index a tensor condition tests in the graph in that arm too, but
compiled its one-element form is a copy, and the table would keep its value; and the ``if``
cannot become a ``torch.where`` around an in-place write. Neither may be marked verified."""

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("in place", "side effects")


class DecayingLookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.linspace(0.1, 1.0, 10))
        self.fc = nn.Linear(4, 4)

    def forward(self, x, t):
        i = t - 3
        if i >= 0:
            row = self.table[i]
            row.mul_(0.5)
            h = self.fc(x) * row
        else:
            h = self.fc(x)
        return h


def mend_target_index_if_arm_row_decayed():
    torch.manual_seed(0)
    return target(DecayingLookup(), (torch.randn(2, 4), torch.tensor(6)),
                  inputs=[((torch.randn(3, 4), torch.tensor(1)), {})])
