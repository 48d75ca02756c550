"""transformers sweep: the batch a class runs on, derived from its built (and fitted) config.

``class_inputs`` gives ``B`` samples of the class's own modality for the parameters its forward
names: tokens with image and audio placeholders where the config names them, pixels of the vision
config's size, mel features, raw audio, video frames, patches on a grid (``_grid``), a time
series' past values, boxes for layout models. No torch at import (``graphmend.sweep.hf`` imports
this module at its own import).
"""

from __future__ import annotations

from typing import Any

# the built config's parts: sub-configs, sizes, token ids, what a grid or anyres model reads
from graphmend.sweep.hf_config import _configs, _pinpoints, _size, _special_ids, _sub, _token, image_token_names
# the shape a forward's docstring gives an input (a time series' past values: with channels or not)
from graphmend.sweep.hf_inputs import documented
from graphmend.sweep.hf_overrides import VOCAB

POSITION_MASK = "image_embeds_position_mask"  # where a model without an image token puts the image's features
B = 2  # batch: two samples, the second text right-padded
SEQ = 16


def class_inputs(model, cfg, accepted, image_tokens: int = 0, audio_tokens: int = 1) -> dict:
    """Keyword inputs of the class's own modality, for the parameters its forward names:
    tokens (with ``image_tokens`` image placeholders where the config names an image token, and
    ``audio_tokens`` audio placeholders where it names an audio token and the forward takes audio),
    pixels from the vision config's image size and channels, mel features from its mel bins,
    raw audio, video frames, past values of a time series, boxes for layout models."""
    import torch

    text = _sub(cfg, "text_config", "decoder")
    vocab = getattr(text, "vocab_size", None) or VOCAB
    specials = _special_ids(cfg)
    low = next((i for i in range(3, vocab) if i not in specials), min(5, vocab - 1))
    x: dict[str, Any] = {}
    if "input_ids" in accepted:
        aud = _token(cfg, "audio_token_id", "audio_token_index")
        heard = isinstance(aud, int) and 0 <= aud < vocab and ("input_features" in accepted or "input_values" in accepted)
        ids = torch.randint(low, vocab, (B, SEQ + image_tokens + (audio_tokens - 1 if heard else 0)))
        img = _token(cfg, *image_token_names(cfg))
        for tok in specials:
            if 0 <= tok < vocab:
                ids[ids == tok] = low  # a random id that happens to be a special token
        if image_tokens and isinstance(img, int):
            ids[:, 1:1 + image_tokens] = img  # after the first token, as a chat template places it
            start, end = _token(cfg, "image_start_token_id"), _token(cfg, "image_end_token_id")
            if isinstance(start, int) and isinstance(end, int) and max(start, end) < vocab:
                ids[:, 0], ids[:, 1 + image_tokens] = start, end  # the image's boundaries (ovis-2.5 counts them)
        question = _token(cfg, "question_token_id")
        if isinstance(question, int) and 0 <= question < vocab:
            ids[:, -6] = question  # splinter selects spans at its question tokens: one a sample
        if heard:  # after the image's: one the model expands, or one a feature
            ids[:, 1 + image_tokens:1 + image_tokens + audio_tokens] = aud
        x["input_ids"] = ids
        if image_tokens and POSITION_MASK in accepted:  # kosmos-2: 1 where the image's latents go
            x[POSITION_MASK] = torch.zeros_like(ids)
            x[POSITION_MASK][:, 1:1 + image_tokens] = 1
        if "mm_token_type_ids" in accepted:  # multimodal rope: 1 on image placeholders
            x["mm_token_type_ids"] = (ids == img).long() if isinstance(img, int) else torch.zeros_like(ids)
        if "attention_mask" in accepted:
            mask = torch.ones_like(ids)
            mask[1, -4:] = 0
            x["attention_mask"] = mask
    if "decoder_input_ids" in accepted and (getattr(cfg, "is_encoder_decoder", False) or
                                            model.main_input_name != "input_ids"):
        dvocab = getattr(_sub(cfg, "decoder", "text_config"), "vocab_size", None) or vocab
        x["decoder_input_ids"] = torch.randint(min(5, dvocab - 1), dvocab, (B, 8))
    vision = _sub(cfg, "vision_config", "encoder")
    if "image_grid_thw" in accepted and "pixel_values" in accepted:
        grid, _, patch = _grid(cfg)
        x["image_grid_thw"] = torch.tensor([grid] * B)
        x["pixel_values"] = torch.randn(B * grid[0] * grid[1] * grid[2], patch)
    elif "image_grid_hw" in accepted and "pixel_values" in accepted:  # nemotron-omni: patches on a 2-D grid
        grid, _, patch = _grid(cfg)
        x["image_grid_hw"] = torch.tensor([grid[1:]] * B)
        x["pixel_values"] = torch.randn(B * grid[1] * grid[2], patch)
    elif "grid_thw" in accepted and ("hidden_states" in accepted or "pixel_values" in accepted):
        grid, _, patch = _grid(cfg)  # a qwen-vl-like vision tower alone: patches, under either name
        x["grid_thw"] = torch.tensor([grid] * B)
        x["hidden_states" if "hidden_states" in accepted else "pixel_values"] = torch.randn(
            B * grid[0] * grid[1] * grid[2], patch)
    elif "pixel_values" in accepted and "spatial_shapes" in accepted:
        # siglip-2 "naflex": an image as its patches flattened, with their grid's (rows, columns) and mask
        p = getattr(vision, "patch_size", None) or 16
        side = 4
        x["pixel_values"] = torch.randn(B, side * side, (getattr(vision, "num_channels", None) or 3) * p * p)
        x["spatial_shapes"] = torch.tensor([[side, side]] * B)
        if "pixel_attention_mask" in accepted:
            x["pixel_attention_mask"] = torch.ones(B, side * side, dtype=torch.long)
    elif "pixel_values" in accepted and "aspect_ratio_ids" in accepted:
        # mllama: an image as its tiles, (batch, images, tiles, channels, h, w), with its aspect ratio's id
        tiles = getattr(vision, "max_num_tiles", None) or 4
        h, w = _size(getattr(vision, "image_size", None))
        x["pixel_values"] = torch.randn(B, 1, tiles, getattr(vision, "num_channels", None) or 3, h, w)
        x["aspect_ratio_ids"] = torch.ones(B, 1, dtype=torch.long)  # id 1: one tile of 1 x 1
        if "aspect_ratio_mask" in accepted:
            x["aspect_ratio_mask"] = torch.zeros(B, 1, tiles, dtype=torch.long)
            x["aspect_ratio_mask"][..., 0] = 1
        if "cross_attention_mask" in accepted and "input_ids" in x:  # each token sees the image's first tile
            x["cross_attention_mask"] = torch.zeros(B, x["input_ids"].shape[1], 1, tiles, dtype=torch.long)
            x["cross_attention_mask"][..., 0] = 1
    elif "pixel_values" in accepted and "target_sizes" in accepted:
        # minicpm-v: every image's patches side by side in one row, (1, channels, patch, patch x patches), with
        # each image's grid (rows, columns) of patches
        p = _size(getattr(vision, "patch_size", None), 14)[0]
        side = 4
        x["pixel_values"] = torch.randn(1, getattr(vision, "num_channels", None) or 3, p, p * B * side * side)
        x["target_sizes"] = torch.tensor([[side, side]] * B)
    elif "flattened_patches" in accepted:
        # pix2struct: patches flattened, each row led by its (row, column) on the grid (1-based, 0 pads)
        width = getattr(vision, "patch_embed_hidden_size", None) or 3 * 16 * 16
        side = 4
        rows, cols = torch.meshgrid(torch.arange(1, side + 1), torch.arange(1, side + 1), indexing="ij")
        grid = torch.stack([rows.flatten(), cols.flatten()], -1).float()
        x["flattened_patches"] = torch.cat([grid.expand(B, -1, -1), torch.randn(B, side * side, width)], -1)
        if "attention_mask" in accepted and "input_ids" not in x:
            x["attention_mask"] = torch.ones(B, side * side, dtype=torch.long)
    elif "pixel_values" in accepted and ({"pixel_position_ids", "image_position_ids"} & set(accepted)):
        # gemma-4-like: an image as flattened patches with their (x, y) on the grid, pooled k x k
        k = getattr(vision, "pooling_kernel_size", None) or 1
        p = getattr(vision, "patch_size", None) or 16
        merged = getattr(vision, "model_patch_size", None)  # gemma-4-unified: patches already merged k x k
        if isinstance(merged, int) and merged > 0:
            k, p = 1, merged
        side = 2 * k
        ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
        pos = torch.stack([xs.flatten(), ys.flatten()], -1)
        x["pixel_values"] = torch.rand(B, side * side, (getattr(vision, "num_channels", None) or 3) * p * p)
        key = "pixel_position_ids" if "pixel_position_ids" in accepted else "image_position_ids"
        x[key] = pos.unsqueeze(0).expand(B, -1, -1).contiguous()
    elif "pixel_values" in accepted and "image_sizes" in accepted and _pinpoints(cfg):
        # llava-next ("anyres"): each image as its base view and the tiles of its grid, (batch, views, channels,
        # h, w), with its size; as many tiles as the largest grid has (a model keeps those its image's grid takes)
        h, w = _size(getattr(vision, "image_size", None))
        views = 1 + max(a * b for a, b in _pinpoints(cfg)) // (h * w)
        x["pixel_values"] = torch.randn(B, views, getattr(vision, "num_channels", None) or 3, h, w)
        x["image_sizes"] = torch.tensor([[h, w]] * B)
    elif "pixel_values" in accepted:
        h, w = _size(getattr(vision, "image_size", None) or getattr(cfg, "image_size", None))
        c = getattr(vision, "num_channels", None) or 3
        frames = getattr(vision, "num_frames", None)
        if isinstance(frames, int) and model.main_input_name == "pixel_values" and "video" in type(model).__name__.lower() \
                or frames and "Video" in type(cfg).__name__:
            x["pixel_values"] = torch.randn(B, frames, c, h, w)
        else:
            x["pixel_values"] = torch.randn(B, c, h, w)
    elif "pixel_values_videos" in accepted:  # a video-only model: (batch, frames, channels, h, w)
        h, w = _size(getattr(vision, "image_size", None) or getattr(cfg, "image_size", None))
        frames = getattr(vision, "num_frames", None) or getattr(cfg, "num_frames", None) or 4
        x["pixel_values_videos"] = torch.randn(B, frames, getattr(vision, "num_channels", None) or 3, h, w)
    for name in [n for n in accepted if n.endswith("_pixel_values") and "pixel_values" in x]:
        tower = getattr(cfg, name[:-len("pixel_values")] + "vision_config", None)  # deepseek-vl-hybrid's high_res
        if tower is not None and not isinstance(tower, dict):
            h, w = _size(getattr(tower, "image_size", None))
            x[name] = torch.randn(B, getattr(tower, "num_channels", None) or 3, h, w)
    for name in ("image_merge_sizes", "merge_sizes"):  # video-llama-3: each image's merge, the processor's
        if name in accepted and ("image_grid_thw" in x or "grid_thw" in x):
            x[name] = torch.full((B,), _merge_size(_sub(cfg, "vision_config")))
    audio = _sub(cfg, "audio_config", "encoder_config", "encoder")
    if not hasattr(audio, "num_mel_bins"):  # the mel bins of an encoder under the audio config (nemotron's asr)
        audio = next((c for c in _configs(audio) if isinstance(getattr(c, "num_mel_bins", None), int)), audio)
    if "input_features" in accepted:
        mel = getattr(audio, "num_mel_bins", None)
        if mel and isinstance(getattr(audio, "num_stacked_frames", None), int):  # low frame rate: frames stacked
            mel *= audio.num_stacked_frames
        if mel:
            frames = 2 * getattr(audio, "max_source_positions", 32) if hasattr(audio, "max_source_positions") else 64
            window = getattr(audio, "n_window", None)  # qwen-asr encoders take whole windows of 2 x n_window
            if isinstance(window, int) and window > 0 and frames % (2 * window):
                frames = 2 * window
            x["input_features"] = torch.randn(B, mel, frames)
        else:
            # w2v-bert, seamless: stacked frames, the projection's input size is feature_size x stride; musicgen
            # melody: a chromagram, its chroma bins a frame
            feat = (getattr(audio, "feature_projection_input_dim", 0)
                    or getattr(audio, "input_feat_per_channel", 0) * getattr(audio, "input_channels", 1)
                    or getattr(audio, "feature_size", None) or getattr(audio, "num_chroma", None) or 80)
            x["input_features"] = torch.randn(B, 64, feat)
    for key in ("feature_attention_mask", "input_features_mask"):  # audio LMs and encoders count the frames
        if key not in accepted or "input_features" not in x:
            continue
        f = x["input_features"]
        x[key] = torch.ones(B, f.shape[-1] if mel else f.shape[1], dtype=torch.long)
    if "input_values" in accepted:
        mel, length = getattr(audio, "num_mel_bins", None), getattr(audio, "max_length", None)
        x["input_values"] = torch.randn(B, length, mel) if mel and length else torch.randn(B, 4000)
    if "past_values" in accepted:
        ctx = getattr(cfg, "context_length", None) or 16
        lags = getattr(cfg, "lags_sequence", None)
        if lags:  # time-series transformer, informer, autoformer: the lags come before the context
            t = ctx + max(lags)
            size = getattr(cfg, "input_size", 1)
            shape = (B, t) if size == 1 else (B, t, size)
            x["past_values"] = torch.randn(*shape)
            x["past_observed_mask"] = torch.ones(*shape)
            nf = getattr(cfg, "num_time_features", 0) + getattr(cfg, "num_dynamic_real_features", 0)
            pred = getattr(cfg, "prediction_length", 4)
            if "past_time_features" in accepted:
                x["past_time_features"] = torch.randn(B, t, nf)
            if "future_time_features" in accepted:
                x["future_time_features"] = torch.randn(B, pred, nf)
            if "future_values" in accepted:
                x["future_values"] = torch.randn(B, pred) if size == 1 else torch.randn(B, pred, size)
        else:  # patch models: (batch, context, channels), or (batch, context) where the forward says so
            ch = getattr(cfg, "num_input_channels", None) or getattr(cfg, "input_size", None) or 1
            patch = next((v for v in (getattr(cfg, n, None) for n in ("patch_length", "patch_len", "input_patch_len"))
                          if isinstance(v, int) and v > 0), None)
            if patch and ctx % patch:  # whole patches (timesfm: the context is cut into patch_length steps)
                ctx = patch * 2
            doc = documented(model, "past_values")
            univariate = doc is not None and len([d for d in doc[1].split(",") if d.strip()]) == 2
            # a sequence of 1-D series (timesfm 2.5's `Sequence[torch.Tensor]`): a (batch, context) tensor's rows
            univariate = univariate or "Sequence" in str(getattr(accepted["past_values"], "annotation", ""))
            x["past_values"] = torch.randn(B, ctx) if univariate else torch.randn(B, ctx, ch)
    if "bbox" in accepted and "input_ids" in x:  # layout models: boxes x0 <= x1, y0 <= y1 in 0..1000
        lo = torch.randint(0, 500, (B, x["input_ids"].shape[1], 2))
        x["bbox"] = torch.cat([lo, lo + 10], -1)
    eos = _token(cfg, "eos_token_id")
    if ("input_ids" in x and isinstance(eos, int) and 0 <= eos < vocab and getattr(cfg, "is_encoder_decoder", False)
            and type(model).__name__.endswith("ForSequenceClassification")):
        x["input_ids"][:, -1] = eos  # bart-like heads pool the hidden state at each sample's eos
        x.pop("decoder_input_ids", None)  # ... of the decoder, which they run on the input shifted
    if type(model).__name__.endswith("ForMultipleChoice"):  # (batch, choices, seq): two choices
        for k in ("input_ids", "attention_mask", "token_type_ids", "bbox"):
            if k in x:
                x[k] = x[k].unsqueeze(1).expand(B, 2, *x[k].shape[1:]).contiguous()
    return {k: v for k, v in x.items() if k in accepted}


