"""Token features arrive as a transposed view (``(D, T).t()``, strided). The rare arm
flattens them with ``.view(-1)``; eager code never runs it on the strided batch it is
given, a plain ``torch.where`` does and raises. Written ``reshape``, the arm returns where
the original, taking it on a strided batch of large values, raises: an exception the user
sees turned into a value, so verification's strided edge, scaled until it takes that arm,
refuses it."""

import torch

from graphmend import Target

from _adv import naive

EXPECT = "refuse"
ACCEPT_REASONS = ("original raised runtimeerror: view size is not compatible",)


def summarise(feats):
    if feats.abs().max() > 50.0:
        s = feats.view(-1).clamp(-50.0, 50.0).sum()
    else:
        s = feats.sum()
    return s


def mend_target_shape_transposed_view():
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    # the strided batch is one the user has (the rare arm is never taken on it), not one
    # the example shows
    return Target(fn=summarise, args=(x,), inputs=[((torch.randn(3, 4).t(),), {})])


NAIVE = naive(__file__, """
    if feats.abs().max() > 50.0:
        s = feats.view(-1).clamp(-50.0, 50.0).sum()
    else:
        s = feats.sum()
""", """
    s = torch.where(feats.abs().max() > 50.0, feats.view(-1).clamp(-50.0, 50.0).sum(), feats.sum())
""")
