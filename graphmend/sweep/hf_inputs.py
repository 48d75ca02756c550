"""transformers sweep: inputs a forward documents but ``class_inputs`` does not derive.

A forward's docstring gives each tensor argument's shape in names (``latents (`torch.Tensor` of
shape `(batch_size, hidden_size, frames)`)``, ``noise_embeds ... `[batch_size, config.block_size,
dim]```): a name the config holds is its value there (``hidden_size``, ``config.block_size``,
``visual_feat_dim``), ``batch_size`` is the sweep's batch, any other a short length. Used for the
arguments a forward requires and for the ones a failure names (```visual_feats` cannot be
`None```). And the layout variants (``VARIANTS``) tried when the derived inputs fail. No torch at
import (``graphmend.sweep.hf`` imports this module at its own import).
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Optional

LENGTH = 16  # a documented length the config does not size (frames, sequence_length, num_visual_features)

# `name` (`torch.FloatTensor` of shape `(batch_size, hidden_size, frames)`, *optional*):
# the shape in backticks, or bare where a docstring leaves them out (instructblip-video's qformer_input_ids); one
# space or more before "of shape" (blip-2's Q-Former has two)
_ARG = r"^\s*{name} \(`(?:~?torch\.)?(\w+)`(?:\s+of shape (?:`[(\[]([^`]*)[)\]]`|\(([^()`]*)\)))?"
_EXPR = re.compile(r"^[\w\s.*+()/-]+$")  # what a documented dimension may be: names, numbers, arithmetic


def documented(model, name: str) -> Optional[tuple[str, str]]:
    """(the tensor type, the shape's text) that ``model.forward``'s docstring gives ``name``; None
    when it gives no tensor type."""
    doc = inspect.getdoc(getattr(model, "forward", None)) or ""
    m = re.search(_ARG.format(name=re.escape(name)), doc, re.M)
    if m is None or not (m.group(1).endswith("Tensor") or m.group(1) == "Tensor"):
        return None
    return m.group(1), m.group(2) or m.group(3) or ""


class _Sizes(dict):
    """Names in a documented shape: the batch, the config's (first of it and its sub-configs that
    has the name), else the size an input given has under that name (``known``), else ``LENGTH``."""

    def __init__(self, configs: list, batch: int, known: Optional[dict] = None):
        super().__init__(batch_size=batch, len=len, config=configs[0] if configs else None)
        self.configs = configs
        self.known = known or {}

    def __missing__(self, key: str) -> Any:
        for name in (key,) + ALIASES.get(key, ()):
            for c in self.configs:
                v = getattr(c, name, None)
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    return v
        return self.known.get(key, LENGTH)


def known_sizes(model, have: dict) -> dict:
    """The lengths the inputs given fix, by the names their documented shapes give them: timesfm's
    ``past_values_padding`` is `(batch_size, sequence_length)` as long as ``past_values``, whose
    documented shape names the same length. A dimension documented as a plain name binds it."""
    out: dict = {}
    for name, value in have.items():
        doc = documented(model, name)
        dims = [d.strip() for d in doc[1].split(",")] if doc else []
        if dims and not dims[-1]:
            dims.pop()
        if len(dims) != getattr(value, "ndim", -1):
            continue
        for dim, size in zip(dims, value.shape):
            if re.fullmatch(r"[A-Za-z_]\w*", dim) and dim != "batch_size":
                out.setdefault(dim, int(size))
    return out


# a documented dimension's other names in configs
ALIASES = {"dim": ("hidden_size",), "embed_dim": ("hidden_size",), "hidden_dim": ("hidden_size",),
           "d_model": ("hidden_size",), "num_channels": ("in_channels",),
           "num_codebooks": ("num_channels",)}  # dia's decoder: a channel a codebook


def documented_shape(model, cfg_list: list, name: str, batch: int,
                     known: Optional[dict] = None) -> Optional[tuple[bool, tuple[int, ...]]]:
    """(integer tensor?, shape) of argument ``name`` from the forward's docstring; None when the
    docstring gives no shape or a dimension that is no positive size. ``known``: ``known_sizes``."""
    doc = documented(model, name)
    if doc is None or not doc[1].strip():
        return None
    kind, text = doc
    # shapes documented as alternatives: the last (dia's, as its first is reshaped to, (batch, seq, codebooks))
    text = re.split(r"\)\s+or\s+\(", text)[-1]
    dims = []
    sizes = _Sizes(cfg_list, batch, known)
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > 1 and not parts[-1]:  # a one-dimensional shape written as a tuple: `(batch_size,)`
        parts.pop()
    for part in parts:
        if not part or not _EXPR.match(part) or "__" in part:
            return None
        try:
            value = eval(part, {"__builtins__": {}}, sizes)  # noqa: S307 -- names and arithmetic only (_EXPR)
        except Exception:  # a dimension the config cannot size (an attribute of a missing config)
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return None
        dims.append(value)
    return kind.startswith(("Long", "Int", "Bool")), tuple(dims)


def documented_inputs(model, cfg_list: list, names, batch: int, have: Optional[dict] = None) -> dict:
    """A tensor for each of ``names`` whose shape the forward documents: random values, or ones
    for an integer tensor (a mask that keeps all, an id that every table has); a length the
    inputs ``have`` already fix (``known_sizes``) is theirs."""
    import torch

    out = {}
    known = known_sizes(model, have or {})
    for name in names:
        got = documented_shape(model, cfg_list, name, batch, known)
        if got is None:
            continue
        integer, shape = got
        out[name] = torch.ones(shape, dtype=torch.long) if integer else torch.randn(shape)
    return out


def required(accepted, have) -> list[str]:
    """The forward's arguments that have no default and that ``have`` lacks."""
    return [n for n, p in accepted.items() if n != "self" and p.default is p.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in have]


