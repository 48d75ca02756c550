"""A training-loop snippet: a batch whose loss is not finite (an overflowed logit, a
corrupt sample) is skipped by zeroing the loss. In eager code the skipped batch's zero loss
has no graph, so ``loss.backward()`` raises and the loop's ``except`` moves on; a plain
``torch.where`` keeps the graph, and backward sends ``0 * inf`` into every weight: NaN
gradients the optimizer then applies."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("nan", "grad", "backward", "raise", "exception", "finite", "total")


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x, y):
        pred = self.net(x).squeeze(-1)
        loss = ((pred - y) ** 2).mean()
        if not torch.isfinite(loss):  # a bad batch: skip its step
            loss = torch.zeros_like(loss)
        return loss


def mend_target_train_step_skip_nonfinite():
    torch.manual_seed(0)
    x, y = torch.randn(5, 4), torch.randn(5)
    bad = x.clone()
    bad[2, 1] = float("inf")
    return target(Regressor(), (x, y), inputs=[((bad, y), {})])


NAIVE = naive(__file__, """
        if not torch.isfinite(loss):  # a bad batch: skip its step
            loss = torch.zeros_like(loss)
""", """
        loss = torch.where(~torch.isfinite(loss), torch.zeros_like(loss), loss)
""")
