"""ODE integrators in the style of torchdiffeq-like libraries: a fixed-grid RK4 (traces cleanly)
and an adaptive Dormand-Prince loop whose step control reads tensor values in Python."""

import torch
from torch import nn


class Dynamics(nn.Module):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, dim))

    def forward(self, t, y):
        return self.net(y) * torch.cos(t)


def rk4_step(func, t, dt, y):
    k1 = func(t, y)
    k2 = func(t + dt / 2, y + dt * k1 / 2)
    k3 = func(t + dt / 2, y + dt * k2 / 2)
    k4 = func(t + dt, y + dt * k3)
    return y + dt * (k1 + 2 * k2 + 2 * k3 + k4) / 6


def odeint_fixed(func: nn.Module, y0: torch.Tensor, t_grid: torch.Tensor):
    ys = [y0]
    y = y0
    for i in range(t_grid.shape[0] - 1):
        t0, t1 = t_grid[i], t_grid[i + 1]
        y = rk4_step(func, t0, t1 - t0, y)
        ys.append(y)
    return torch.stack(ys)


def rms_norm(x: torch.Tensor) -> torch.Tensor:
    return x.pow(2).mean().sqrt()


def odeint_adaptive(func: nn.Module, y0: torch.Tensor, t0: torch.Tensor, t1: torch.Tensor,
                    rtol: float = 1e-3, atol: float = 1e-6):
    t, y = t0, y0
    dt = (t1 - t0) / 10
    n_steps = 0
    while t < t1:
        if t + dt > t1:
            dt = t1 - t
        k1 = func(t, y)
        k2 = func(t + dt, y + dt * k1)
        y_new = y + dt * (k1 + k2) / 2
        err = rms_norm((y_new - (y + dt * k1)) / (atol + rtol * y.abs().max()))
        if err <= 1.0:
            t, y = t + dt, y_new
            n_steps += 1
        factor = min(5.0, max(0.2, 0.9 * float(err) ** -0.5))
        dt = dt * factor
    return y, n_steps


def mend_target_fixed():
    torch.manual_seed(0)
    return odeint_fixed, (Dynamics().eval(), torch.randn(4, 8), torch.linspace(0, 1, 5))


def mend_target_adaptive():
    torch.manual_seed(0)
    return odeint_adaptive, (Dynamics().eval(), torch.randn(4, 8), torch.tensor(0.0), torch.tensor(0.3))
