"""Targets for torchvision models (detection and classification), each built from its
constructor with random weights (``weights=None, weights_backbone=None``: no downloads) and
small inputs, so that a capture takes seconds to a minute on a 2-core CPU:

    PYTHONPATH=. python -m graphmend analyze tests/targets/torchvision_targets.py --dynamic-only
    MEND_NO_CACHE=1 PYTHONPATH=. python -m graphmend fix tests/targets/torchvision_targets.py

torchvision 0.29.1 needs torch 2.14.1 (it cannot import beside torch 2.13's CPU build), so
these run from a venv of their own.
torchvision is imported inside each target, so this file imports without it.
"""

from __future__ import annotations

BATCH = 2
H, W = 128, 160  # detection images (each resized by the model's transform to min/max size)
CLASSES = 3  # detection classes, background included
SIDE = 64  # classifier input side


def _seed():
    import torch

    torch.manual_seed(0)
    return torch


def _images(torch):
    return [torch.rand(3, H, W) for _ in range(BATCH)]


def _detector(builder, **kw):
    torch = _seed()
    from torchvision.models import detection

    model = getattr(detection, builder)(
        weights=None, weights_backbone=None, num_classes=CLASSES, **kw
    ).eval()
    return model, (_images(torch),), {}


_SMALL = {"min_size": H, "max_size": W}


def mend_target_tv_fasterrcnn_resnet50_fpn():
    """Faster R-CNN (ResNet-50 FPN): transform, backbone, RPN, RoI heads, postprocess."""
    return _detector("fasterrcnn_resnet50_fpn", **_SMALL)


def mend_target_tv_fasterrcnn_mobilenet_v3_large_fpn():
    """Faster R-CNN on a MobileNetV3-Large FPN backbone (the fast variant)."""
    return _detector("fasterrcnn_mobilenet_v3_large_fpn", **_SMALL)


def mend_target_tv_retinanet_resnet50_fpn():
    """RetinaNet: one-stage, anchors, per-level top-k and batched NMS."""
    return _detector("retinanet_resnet50_fpn", **_SMALL)


def mend_target_tv_fcos_resnet50_fpn():
    """FCOS: anchor-free one-stage detector."""
    return _detector("fcos_resnet50_fpn", **_SMALL)


def mend_target_tv_ssdlite320_mobilenet_v3_large():
    """SSDlite 320 (its transform resizes to 320x320 whatever the input)."""
    return _detector("ssdlite320_mobilenet_v3_large")


def mend_target_tv_maskrcnn_resnet50_fpn():
    """Mask R-CNN: Faster R-CNN plus the mask head and paste_masks_in_image."""
    return _detector("maskrcnn_resnet50_fpn", **_SMALL)


def mend_target_tv_keypointrcnn_resnet50_fpn():
    """Keypoint R-CNN (17 keypoints; two classes, as the builder requires)."""
    torch = _seed()
    from torchvision.models.detection import keypointrcnn_resnet50_fpn

    model = keypointrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=2, **_SMALL
    ).eval()
    return model, (_images(torch),), {}


def _classifier(builder, side=SIDE, **kw):
    torch = _seed()
    from torchvision import models

    model = getattr(models, builder)(weights=None, num_classes=10, **kw).eval()
    return model, (torch.randn(BATCH, 3, side, side),), {}


def mend_target_tv_resnet18():
    return _classifier("resnet18")


def mend_target_tv_mobilenet_v3_small():
    return _classifier("mobilenet_v3_small")


def mend_target_tv_efficientnet_b0():
    return _classifier("efficientnet_b0")


def mend_target_tv_convnext_tiny():
    return _classifier("convnext_tiny")


def mend_target_tv_vit_b_16():
    """ViT-B/16 at 64x64 (16 patches): the builder passes image_size through."""
    return _classifier("vit_b_16", image_size=SIDE)


def mend_target_tv_swin_t():
    """Swin-T (shifted windows, relative position bias) at 64x64."""
    return _classifier("swin_t")


def mend_target_tv_raft_small():
    """RAFT-small optical flow on two 128x128 frames, two flow updates."""
    torch = _seed()
    from torchvision.models.optical_flow import raft_small

    model = raft_small(weights=None).eval()
    frames = torch.rand(2, BATCH, 3, 128, 128)
    return model, (frames[0], frames[1]), {"num_flow_updates": 2}
