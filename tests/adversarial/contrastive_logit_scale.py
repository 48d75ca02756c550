"""A CLIP-style contrastive loss (open_clip's ``ClipLoss(image_features, text_features,
logit_scale)``): the model's learnable temperature is capped at 100 once it grows past it (``clamp`` is total; its gradient above the cap is zero either way),
so the ``if`` is a sound ``torch.where``."""

import math

import torch
from torch import nn
from torch.nn import functional as F

from _adv import target

EXPECT = "fix"
ACCEPT_REASONS = ()


class ContrastiveLoss(nn.Module):
    def forward(self, img, txt, logit_scale):
        img = F.normalize(img, dim=-1)
        txt = F.normalize(txt, dim=-1)
        scale = logit_scale.exp()
        if scale > 100:
            scale = scale.clamp(max=100.0)
        logits = scale * img @ txt.t()
        labels = torch.arange(img.shape[0])
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def mend_target_contrastive_logit_scale():
    torch.manual_seed(0)
    img, txt = torch.randn(4, 6), torch.randn(4, 6)
    scale = torch.tensor(math.log(1 / 0.07))
    # late in training the temperature has grown past the cap: exp(5) = 148
    return target(ContrastiveLoss(), (img, txt, scale), inputs=[((img, img + 0.01 * txt, torch.tensor(5.0)), {})])
