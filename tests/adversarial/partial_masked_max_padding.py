"""The largest logit over the tokens that are not padding: ``logits[valid].max()``. On an
all-padding batch the original raises; the masked form ``torch.where(valid, logits,
-inf).max()`` returns -inf, a number that flows on (``-inf - -inf`` is nan). The masked max
is a fix whose caveat its own docs name: unsafe, planned only with ``--unsafe-fixes``. No
example has to hold an empty mask, so the reason must be the caveat, not a failed check."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("unsafe fix: on an empty mask",)


def peak_logit(logits, lengths):
    valid = torch.arange(logits.shape[1])[None, :] < lengths[:, None]
    return logits[valid].max()


def mend_target_partial_masked_max_padding():
    torch.manual_seed(0)
    logits = torch.randn(2, 5)
    # the last call is an all-padding batch: the original raises there
    return target(peak_logit, (logits, torch.tensor([3, 5])),
                  inputs=[((logits * 2, torch.tensor([1, 2])), {}), ((logits, torch.tensor([0, 0])), {})])


NAIVE = naive(__file__, """
    return logits[valid].max()
""", """
    return torch.where(valid, logits, float("-inf")).max()
""")
