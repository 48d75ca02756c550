"""timm: the smallest variant of every architecture family, built with random weights.

Enumeration (parent side): a *family* is the timm module an architecture is registered in
(``timm.list_modules()``: ``resnet``, ``vision_transformer``, ``convnext``...). Its smallest
variant is the model name with the lowest size rank (``SIZES``: atto < femto < pico < nano <
tiny < ... < giant, a word of the name between underscores, less trailing digits: cait_xxs24), then the smallest first number
in the name (depth or width: resnet10t before resnet18, regnetx_002 before regnetx_004), then
the smallest default input resolution, then the shortest name (the plain variant before its ``_in22k`` / ``_clip``
kin), then the name: a deterministic pick that needs no model built. Every other name is a
skipped row naming the variant run in its place.

Building (worker side): ``timm.create_model(name, pretrained=False)`` in eval, a batch of 2
images. The input is shrunk to ``SMALL`` pixels where the model takes that (``img_size`` for
the models whose ``pretrained_cfg`` says the input size is fixed), else the
``pretrained_cfg`` ``input_size``; one eager forward decides, and a model that rejects both
is not built, with the reason.
"""

from __future__ import annotations

import re
from typing import Any

from graphmend.core.worker import describe
from graphmend.sweep.building import NotBuilt

SELECTION = "the smallest variant of every timm architecture family (the module it is registered in), random weights"
SMALL = 64
# size words in timm names, smallest first; a name with none ranks as "base"
SIZES = ["atto", "femto", "pico", "nano", "micro", "xxxs", "xxs", "xs", "tiny", "mini", "small", "s", "lite",
         "light", "medium", "m", "base", "b", "large", "l", "xl", "xxl", "huge", "h", "giant", "g", "gigantic"]
_RANK = {w: i for i, w in enumerate(SIZES)}
_BASE = _RANK["base"]


def version() -> str:
    import timm

    return timm.__version__


def _size_rank(name: str) -> int:
    words = [re.sub(r"\d+$", "", w) for w in re.split(r"[_.]", name)]  # xxs24, s12, m36
    ranks = [_RANK[w] for w in words if w in _RANK]
    return min(ranks) if ranks else _BASE


def _first_number(name: str) -> int:
    m = re.search(r"\d+", name)
    return int(m.group()) if m else 0


def _resolution(name: str) -> int:
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(name)
    size = getattr(cfg, "input_size", None) if cfg is not None else None
    return int(size[-1]) if size else 224


def enumerate_models() -> tuple[list[str], dict[str, str]]:
    """(the smallest architecture of each family, in family order; {other architecture: why not run})."""
    import timm
    from timm.models import _registry as registry

    families: dict[str, list[str]] = {}
    for name in timm.list_models():
        families.setdefault(registry._model_to_module.get(name, "?"), []).append(name)
    keep: list[str] = []
    skipped: dict[str, str] = {}
    for family in sorted(families):
        names = sorted(families[family], key=lambda n: (_size_rank(n), _first_number(n), _resolution(n), len(n), n))
        keep.append(names[0])
        for other in names[1:]:
            skipped[other] = f"a larger variant of the {family} family ({names[0]} runs)"
    return keep, skipped


def modality(name: str) -> str:
    return "image"


def _forward_ok(model, x) -> str:
    import torch

    try:
        with torch.no_grad():
            model(x)
        return ""
    except Exception as exc:
        return describe(exc)


def build(name: str) -> tuple[Any, Any]:
    """The model (eval) and its input batch; ``NotBuilt`` with why not."""
    try:
        import timm
        import torch
        from timm.models import get_pretrained_cfg
    except Exception as exc:
        raise NotBuilt(f"timm does not import: {describe(exc)}") from None
    cfg = get_pretrained_cfg(name)
    chans, h, w = (getattr(cfg, "input_size", None) or (3, 224, 224)) if cfg is not None else (3, 224, 224)
    fixed = bool(getattr(cfg, "fixed_input_size", False)) if cfg is not None else False
    small = max(SMALL, *(getattr(cfg, "min_input_size", None) or (0, 0, 0))[1:]) if cfg is not None else SMALL
    torch.manual_seed(0)
    tries = [({"img_size": small}, small), ({}, None)] if fixed else [({}, small), ({}, None)]
    first = ""
    for kwargs, size in tries:
        try:
            model = timm.create_model(name, pretrained=False, **kwargs).eval()
        except Exception as exc:
            first = first or f"model: {describe(exc)}"
            continue
        x = torch.randn(2, chans, size or h, size or w)
        why = _forward_ok(model, x)
        if not why:
            return model, x
        first = first or f"eager forward: {why}"
    raise NotBuilt(first)


def target(name: str) -> tuple[Any, tuple, dict]:
    """What a generated ``mend_target_*`` returns: ``(model, (images,), {})``."""
    model, x = build(name)
    return model, (x,), {}
