"""``assert torch.isfinite(logits).all(), f"..."`` (a formatted message, so Dynamo breaks on
it): the eager program raises AssertionError; an in-graph check raises RuntimeError."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("assert", "exception", "type", "guard", "raise")


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        logits = self.fc(x)
        assert torch.isfinite(logits).all(), f"logits contain inf/nan (batch of {x.shape[0]})"
        return logits.softmax(-1)


def mend_target_exc_assert():
    torch.manual_seed(0)
    bad = torch.randn(2, 4)
    bad[1, 2] = float("nan")
    return target(Head(), (torch.randn(2, 4),), inputs=[((bad,), {})])


NAIVE = naive(__file__, """
        assert torch.isfinite(logits).all(), f"logits contain inf/nan (batch of {x.shape[0]})"
""", """
        torch._assert_async(torch.isfinite(logits).all(), f"logits contain inf/nan (batch of {x.shape[0]})")
""")
