"""A data-loader transform that scales uint8-range images into [0, 1] only when they are
not scaled yet, and otherwise hands the batch back as is. The training loop then augments
the batch in place (``batch.add_(noise)``), which reaches the loader's own tensor exactly
when the transform returned it. A ``torch.where`` rewrite always returns a new tensor: the
loader's batch is no longer the one the loop changed."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("alias", "identity", "input", "same tensor", "view", "copy")


def to_unit_range(batch):
    if batch.max() > 1.0:
        batch = batch / 255.0
    return batch


def mend_target_alias_loader_normalize():
    torch.manual_seed(0)
    raw = torch.rand(2, 3, 4, 4) * 255
    return target(to_unit_range, (raw,), inputs=[((raw / 255.0,), {})])


NAIVE = naive(__file__, """
    if batch.max() > 1.0:
        batch = batch / 255.0
""", """
    batch = torch.where(batch.max() > 1.0, batch / 255.0, batch)
""")
