"""torchvision: every model builder of torchvision.models, random weights, small inputs.

Enumeration (parent side): ``torchvision.models.list_models(module=...)`` for
classification (the top-level module), detection, segmentation, video and optical flow, in
that order; the quantized classification builders (int8 versions of the classification
models, for the fbgemm/qnnpack backends) are skipped rows.

Building (worker side): ``get_model(name, weights=None)`` (and ``weights_backbone=None``),
a batch of 2. Classification, segmentation and video take the smallest input in
``SIZES`` that the model's eager forward accepts. Detection models run through
``Detector``, which passes targets (boxes, labels, and masks or keypoints where the head
needs them) in train mode, where torchvision's detectors return their losses, and only the
images in eval, where the post-processing (box decoding, NMS, mask pasting) runs: their
transform resizes to ``DETECTION_SIZE`` instead of 800 px. RAFT runs two 128 px frames with
``FLOW_UPDATES`` refinement iterations.
"""

from __future__ import annotations

from typing import Any

from graphmend.core.worker import describe
from graphmend.sweep.building import NotBuilt, forward_checked

SELECTION = ("every torchvision.models builder for classification, detection, segmentation, video and optical "
             "flow, random weights")
TASKS = ("classification", "detection", "segmentation", "video", "optical_flow")
SIZES = {"classification": (64, 224), "segmentation": (64, 224), "video": ((4, 64), (16, 112), (16, 224))}
DETECTION_SIZE = 128
FLOW_UPDATES = 2
NUM_CLASSES = 5


def version() -> str:
    import torchvision

    return torchvision.__version__


def _module(task: str):
    import torchvision.models as M

    return M if task == "classification" else getattr(M, task)


def _tasks() -> dict[str, str]:
    """{model name: task}; a name listed by several modules keeps its first (most specific last)."""
    import torchvision.models as M

    out: dict[str, str] = {}
    for task in TASKS:
        for name in M.list_models(module=_module(task)):
            out.setdefault(name, task)
    return out


def enumerate_models() -> tuple[list[str], dict[str, str]]:
    import torchvision.models as M

    tasks = _tasks()
    skipped = {n: "an int8 (quantized) version of a classification model"
               for n in M.list_models(module=M.quantization)}
    return list(tasks), skipped


def modality(name: str) -> str:
    task = _tasks().get(name, "")
    return "video" if task in ("video", "optical_flow") else "image"


def _detector_class():
    import torch

    class Detector(torch.nn.Module):
        """A torchvision detector with the call each mode takes: targets in train mode (the
        losses come back), only images in eval (the detections, after post-processing)."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, images, targets):
            if self.training:
                return self.model(images, targets)
            return self.model(images)

    return Detector


def _detection(name: str):
    import torch
    import torchvision.models as M

    kw: dict = {"weights": None, "weights_backbone": None, "num_classes": NUM_CLASSES}
    if "rcnn" in name or name.startswith(("retinanet", "fcos")):
        kw.update(min_size=DETECTION_SIZE, max_size=DETECTION_SIZE)
    if name.startswith("keypointrcnn"):
        kw.update(num_classes=2, num_keypoints=3)
    try:
        model = M.get_model(name, **kw).eval()
    except Exception as exc:
        raise NotBuilt(f"model: {describe(exc)}") from None
    s = DETECTION_SIZE
    images = [torch.rand(3, s, s), torch.rand(3, s, s - 16)]
    targets = []
    for i in range(2):
        boxes = torch.tensor([[8.0, 10.0, 70.0, 90.0], [30.0, 20.0, 100.0, 60.0]]) + i
        t = {"boxes": boxes, "labels": torch.tensor([1, 2 if kw["num_classes"] > 2 else 1])}
        if name.startswith("maskrcnn"):
            masks = torch.zeros(2, s, s - 16 * i, dtype=torch.uint8)
            masks[0, 10:90, 8:70] = 1
            masks[1, 20:60, 30:100] = 1
            t["masks"] = masks
        if name.startswith("keypointrcnn"):
            t["keypoints"] = torch.tensor([[[20.0, 30.0, 1.0], [40.0, 50.0, 1.0], [60.0, 70.0, 1.0]]] * 2)
        targets.append(t)
    wrapped = _detector_class()(model).eval()
    for mode in (False, True):
        try:
            wrapped.train(mode)
            with torch.no_grad():
                wrapped(images, targets)
        except Exception as exc:
            raise NotBuilt(f"eager forward ({'train' if mode else 'eval'}): {describe(exc)}") from None
    return wrapped.eval(), (images, targets)


def _flow(name: str):
    import torch
    import torchvision.models as M

    try:
        model = M.get_model(name, weights=None).eval()
    except Exception as exc:
        raise NotBuilt(f"model: {describe(exc)}") from None
    a, b = torch.rand(2, 3, 128, 128), torch.rand(2, 3, 128, 128)
    return forward_checked(model, (a, b), {"num_flow_updates": FLOW_UPDATES})


def _sized(name: str, task: str):
    import torch
    import torchvision.models as M

    kw: dict = {"weights": None}
    if task == "segmentation":
        kw.update(weights_backbone=None, num_classes=NUM_CLASSES)
    try:
        model = M.get_model(name, **kw).eval()
    except Exception as exc:
        raise NotBuilt(f"model: {describe(exc)}") from None
    first = ""
    for size in SIZES[task]:
        if task == "video":
            frames, px = size
            x = torch.rand(2, 3, frames, px, px)
        else:
            x = torch.rand(2, 3, size, size)
        try:
            with torch.no_grad():
                model(x)
            return model, (x,), {}
        except Exception as exc:
            first = first or describe(exc)
    raise NotBuilt(f"eager forward: {first}")


def target(name: str) -> tuple[Any, tuple, dict]:
    """What a generated ``mend_target_*`` returns."""
    try:
        import torch
        import torchvision  # noqa: F401
    except Exception as exc:
        raise NotBuilt(f"torchvision does not import: {describe(exc)}") from None
    task = _tasks().get(name)
    if task is None:
        raise NotBuilt(f"no torchvision model {name!r}")
    torch.manual_seed(0)
    if task == "detection":
        model, args = _detection(name)
        return model, args, {}
    if task == "optical_flow":
        return _flow(name)
    return _sized(name, task)
