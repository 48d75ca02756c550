"""A physics-informed loss: the residual of u'' = f needs the second derivative of the network
with respect to its input, through a tensor `if` whose arm calls a submodule (torch.cond-
worthy). torch.cond's backward is not differentiable: "element 0 of tensors does not require
grad" on the second derivative."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("second derivative", "unsafe fix", "torch.cond", "create_graph", "higher-order", "double")


class Pinn(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))

    def u(self, t):
        if t.mean() > 0:
            v = self.body(t)
        else:
            v = torch.tanh(t)
        return v

    def forward(self, t):
        with torch.enable_grad():
            ti = t.detach().requires_grad_()
            u = self.u(ti)
            (du,) = torch.autograd.grad(u.sum(), ti, create_graph=True)
            (d2u,) = torch.autograd.grad(du.sum(), ti, create_graph=True)
        return ((d2u + torch.sin(ti)) ** 2).mean() + u.pow(2).mean()


def mend_target_cond_pinn_second_derivative():
    torch.manual_seed(0)
    t = torch.rand(5, 1)
    return target(Pinn(), (t,), inputs=[((-t,), {})])


NAIVE = naive(__file__, """
        if t.mean() > 0:
            v = self.body(t)
        else:
            v = torch.tanh(t)
""", """
        v = torch.cond(t.mean() > 0, lambda: self.body(t), lambda: torch.tanh(t))
""")