def _placeholder_counts(features: int, cfg) -> list[int]:
    """Image placeholders a sample may need, from the feature count a model says it has: the
    count is of feature vectors, or (mistral3, deepseek-vl) of their elements, the text's width each."""
    width = getattr(_sub(cfg, "text_config", "decoder"), "hidden_size", None)
    counts = [features // B] if features % B == 0 else []
    if isinstance(width, int) and width and features % (B * width) == 0:
        counts.append(features // (B * width))
    return [n for n in counts if n > 0]


def _grid(cfg) -> tuple[tuple[int, int, int], int, int]:
    """Qwen-VL style patch inputs: (grid t, h, w) of one image, its tokens after the spatial merge,
    and one patch's flattened size (channels x temporal patch x patch x patch)."""
    vision = _sub(_sub(cfg, "vlm_config"), "vision_config")  # a retrieval head's is its whole model's (colqwen2)
    p = getattr(vision, "patch_size", 14) or 14
    tp = getattr(vision, "temporal_patch_size", None) or getattr(vision, "patch_temporal", None) or 1
    m = _merge_size(vision)
    c = getattr(vision, "in_channels", None) or getattr(vision, "num_channels", None) or 3
    h = w = 2 * m
    return (1, h, w), h * w // (m * m), c * tp * p * p


def _merge_size(vision) -> int:
    """The m x m patches a qwen-vl-like tower merges into one token (2 where the processor decides)."""
    return getattr(vision, "spatial_merge_size", None) or getattr(vision, "merge_size", None) or 2
