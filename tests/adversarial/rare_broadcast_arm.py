"""A rare arm (non-finite input) whose result has another shape: ``torch.where`` broadcasts
it to the other arm's shape; the search's sign / scale / zero variants never reach it."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("shape", "broadcast", "unexercised", "never", "not exercised", "arm")


def summarise(x, w):
    if torch.isfinite(x).all():
        y = x * w
    else:
        y = torch.nan_to_num(x, posinf=0.0, neginf=0.0).mean(0, keepdim=True)
    return y


def mend_target_rare_broadcast_arm():
    torch.manual_seed(0)
    x, w = torch.randn(3, 4), torch.randn(4)
    bad = x.clone()
    bad[1, 1] = float("inf")
    return target(summarise, (x, w), inputs=[((bad, w), {})])


NAIVE = naive(__file__, """
    if torch.isfinite(x).all():
        y = x * w
    else:
        y = torch.nan_to_num(x, posinf=0.0, neginf=0.0).mean(0, keepdim=True)
""", """
    y = torch.where(torch.isfinite(x).all(), x * w, torch.nan_to_num(x, posinf=0.0, neginf=0.0).mean(0, keepdim=True))
""")
