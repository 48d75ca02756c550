"""An out-of-vocabulary guard: ``F.embedding`` is evaluated only when every id is in range;
evaluated on both paths it raises IndexError on the rare OOV batch."""

import torch
from torch import nn
from torch.nn import functional as F

from _adv import naive, target

EXPECT = "refuse"
ACCEPT_REASONS = ("index", "embedding", "range", "not total", "raise", "vocab", "exception", "unexercised",
                  "never", "non-total", "grad")  # unk gets a zero grad where eager leaves None


class SafeEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.vocab = 10
        self.weight = nn.Parameter(torch.randn(10, 4))
        self.unk = nn.Parameter(torch.randn(4))

    def forward(self, ids):
        if (ids >= self.vocab).any():
            e = self.unk.expand(ids.shape[0], ids.shape[1], 4) * 1.0
        else:
            e = F.embedding(ids, self.weight)
        return e


def mend_target_rare_oov_embedding():
    torch.manual_seed(0)
    ids = torch.randint(0, 10, (2, 5))
    oov = ids.clone()
    oov[1, 2] = 12
    return target(SafeEmbed(), (ids,), inputs=[((oov,), {})])


NAIVE = naive(__file__, """
        if (ids >= self.vocab).any():
            e = self.unk.expand(ids.shape[0], ids.shape[1], 4) * 1.0
        else:
            e = F.embedding(ids, self.weight)
""", """
        e = torch.where((ids >= self.vocab).any(), self.unk.expand(ids.shape[0], ids.shape[1], 4) * 1.0,
                        F.embedding(ids, self.weight))
""")
