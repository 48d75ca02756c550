"""A token pooler flattens its features with ``view`` when every position is masked (a
padding-only batch row set) and with ``reshape`` otherwise. The caller's features come
transposed (``(b, d, t)`` storage seen as ``(b, t, d)``), so the ``view`` arm raises there
("view size is not compatible"). As ``torch.where`` both arms run, so the ``view`` must be
written ``reshape``, which returns where the original raised: an exception the user saw is gone.
Only a condition on the mask picks the arm, which negating the features never flips."""

import torch
from torch import nn

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("raised", "raise", "view", "exception")


class Pool(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 3)

    def forward(self, x, mask):
        if mask.any():
            y = x.reshape(x.shape[0], -1) * 2
        else:
            y = x.view(x.shape[0], -1) * 2
        return self.proj(y)


def mend_target_mask_view_arm_transposed():
    torch.manual_seed(0)
    def flipped():  # (2, 3, 2) seen over (2, 2, 3) storage: strides a view cannot follow
        return torch.randn(2, 2, 3).transpose(1, 2)

    # the caller's own calls: transposed features, positions kept; a padding-only set, where the original raises
    return target(Pool(), (flipped(), torch.ones(2, 3, dtype=torch.bool)),
                  inputs=[((torch.randn(2, 3, 2), torch.zeros(2, 3, dtype=torch.bool)), {}),
                          ((flipped(), torch.zeros(2, 3, dtype=torch.bool)), {})])


NAIVE = naive(__file__, """
        if mask.any():
            y = x.reshape(x.shape[0], -1) * 2
        else:
            y = x.view(x.shape[0], -1) * 2
""", """
        y = torch.where(mask.any(), x.reshape(x.shape[0], -1) * 2, x.reshape(x.shape[0], -1) * 2)
""")
