"""Detection post-processing in the style of YOLO / DETR heads (written for mend's
benchmarks/outside_breaks.py: code outside transformers, breaks Dynamo logs)."""

import torch
from torch import nn


class DetectHead(nn.Module):
    def __init__(self, dim=16, num_classes=3, score_thresh=0.25):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(dim, dim), nn.ReLU())
        self.box = nn.Linear(dim, 4)
        self.cls = nn.Linear(dim, num_classes)
        self.score_thresh = score_thresh

    def forward(self, feats, image_size):
        print("detect input", feats.shape)
        h = self.stem(feats)
        boxes = self.box(h).sigmoid() * image_size
        logits = self.cls(h)
        temperature = logits.abs().mean().item()
        scores = (logits / (1.0 + self.cls(h).std() * temperature)).softmax(-1)
        top = scores.amax(-1)
        if 0.0 <= boxes.max() <= 1.0:  # normalised coordinates: to pixels of a 100-pixel canvas
            boxes = boxes * 100.0
        if torch.jit.isinstance(image_size, float):
            boxes = boxes.clamp(0.0, image_size)
        return boxes, top


def mend_target_detection_post():
    from graphmend import Target

    torch.manual_seed(0)
    # an integer image size (torch.jit.isinstance(image_size, float) is False), a normalised one
    feats = torch.randn(2, 10, 16)
    return Target(DetectHead(), (feats, 640.0), inputs=[((feats, 640), {}), ((feats, 1.0), {})])
