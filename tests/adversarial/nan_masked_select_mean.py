"""Mean of the selected elements (boolean-mask index) when any is selected: the dense form
sum / count is 0 / 0 on an all-false mask."""

import torch

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("grad", "nan", "not total", "division", "divide", "non-total", "empty", "mask", "shape")


def mean_of_selected(x, keep):
    if keep.any():
        y = x[keep].mean()
    else:
        y = x.sum() * 0.0
    return y


def mend_target_nan_masked_select_mean():
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    keep = torch.rand(3, 4) > 0.5
    keep[0, 0] = True
    return target(mean_of_selected, (x, keep), inputs=[((torch.randn(3, 4), torch.zeros(3, 4, dtype=torch.bool)), {})])


NAIVE = naive(__file__, """
    if keep.any():
        y = x[keep].mean()
    else:
        y = x.sum() * 0.0
""", """
    y = torch.where(keep.any(), (x * keep).sum() / keep.sum(), x.sum() * 0.0)
""")