def named_missing(exc: BaseException, accepted, have) -> list[str]:
    """The forward's arguments that a failure names and that ``have`` lacks: in its message
    (```visual_feats` cannot be `None```, "You have to specify flattened_patches") or in the line
    that raised (granite-docling's ``pixel_attention_mask.sum()`` on a mask left ``None``)."""
    import traceback

    said = [str(exc)] + [f.line or "" for f in traceback.extract_tb(exc.__traceback__)[-1:]]
    words = set(re.findall(r"\w+", " ".join(said)))
    # not an embedding, which stands in for an input given (inputs_embeds for input_ids)
    return [n for n in accepted if n in words and n not in have and n not in ("self", "kwargs") and "_" in n
            and not n.endswith("_embeds")]


# Layout variants tried when the derived inputs fail, one at a time (a modality's tensors come in
# more than one layout across architectures; the config does not say which):
def _channels_audio(x: dict) -> Optional[dict]:  # codecs and raw-audio encoders: (batch, 1, samples)
    v = x.get("input_values")
    return {**x, "input_values": v.unsqueeze(1)} if v is not None and v.dim() == 2 else None


def _time_major_features(x: dict) -> Optional[dict]:  # conformers: (batch, frames, mel), whisper (batch, mel, frames)
    v = x.get("input_features")
    return {**x, "input_features": v.transpose(1, 2).contiguous()} if v is not None and v.dim() == 3 else None


def _images_per_sample(x: dict) -> Optional[dict]:  # idefics-like: (batch, images, channels, h, w)
    v = x.get("pixel_values")
    if v is None or v.dim() != 4:
        return None
    out = {**x, "pixel_values": v.unsqueeze(1)}
    if "input_ids" in x:  # idefics: which image each text token sees, (batch, text, images)
        out["image_attention_mask"] = x["input_ids"].new_ones(*x["input_ids"].shape, 1)
    return out


def _without_pixels(x: dict) -> Optional[dict]:  # a multimodal head that also runs on text alone
    if "pixel_values" not in x or "input_ids" not in x:
        return None
    return {k: v for k, v in x.items() if k not in ("pixel_values", "image_grid_thw")}


def _image_sizes(x: dict) -> Optional[dict]:  # pixtral, llava-next: each image's (height, width)
    v = x.get("pixel_values")
    if v is None or v.dim() != 4 or "image_sizes" in x:
        return None
    import torch

    return {**x, "image_sizes": torch.tensor([list(v.shape[-2:])] * v.shape[0])}


