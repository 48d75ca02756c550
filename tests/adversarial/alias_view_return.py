"""Pooling that returns the first token, a view of the hidden states, when there is no
padding; the caller scales the pooled vector in place, which in eager code writes the hidden
states. A plain ``torch.where`` returns a new tensor: the hidden states stay unscaled."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("alias", "view of", "caller's tensor")


def pool(h, mask):
    if mask.all():
        return h[:, 0]
    return (h * mask[..., None]).sum(1) * 0.5


def step(h, mask):
    p = pool(h, mask)
    p.mul_(2.0)  # in place: the first token of h too, when pool returned a view of it
    return h.sum() + p.sum()


def mend_target_alias_view_return():
    torch.manual_seed(0)
    h = torch.randn(2, 3, 4)
    padded = torch.ones(2, 3, dtype=torch.bool)
    padded[1, 2] = False
    return target(step, (h, torch.ones(2, 3, dtype=torch.bool)), inputs=[((torch.randn(2, 3, 4), padded), {})])


NAIVE = naive(__file__, """
    if mask.all():
        return h[:, 0]
    return (h * mask[..., None]).sum(1) * 0.5
""", """
    return torch.where(mask.all(), h[:, 0], (h * mask[..., None]).sum(1) * 0.5)
""")
