"""A deprecation warning in a layer's forward. Guarding it with ``if not
torch.compiler.is_compiling():`` keeps eager code as it is, but in compiled code the warning
no longer fires -- and under ``-W error`` (a test suite's filter, a ``simplefilter("error")``)
the original raises there, compiled as well, while the guarded call raises in eager code only.
No check that runs with the default filters can see it: the fix is unsafe (--unsafe-fixes)."""

import warnings

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("unsafe fix: this warning no longer fires in compiled code",)


class LegacyScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        warnings.warn("LegacyScale is deprecated", DeprecationWarning)
        return self.fc(x) * 2


def mend_target_partial_warning_error():
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    return target(LegacyScale(), (x,), inputs=[((-x,), {})])
