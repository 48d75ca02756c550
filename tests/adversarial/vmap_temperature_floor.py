"""Per-sample predictions with ``torch.func.vmap`` (the batch mapped, the temperature shared:
``in_dims=(0, None)``). The temperature is floored at 0.05 before it divides the logits;
the condition reads the unmapped temperature, so the original runs under ``vmap``, and the
``torch.where`` form of the floor (``clamp`` is total) is sound under it too."""

import torch
from torch import nn
from torch.func import vmap

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 4)

    def forward(self, x, temp):
        if temp < 0.05:
            temp = temp.clamp(min=0.05)
        return (self.fc(x) / temp).softmax(-1)


class PerSample(nn.Module):
    def __init__(self):
        super().__init__()
        self.scorer = Scorer()

    def forward(self, x, temp):
        return vmap(self.scorer, in_dims=(0, None))(x, temp)


def mend_target_vmap_temperature_floor():
    torch.manual_seed(0)
    x = torch.randn(3, 5)
    return target(PerSample(), (x, torch.tensor(0.7)), inputs=[((x, torch.tensor(0.01)), {})])
