"""A module whose train mode is not deterministic from call to call (it scales by a call
count kept outside the module, where verification cannot put it back between the calls it
repeats, as a seed drawn per call would be), with a
tensor ``if`` after it. Verification repeats the call and sees the original itself differ,
so its train check (outputs and gradients) cannot run: whatever the rewrite does to
gradients goes unseen. The oracle here builds both sides fresh and calls them in step, so it
can compare them; mend cannot, and must not call a proof without the train check verified:
the fix is 'partially verified', not written by a plain --write."""

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("partially verified: not written without --accept-partial",)


CALLS = [0]


class CountedGate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        if self.training:
            CALLS[0] += 1
            h = h * (1.0 + 0.5 * CALLS[0])
        if h.sum() > 0:
            h = h * 2
        else:
            h = h - 1
        return h


def mend_target_partial_nondet_train():
    torch.manual_seed(0)
    x = torch.randn(3, 6) * 3
    return target(CountedGate(), (x,), inputs=[((-x,), {}), ((x.flip(0),), {})])
