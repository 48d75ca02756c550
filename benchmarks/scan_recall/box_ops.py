"""Box post-processing the way detection libraries write it (torchvision.ops style): plain
functions over tensors, a greedy NMS loop, small-box removal and per-image filtering."""

import torch
from torch import Tensor


def box_area(boxes: Tensor) -> Tensor:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (area1[:, None] + area2 - inter)


def clip_boxes_to_image(boxes: Tensor, size: tuple[int, int]) -> Tensor:
    height, width = size
    x = boxes[..., 0::2].clamp(min=0, max=width)
    y = boxes[..., 1::2].clamp(min=0, max=height)
    return torch.stack((x, y), dim=-1).reshape(boxes.shape)


def remove_small_boxes(boxes: Tensor, min_size: float) -> Tensor:
    ws, hs = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    keep = (ws >= min_size) & (hs >= min_size)
    keep = torch.where(keep)[0]
    return keep


def greedy_nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(i)
        if order.numel() == 1:
            break
        ious = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]])[0]
        order = order[1:][ious <= iou_threshold]
    return torch.stack(keep)


def postprocess(boxes: Tensor, scores: Tensor, image_size: tuple[int, int], score_thresh: float = 0.05):
    boxes = clip_boxes_to_image(boxes, image_size)
    mask = scores > score_thresh
    if mask.sum() == 0:
        return boxes[:0], scores[:0]
    boxes, scores = boxes[mask], scores[mask]
    keep = remove_small_boxes(boxes, 1e-2)
    boxes, scores = boxes[keep], scores[keep]
    keep = greedy_nms(boxes, scores, 0.5)
    return boxes[keep], scores[keep]


def encode_boxes(reference: Tensor, proposals: Tensor, weights: Tensor) -> Tensor:
    wx, wy, ww, wh = weights.unbind(0)
    ex_w = proposals[:, 2] - proposals[:, 0]
    ex_h = proposals[:, 3] - proposals[:, 1]
    gt_w = reference[:, 2] - reference[:, 0]
    gt_h = reference[:, 3] - reference[:, 1]
    dx = wx * (reference[:, 0] - proposals[:, 0]) / ex_w
    dy = wy * (reference[:, 1] - proposals[:, 1]) / ex_h
    dw = ww * torch.log(gt_w / ex_w)
    dh = wh * torch.log(gt_h / ex_h)
    return torch.stack((dx, dy, dw, dh), dim=1)


def _boxes(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 50
    wh = torch.rand(n, 2, generator=g) * 20 + 1
    return torch.cat([xy, xy + wh], dim=1), torch.rand(n, generator=g)


def mend_target_postprocess():
    boxes, scores = _boxes(40)
    return postprocess, (boxes, scores, (64, 64))


def mend_target_encode():
    boxes, _ = _boxes(16)
    return encode_boxes, (boxes + 1.0, boxes, torch.tensor([10.0, 10.0, 5.0, 5.0]))
