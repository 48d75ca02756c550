"""A residual block trained under ``nn.DataParallel`` (here its ``replicate()`` on one
device: every submodule shallow-copied, its parameters differentiable copies of the
original's). A gate halves the residual when it dominates the skip path. The condition reads the
block's own layer through ``self``, which a replica rebinds: a ``torch.where`` rewrite is
sound there too, gradients landing on the original's weights."""

import torch
from torch import nn

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


def replicate(module):
    copies = {id(m): m._replicate_for_data_parallel() for m in module.modules()}
    for m in module.modules():
        r = copies[id(m)]
        for k, child in m._modules.items():
            r._modules[k] = copies[id(child)]
        for k, p in m._parameters.items():
            setattr(r, k, p * 1)
    return copies[id(module)]


class GatedResidual(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        r = self.fc(x)
        if r.norm() > 2.0 * x.norm():  # the residual dominates: damp it
            r = r * 0.5
        return x + r


class Parallel(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = GatedResidual()

    def forward(self, x):
        return replicate(self.block)(x)


def mend_target_replicate_gated_residual():
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    return target(Parallel(), (x,), inputs=[((x * 0.01,), {})])
