"""A feed-forward block that clips hot activations, and that picks the tanh approximation of
GELU when it is being compiled (the form its authors found Inductor fuses best) and the exact
one in eager. The original compiled is then not the original in eager, so eager cannot be the
compiled check's reference: the original compiled is, and the clip rewritten as ``torch.where``
compiles to what it computes (GELU's approximation is the same on both sides). A sound fix,
which a check that gave up wherever the original compiled differs from eager would not prove."""

import torch
from torch import nn
from torch.nn import functional as F

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class ClippedFeedForward(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.up(x)
        h = F.gelu(h, approximate="tanh" if torch.compiler.is_compiling() else "none")
        if h.abs().amax() > 3.0:
            h = h.clamp(-3.0, 3.0)
        return self.down(h)


def mend_target_compile_aware_gelu_clip():
    torch.manual_seed(0)
    block = ClippedFeedForward()
    calm = torch.randn(2, 4, 8) * 0.1
    hot = torch.randn(2, 4, 8) * 10
    return target(block, (calm,), inputs=[((hot,), {})])
