"""Generation sampling and evaluation metrics as training/eval loops write them: top-k / top-p
filtering, a repetition penalty, running metrics read back as Python numbers, k-means."""

import logging
import warnings

import torch
import torch.nn.functional as F

logger = logging.getLogger(__name__)


def top_k_top_p_filtering(logits: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    if top_k > 0:
        kth = torch.topk(logits, top_k)[0][..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(logits, descending=True)
        probs = F.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        remove = probs > top_p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        logits = logits.masked_fill(remove.scatter(-1, sorted_idx, remove), float("-inf"))
    return logits


def repetition_penalty(logits: torch.Tensor, prev: torch.Tensor, penalty: float = 1.2) -> torch.Tensor:
    score = torch.gather(logits, 1, prev)
    score = torch.where(score < 0, score * penalty, score / penalty)
    return logits.scatter(1, prev, score)


def accuracy(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100):
    mask = labels != ignore_index
    correct = (logits.argmax(-1) == labels) & mask
    acc = correct.sum().item() / max(mask.sum().item(), 1)
    if acc < 0.1:
        warnings.warn("accuracy is suspiciously low")
    return acc


def kmeans(x: torch.Tensor, k: int, iters: int = 5, tol: float = 1e-4):
    centers = x[:k].clone()
    for it in range(iters):
        assign = torch.cdist(x, centers).argmin(dim=1)
        new = torch.stack([x[assign == j].mean(0) for j in range(k)])
        shift = (new - centers).norm()
        centers = new
        logger.debug("kmeans iter %d shift %.4f", it, shift)
        if shift < tol:
            break
    return centers, assign


def mend_target_filter():
    torch.manual_seed(0)
    return top_k_top_p_filtering, (torch.randn(2, 20), 5, 0.9)


def mend_target_penalty():
    torch.manual_seed(0)
    return repetition_penalty, (torch.randn(2, 20), torch.randint(0, 20, (2, 4)))


def mend_target_accuracy():
    torch.manual_seed(0)
    return accuracy, (torch.randn(8, 5), torch.randint(0, 5, (8,)))


def mend_target_kmeans():
    torch.manual_seed(0)
    return kmeans, (torch.randn(30, 2), 3)
