"""Detection heads and post-processing: score thresholds, per-class boxes, NMS-free filtering."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


@dataclass
class DetectionConfig:
    hidden_size: int = 32
    num_queries: int = 20
    num_classes: int = 5
    score_threshold: float = 0.3


class DetectionHead(nn.Module):
    def __init__(self, cfg: DetectionConfig):
        super().__init__()
        self.cfg = cfg
        self.class_embed = nn.Linear(cfg.hidden_size, cfg.num_classes + 1)
        self.box_embed = nn.Sequential(nn.Linear(cfg.hidden_size, cfg.hidden_size), nn.ReLU(), nn.Linear(cfg.hidden_size, 4))

    def forward(self, queries):
        return self.class_embed(queries), self.box_embed(queries).sigmoid()


def center_to_corners(boxes: torch.Tensor) -> torch.Tensor:
    cx, cy, w, h = boxes.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)


class DetrPostProcess(nn.Module):
    """Keeps the detections above threshold and reports which classes were seen."""

    def __init__(self, cfg: DetectionConfig):
        super().__init__()
        self.cfg = cfg
        self.head = DetectionHead(cfg)

    def forward(self, queries, image_size):
        logits, boxes = self.head(queries)
        scores, labels = logits.softmax(-1)[..., :-1].max(-1)
        keep = (scores[0] > self.cfg.score_threshold).nonzero().squeeze(-1)
        corners = center_to_corners(boxes[0, keep]) * image_size.repeat(2)
        classes_seen = torch.unique(labels[0, keep])
        return scores[0, keep], labels[0, keep], corners, classes_seen


def mend_target_detr_postprocess():
    torch.manual_seed(0)
    cfg = DetectionConfig()
    model = DetrPostProcess(cfg).eval()
    return model, (torch.randn(1, cfg.num_queries, cfg.hidden_size) * 3, torch.tensor([480.0, 640.0]))


class BoxScoreFilter(nn.Module):
    """Counts and averages confident boxes per image; calibrates scores with a numpy lookup."""

    def __init__(self, cfg: DetectionConfig):
        super().__init__()
        self.cfg = cfg
        self.head = DetectionHead(cfg)
        self.calib_x = np.linspace(0.0, 1.0, 11)
        self.calib_y = np.sqrt(self.calib_x)

    def forward(self, queries):
        logits, boxes = self.head(queries)
        scores = logits.softmax(-1)[..., :-1].amax(-1)
        confident = scores > self.cfg.score_threshold
        mean_area = (boxes[..., 2] * boxes[..., 3])[confident].mean()
        kept_scores = torch.masked_select(scores, confident)
        calibrated = np.interp(scores.detach().numpy(), self.calib_x, self.calib_y)
        return mean_area, kept_scores.sum(), torch.from_numpy(calibrated).float()


def mend_target_box_score_filter():
    torch.manual_seed(0)
    cfg = DetectionConfig()
    return BoxScoreFilter(cfg).eval(), (torch.randn(2, cfg.num_queries, cfg.hidden_size) * 3,)
