"""Early return that guards a log: the fall-through ``torch.log(x)`` at an exact zero."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("aliasing", "aliases", "grad", "nan", "not total", "log", "non-total")


def log_or_passthrough(x):
    if (x <= 0).any():
        return x
    return torch.log(x)


def mend_target_nan_early_return_log():
    torch.manual_seed(0)
    trig = torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.5, 0.0]])
    return target(log_or_passthrough, (torch.rand(2, 3) + 0.5,), inputs=[((trig,), {})])


NAIVE = naive(__file__, """
    if (x <= 0).any():
        return x
    return torch.log(x)
""", """
    return torch.where((x <= 0).any(), x, torch.log(x))
""")
