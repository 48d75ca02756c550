"""``if torch.isnan(h).any(): logger.warning(...)``: a deferred or guarded warning must still
fire in eager on the NaN batch (or the fix is unsafe)."""

import logging

import torch
from torch import nn

from _adv import naive, target

logger = logging.getLogger(__name__)

EXPECT = "refuse"
ACCEPT_REASONS = ("log", "side effect", "defer", "unsafe", "warning")


class Watch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if torch.isnan(h).any():
            logger.warning("NaN in activations")
        return h


def mend_target_log_nan_warning():
    torch.manual_seed(0)
    bad = torch.randn(2, 4)
    bad[0, 1] = float("nan")
    return target(Watch(), (torch.randn(2, 4),), inputs=[((bad,), {})])


NAIVE = naive(__file__, """
        if torch.isnan(h).any():
            logger.warning("NaN in activations")
""", """
        pass
""")
