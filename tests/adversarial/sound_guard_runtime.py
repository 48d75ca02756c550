"""``if not torch.isfinite(x).all(): raise RuntimeError(msg)``: an in-graph check raises the
same type with the same message in eager, so it is a sound fix."""

import torch

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


def finite_only(x):
    if not torch.isfinite(x).all():
        raise RuntimeError("non-finite values in x")
    return x * 2


def mend_target_sound_guard_runtime():
    torch.manual_seed(0)
    bad = torch.randn(2, 3)
    bad[0, 0] = float("nan")
    return target(finite_only, (torch.randn(2, 3),), inputs=[((bad,), {})])
