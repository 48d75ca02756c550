"""Data parallel training as nn.DataParallel does it: the forward runs a replica of the
experts (a shallow copy of every submodule, whose parameters are differentiable copies of the
original's held as plain attributes, `nn.parallel.replicate` on one device). A replica shares
the original's __dict__, so an op that reaches the module through a handle made in
`__init__` runs on the original, and the experts' weights get no gradient."""

import torch
from torch import nn

from _adv import target

EXPECT = "refuse"
ACCEPT_REASONS = ("replica", "dataparallel", "break", "graph", "gradient")


def replicate(module):
    copies = {id(m): m._replicate_for_data_parallel() for m in module.modules()}
    for m in module.modules():
        r = copies[id(m)]
        for k, child in m._modules.items():
            r._modules[k] = copies[id(child)]
        for k, p in m._parameters.items():
            setattr(r, k, p * 1)
    return copies[id(module)]


class Moe(nn.Module):
    def __init__(self, dim=6, n=3):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))

    def forward(self, x):
        expert = x.abs().argmax(-1) % len(self.experts)
        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            idx = torch.nonzero(expert == e).squeeze(-1)
            out[idx] = self.experts[e](x[idx])
        return out


class Parallel(nn.Module):
    def __init__(self):
        super().__init__()
        self.moe = Moe()

    def forward(self, x):
        return replicate(self.moe)(x)


def mend_target_opaque_replica():
    torch.manual_seed(0)
    x = torch.randn(7, 6)
    # a second batch that routes differently (an expert gets no row)
    return target(Parallel(), (x,), inputs=[((x[:2] * 3,), {})])
