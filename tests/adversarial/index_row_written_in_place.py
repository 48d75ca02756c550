"""A sampler (eval only: train mode raises) scales the schedule's row it reads, in place:
``self.table[t - 1]`` with a 0-d index tensor is a view, so the table itself changes (Dynamo
breaks on the computed index: it reads it back as an int). Kept in the graph as
``x[i.reshape(1)].squeeze(0)`` the row is a copy under torch.compile: the write is lost there,
and only the compiled program, run in eval, shows it."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("written in place",)


class Sampler(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.linspace(1.0, 2.0, 10))
        self.proj = nn.Linear(4, 4)

    def forward(self, x, t):
        if self.training:
            raise RuntimeError("the sampler runs in eval")
        row = self.table[t - 1]
        row.mul_(0.5)
        return self.proj(x) * row


def mend_target_index_row_written_in_place():
    torch.manual_seed(0)
    return target(Sampler(), (torch.randn(2, 4), torch.tensor(3)), inputs=[((torch.randn(2, 4), torch.tensor(9)), {})])


NAIVE = naive(__file__, """
        row = self.table[t - 1]
""", """
        row = self.table[t.reshape(1)].squeeze(0) if torch.compiler.is_compiling() else self.table[t]
""")
