"""A head that pools its feature map by the per-channel peak (``reshape(b, c, -1).amax(-1)``)
on the rare saturated path, by the mean otherwise.
On an empty batch (every image filtered out upstream) ``-1`` cannot be inferred and reshape
raises; eager code never reaches it there, a plain ``torch.where`` does. mend cannot tell from
the source that the batch is never empty: verification's empty-batch input must show it."""

import torch

from graphmend import Target

from _adv import naive

EXPECT = "refuse"
ACCEPT_REASONS = ("empty", "0 elements")


def head(feats):
    if feats.abs().sum() > 1e4:  # saturated: the per-channel peak
        out = feats.reshape(feats.shape[0], feats.shape[1], -1).amax(-1)
    else:
        out = feats.mean((2, 3))
    return out


def mend_target_shape_empty_batch_reshape():
    torch.manual_seed(0)
    feats = torch.randn(2, 3, 4, 4)
    # the empty batch is one the user has, not one the example shows
    return Target(fn=head, args=(feats,), perturb=[((torch.zeros(0, 3, 4, 4),), {})])


NAIVE = naive(__file__, """
    if feats.abs().sum() > 1e4:  # saturated: the per-channel peak
        out = feats.reshape(feats.shape[0], feats.shape[1], -1).amax(-1)
    else:
        out = feats.mean((2, 3))
""", """
    out = torch.where(feats.abs().sum() > 1e4, feats.reshape(feats.shape[0], feats.shape[1], -1).amax(-1),
                      feats.mean((2, 3)))
""")
