"""Evaluating an EMA copy of a model's weights without a second module: the EMA tensors are
passed to ``torch.func.functional_call``. The model's forward clips large activations
(``clamp`` is total), so the ``torch.where`` rewrite is sound under ``functional_call``."""

import torch
from torch import nn
from torch.func import functional_call

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        h = self.fc1(x)
        if h.abs().max() > 6.0:
            h = h.clamp(-6.0, 6.0)
        return self.fc2(h.relu())


class EmaEval(nn.Module):
    def __init__(self, decay=0.9):
        super().__init__()
        self.model = Mlp()
        self.decay = decay
        self.ema = {n: p.detach().clone() * decay for n, p in self.model.named_parameters()}

    def forward(self, x):
        return functional_call(self.model, self.ema, (x,))


def mend_target_functional_call_ema():
    torch.manual_seed(0)
    x = torch.randn(3, 5)
    return target(EmaEval(), (x,), inputs=[((x * 30,), {})])
