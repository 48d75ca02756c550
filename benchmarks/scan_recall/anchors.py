"""Anchor generation and target matching as two-stage detectors write them: grid anchors cached
per feature-map size, IoU matching with a low-quality fallback, balanced sampling."""


import torch
from torch import nn


class AnchorGenerator(nn.Module):
    def __init__(self, sizes=(16, 32), ratios=(0.5, 1.0, 2.0)):
        super().__init__()
        self.sizes = sizes
        self.ratios = ratios
        self._cache = {}

    def cell_anchors(self):
        scales = torch.tensor(self.sizes, dtype=torch.float32)
        ratios = torch.tensor(self.ratios, dtype=torch.float32)
        h = torch.sqrt(ratios)
        w = 1 / h
        ws = (w[:, None] * scales[None, :]).view(-1)
        hs = (h[:, None] * scales[None, :]).view(-1)
        return torch.stack([-ws, -hs, ws, hs], dim=1) / 2

    def forward(self, feature: torch.Tensor, stride: int):
        key = (feature.shape[-2], feature.shape[-1], stride)
        if key in self._cache:
            return self._cache[key]
        gh, gw = feature.shape[-2:]
        sx = torch.arange(gw, dtype=torch.float32) * stride
        sy = torch.arange(gh, dtype=torch.float32) * stride
        yy, xx = torch.meshgrid(sy, sx, indexing="ij")
        shifts = torch.stack([xx, yy, xx, yy], dim=-1).reshape(-1, 1, 4)
        anchors = (shifts + self.cell_anchors()[None]).reshape(-1, 4)
        self._cache[key] = anchors
        return anchors


def match(iou: torch.Tensor, high: float = 0.7, low: float = 0.3, allow_low_quality: bool = True):
    matched_vals, matches = iou.max(dim=0)
    below = matched_vals < low
    between = (matched_vals >= low) & (matched_vals < high)
    matches = matches.masked_fill(below, -1).masked_fill(between, -2)
    if allow_low_quality:
        best_per_gt = iou.max(dim=1).values
        gt_idx, pred_idx = torch.nonzero(iou == best_per_gt[:, None], as_tuple=True)
        matches[pred_idx] = gt_idx
    return matches


def sample_balanced(labels: torch.Tensor, per_image: int = 8, positive_fraction: float = 0.5):
    positive = torch.where(labels >= 1)[0]
    negative = torch.where(labels == 0)[0]
    num_pos = min(positive.numel(), int(per_image * positive_fraction))
    num_neg = min(negative.numel(), per_image - num_pos)
    perm1 = torch.randperm(positive.numel())[:num_pos]
    perm2 = torch.randperm(negative.numel())[:num_neg]
    return positive[perm1], negative[perm2]


def mend_target_anchors():
    return AnchorGenerator().eval(), (torch.randn(1, 8, 4, 5), 8)


def mend_target_match():
    torch.manual_seed(0)
    return match, (torch.rand(3, 12),)


def mend_target_sample():
    torch.manual_seed(0)
    return sample_balanced, (torch.randint(0, 3, (20,)),)