def _without_audio(x: dict) -> Optional[dict]:  # an omni model's image and text, its audio left out
    if "input_features" not in x or "pixel_values" not in x:
        return None
    return {k: v for k, v in x.items() if k not in ("input_features", "feature_attention_mask", "input_features_mask")}


def _longer_audio(x: dict) -> Optional[dict]:  # x-vector heads: their TDNN kernels outlast 4000 samples' frames
    v = x.get("input_values")
    return {**x, "input_values": v.repeat(1, 4)} if v is not None and v.dim() == 2 else None


def _larger_image(x: dict) -> Optional[dict]:  # text recognisers: their strides and pools outlast 64 px
    v = x.get("pixel_values")
    if v is None or v.dim() != 4 or max(v.shape[-2:]) > 64:
        return None
    return {**x, "pixel_values": v.repeat(1, 1, 2, 2)}


def _patches_as_images(x: dict) -> Optional[dict]:  # grid models (paddleocr-vl, kimi): each patch (3, p, p)
    v = x.get("pixel_values")
    if v is None or v.dim() != 2 or ("image_grid_thw" not in x and "grid_thw" not in x) or v.shape[1] % 3:
        return None
    p = round((v.shape[1] // 3) ** 0.5)
    return {**x, "pixel_values": v.reshape(v.shape[0], 3, p, p)} if 3 * p * p == v.shape[1] else None


def _speech_alone(x: dict) -> Optional[dict]:  # seamless: speech in, the text's mask does not fit its frames
    if "input_features" not in x or "input_ids" not in x:
        return None
    return {k: v for k, v in x.items() if k not in ("input_ids", "attention_mask")}


def _image_pairs(x: dict) -> Optional[dict]:  # keypoint matchers: two images a sample, (batch, 2, channels, h, w)
    v = x.get("pixel_values")
    return {**x, "pixel_values": v.unsqueeze(1).repeat(1, 2, 1, 1, 1)} if v is not None and v.dim() == 4 else None


def _one_audio_input(x: dict) -> Optional[dict]:  # an encoder-decoder of a raw-audio encoder: samples, no mel
    if "input_values" not in x or "input_features" not in x:
        return None
    return {k: v for k, v in x.items() if k not in ("input_features", "input_features_mask", "feature_attention_mask")}


def _patches_per_image(x: dict) -> Optional[dict]:  # colqwen2: each image's patches a row, (images, patches, dim)
    v, grid = x.get("pixel_values"), x.get("image_grid_thw")
    if v is None or v.dim() != 2 or grid is None or v.shape[0] % grid.shape[0]:
        return None
    return {**x, "pixel_values": v.reshape(grid.shape[0], -1, v.shape[1])}


def _mask_per_row(x: dict) -> Optional[dict]:  # owl-vit: rows of text queries, a mask row each (musicgen keeps one)
    ids, mask = x.get("input_ids"), x.get("attention_mask")
    if ids is None or mask is None or mask.dim() != 2 or ids.shape[0] == mask.shape[0] or ids.shape[0] % mask.shape[0]:
        return None
    return {**x, "attention_mask": mask.repeat_interleave(ids.shape[0] // mask.shape[0], 0)}


def _tiles_with_mask(x: dict) -> Optional[dict]:  # granite-docling: (batch, tiles, channels, h, w), real tiles masked
    v = x.get("pixel_values")
    if v is None or v.dim() != 4:
        return None
    import torch

    return {**x, "pixel_values": v.unsqueeze(1), "pixel_attention_mask": torch.ones(v.shape[0], 1, dtype=torch.bool)}


FRAMES = 4  # the tiny num_frames (hf_config.GENERIC_MORE)


def _as_video(x: dict) -> Optional[dict]:  # video models named for what they do (vivit, x-clip): frames a sample
    v = x.get("pixel_values")
    return {**x, "pixel_values": v.unsqueeze(1).repeat(1, FRAMES, 1, 1, 1)} if v is not None and v.dim() == 4 else None


VARIANTS = (_channels_audio, _time_major_features, _images_per_sample, _image_sizes, _without_audio, _longer_audio,
            _image_pairs, _speech_alone, _larger_image, _patches_as_images, _as_video,
            _one_audio_input, _patches_per_image, _mask_per_row, _tiles_with_mask)
