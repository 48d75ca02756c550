"""transformers sweep: the tiny config a class is built from.

A config class gets the generic tiny sizes (vocab 1000, hidden 64, 4 heads, 2 layers, FFN 128:
``GENERIC``, ``MOE``, ``GENERIC_MORE``) for the parameters its ``__init__`` names, list-valued
depths cut to one block a stage, widths and per-layer lists cut with the sizes they copy, every
sub-config shrunk the same way, and the per-architecture overrides (``tiny_config_kwargs``). The
built config is then fitted where full-size values outlast the tiny sizes (``_fit_*``: special
token ids, pad token, multimodal rope sections, sliding window, anyres pinpoints, feature layers;
``fit_lacking`` for an attribute a model reads that its config lacks). The batch a class runs on
is ``graphmend.sweep.hf_batch``'s. No torch at import (``graphmend.sweep.hf`` imports this module
at its own import; this one never imports it).
"""

from __future__ import annotations

import inspect
import re
from typing import Optional

# the tiny sizes and the per-architecture overrides: tables, in their own module
from graphmend.sweep.hf_overrides import FFN, HEADS, HIDDEN, LAYERS, OVERRIDES, VOCAB

# Config __init__ parameter names that mean the same thing across architectures; only the
# ones a config's signature names are passed (setting others after __init__ would miss
# values the config derives in __init__, e.g. head_dim).
GENERIC = [  # pairs, not a dict: LAYERS and 2 kv heads share a value
    (VOCAB, ["vocab_size", "src_vocab_size", "tgt_vocab_size"]),
    (HIDDEN, ["hidden_size", "d_model", "n_embd", "emb_dim", "dim", "embed_dim", "n_embed", "d_embed"]),
    (LAYERS, LAYER_NAMES := ["num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers",
                             "decoder_layers", "num_decoder_layers", "num_encoder_layers"]),
    (HEADS, ["num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
             "decoder_attention_heads", "num_encoder_attention_heads", "num_decoder_attention_heads"]),
    (FFN, ["intermediate_size", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim", "ffn_dim", "n_inner", "d_inner",
           "dff", "hidden_dim"]),
    (128, ["max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "max_encoder_position_embeddings",
           "max_decoder_position_embeddings", "max_positions", "context_length"]),
    (16, ["head_dim", "d_kv", "d_head"]),
    (2, ["num_key_value_heads"]),
    # multi-head latent attention (deepseek_v2/v3 and their kin): defaults in the hundreds
    (8, ["qk_rope_head_dim", "qk_nope_head_dim"]),
    (16, ["v_head_dim", "kv_lora_rank"]),
    (32, ["q_lora_rank"]),
]
MOE = dict(num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
           shared_expert_intermediate_size=64, n_routed_experts=4, n_shared_experts=1, n_group=1, topk_group=1,
           top_k_experts=2)


def config_kwargs(cls, extra: dict) -> dict:
    """The generic tiny sizes for the parameters ``cls.__init__`` names, then ``extra``."""
    try:
        params = set(inspect.signature(cls.__init__).parameters)
    except (TypeError, ValueError):
        params = set()
    kw = {name: value for value, names in GENERIC for name in names if name in params}
    # a field the config says is its hidden size (granite-speech's encoder: hidden_size -> hidden_dim) is a
    # width, whatever another config means by its name (an FFN's hidden_dim)
    target = (getattr(cls, "attribute_map", None) or {}).get("hidden_size")
    if target in kw:
        kw[target] = HIDDEN
    kw.update({k: v for k, v in MOE.items() if k in params and k not in extra})
    kw.update({k: v for k, v in extra.items() if "." not in k})  # "sub.name": a sub-config's (tiny_config_kwargs)
    return kw


# Vision, audio, time series and layout sizes, generic like GENERIC: passed only where a config's
# __init__ names them. Image 64 px keeps a stride-32 backbone at 2x2; audio sizes keep a
# whisper-like encoder at 2 x 64 frames.
GENERIC_MORE = [
    (64, ["image_size", "crop_size"]),
    (4, ["num_frames"]),
    (64, ["max_source_positions"]),
    (16, ["context_length"]), (4, ["prediction_length"]), ([1, 2, 3], ["lags_sequence"]),
    (1, ["num_time_features"]),
    (32, PROJECTIONS := ["projection_dim", "text_embed_dim", "vision_embed_dim", "proj_dim"]),
    (HIDDEN, ["out_hidden_size"]),  # qwen-vl: the merged vision features join the text's hidden size
    (16, ["image_seq_length", "num_query_tokens", "mm_tokens_per_image", "latent_query_num"]),
    # detection queries: rt-detr-like encoders pick the top num_queries of their 84 tokens at 64 px
    (16, ["num_queries"]),
]
# list-valued sizes of hierarchical backbones (swin, convnext, resnet, ...): one block a stage
LISTS_OF_ONES = ("depths", "num_layers_per_stage", "stage_depths")


def tiny_config_kwargs(cfg_cls, extra: Optional[dict] = None) -> dict:
    """``config_kwargs`` plus the vision/audio/time-series sizes, list-valued depths cut to one
    block a stage, and every sub-config (text/vision/audio/encoder/decoder) shrunk the same way,
    passed as a dict (with the sub-config's model type, which a composite needs to pick its class)."""
    extra = dict(extra or {})
    nested: dict[str, dict] = {}  # an override's "sub.name": name in that sub-config's tiny kwargs
    for key in [k for k in extra if "." in k]:
        sub, name = key.split(".", 1)
        nested.setdefault(sub, {})[name] = extra.pop(key)
    kw = config_kwargs(cfg_cls, {})
    try:
        params = set(inspect.signature(cfg_cls.__init__).parameters)
    except (TypeError, ValueError):
        params = set()
    kw.update({n: v for v, names in GENERIC_MORE for n in names if n in params})
    defaults = _defaults(cfg_cls)
    for name in MOE:  # a tiny mixture has no more experts than the full one (vitpose's one expert is none)
        if name in kw and isinstance(defaults.get(name), int) and 0 < defaults[name] < kw[name]:
            kw[name] = defaults[name]
    # latent attention: a rotary embedding sized by head_dim rotates the rope part of each head
    if "qk_rope_head_dim" in kw and "head_dim" in kw and defaults.get("head_dim") == defaults.get("qk_rope_head_dim"):
        kw["head_dim"] = kw["qk_rope_head_dim"]
    if "qk_head_dim" in params and "qk_rope_head_dim" in kw and "qk_nope_head_dim" in kw:
        kw["qk_head_dim"] = kw["qk_rope_head_dim"] + kw["qk_nope_head_dim"]
    # a size the full model turns off (no rotary part in latent attention: NoPE) stays off
    for name in [n for _, names in GENERIC for n in names]:
        if defaults.get(name) == 0 and kw.get(name):
            kw[name] = 0
    depth = _depth_cut(kw, defaults)
    for name in LISTS_OF_ONES:
        if name in params and isinstance(defaults.get(name), (list, tuple)):
            kw[name] = [1] * depth.get(len(defaults[name]), len(defaults[name]))
    # a size the config keeps per stage (swin's num_heads, pvt's num_attention_heads) or per layer
    # (gemma-3n's intermediate_size): one a stage, one a tiny layer
    for name, value in list(kw.items()):
        default = defaults.get(name)
        if isinstance(value, int) and isinstance(default, (list, tuple)) and default \
                and all(isinstance(d, int) for d in default):
            kw[name] = [value] * depth.get(len(default), len(default))
    _fit_per_layer(kw, defaults, params, depth)
    _fit_context(kw, defaults)
    _fit_audio_window(kw, defaults)
    levels = [(kw, defaults, params)]
    for key, spec in sub_config_specs(cfg_cls).items():
        if key in extra or key == "backbone_config":  # backbones may be timm's; the default is kept
            continue
        sub_cls = _sub_config_class(spec)
        if sub_cls is None:
            continue
        sub_params = _params(sub_cls)
        # the grouped-attention retry (``_first_built``) reaches every sub-config that has the heads
        sub_extra = {k: v for k, v in extra.items() if k == "num_key_value_heads" and k in sub_params}
        # the sub-config's own model type's overrides (mllama's vision tower in mllama), then the composite's
        sub_extra.update({k: v for k, v in OVERRIDES.get(getattr(sub_cls, "model_type", ""), ({}, {}))[0].items()
                          if k in sub_params or "." in k})
        sub_extra.update(nested.get(key, {}))
        init = dict(getattr(spec, "init_kwargs", None) or {})
        # a composite's full-size defaults for its sub-config may name sizes the sub-config's
        # __init__ does not (mistral3's pixtral head_dim 64): the generic tiny value replaces each
        init.update({n: v for v, names in GENERIC for n in names if n in init})
        sub = {**init, **tiny_config_kwargs(sub_cls, sub_extra)}
        if getattr(spec, "model_type", None):
            sub["model_type"] = spec.model_type
        kw[key] = sub
        # the composite's own default sub-config, where it sets sizes of its own (deepseek-ocr-2's encoder width)
        own = defaults.get(key)
        own = {k: v for k, v in vars(own).items() if not k.startswith("_")} if hasattr(own, "to_dict") else {}
        levels.append((sub, {**_defaults(sub_cls), **init, **own}, sub_params))
    _fit_widths(levels)
    if "num_key_value_heads" not in params:  # the retry's heads, for a composite: its sub-configs'
        extra.pop("num_key_value_heads", None)
    kw.update(extra)
    return kw


# a width one config keeps of another's (vision_config.text_hidden_size, a head's condition_dim),
# or a count of channel groups a convolution takes of its width (mimi's upsample_groups, depthwise)
WIDTH = re.compile(r"hidden_size|_dim$|(input|output|in|out)_size$|_groups$|^out(put)?_channels$")
MERGED_WIDTHS = ("out_hidden_size",)  # GENERIC_MORE's guess (the text's width) unless the default is a merged width
HIDDEN_NAMES = ("hidden_size", "d_model")  # a config's hidden size, under either name
WIDTH_LIST = re.compile(r"channels|features|hidden_sizes|_dims$")


def _fit_widths(levels: list) -> None:
    """A width that a config keeps of its own or another config's hidden size (its default equals
    that config's default hidden size, and its name says width) is cut with it: configs validate
    that they agree, and models size layers by both. ``levels``: (tiny kwargs, defaults,
    ``__init__`` parameters) of each config."""
    # bart-like text configs keep their hidden size as d_model (florence-2's projection is sized to it)
    cut = {d[n]: k[n] for k, d, _ in levels for n in [next((n for n in HIDDEN_NAMES if n in k), None)]
           if n and isinstance(d.get(n), int) and isinstance(k.get(n), int)}
    # a vision tower that merges m x m patches puts out m^2 times its width, which a composite sizes its
    # projector by (muse-glimmer's out_hidden_size 6144 of 1536); the tower's own out_hidden_size is the text's
    merged = {d["hidden_size"] * m * m: (k["hidden_size"] * m * m, i) for i, (k, d, _) in enumerate(levels)
              for m in [d.get("spatial_merge_size") or d.get("merge_size")]
              if isinstance(m, int) and m > 1 and isinstance(d.get("hidden_size"), int)
              and isinstance(k.get("hidden_size"), int)}
    for i, (kw, defaults, params) in enumerate(levels):
        for name in params:
            value = defaults.get(name)
            if name in MERGED_WIDTHS and isinstance(value, int) and value in merged and value not in cut \
                    and merged[value][1] != i:
                kw[name] = merged[value][0]
                continue
            # a projection a composite sizes to another config's width (paligemma's to the text's), or
            # one its full-size init_kwargs set (inkling2-loop's vision text_hidden_size)
            if (name not in kw or name in PROJECTIONS or kw[name] == value) and WIDTH.search(name) \
                    and isinstance(value, int) and value in cut:
                kw[name] = cut[value]
            # widths a stage at a time whose last feeds a config of that hidden size (a backbone's channels)
            elif name not in kw and WIDTH_LIST.search(name) and isinstance(value, (list, tuple)) and value \
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in value) and value[-1] in cut:
                kw[name] = [cut[v] if v == value[-1] else v for v in value]


def _params(cls) -> set:
    try:
        return set(inspect.signature(cls.__init__).parameters)
    except (TypeError, ValueError):
        return set()


def _fit_per_layer(kw: dict, defaults: dict, params: set, cut: dict) -> None:
    """A per-layer list of types (``layer_types``, ``layers_block_type``, ...) of the full-size depth,
    defaulted or derived from it, would outlast the tiny depth (configs validate that they
    agree): each list ``__init__`` takes whose default length is a depth the tiny kwargs cut
    keeps its first entries, one a tiny layer, as a config that derives the list from its
    depth does. ``cut``: {full depth: tiny depth} (``_depth_cut``)."""
    for name in params:
        default = defaults.get(name)
        if name in kw or not isinstance(default, (list, tuple)) or len(default) not in cut:
            continue
        if all(isinstance(d, str) for d in default):
            kw[name] = _kinds_kept(list(default), cut[len(default)])
        # sizes a layer (muse-spark's patch_sizes, hidden_sizes); not a list of layer indices
        # (kv_source_layers), which a cut would break
        elif all(isinstance(d, int) and not isinstance(d, bool) for d in default) \
                and not re.search(r"layer|ind|ids?$", name):
            kw[name] = list(default[:cut[len(default)]])


PATCH_LENGTHS = ("patch_length", "patch_len", "input_patch_len")


def _fit_context(kw: dict, defaults: dict) -> None:
    """A time-series context the model cuts into patches (timesfm: 32 steps, a context of 512) is
    whole patches: a tiny context that is not (16) becomes two patches."""
    patch = next((v for v in (kw.get(n, defaults.get(n)) for n in PATCH_LENGTHS)
                  if isinstance(v, int) and v > 0), None)
    ctx = kw.get("context_length")
    if patch and isinstance(ctx, int) and ctx % patch:
        kw["context_length"] = 2 * patch


def _fit_audio_window(kw: dict, defaults: dict) -> None:
    """An audio encoder of windows (qwen-omni: 2 x n_window frames, halved by its convolutions) embeds
    the positions of a window: as many as n_window, whatever the tiny positions."""
    window = kw.get("n_window", defaults.get("n_window"))
    if isinstance(window, int) and isinstance(kw.get("max_source_positions"), int) and kw["max_source_positions"] < window:
        kw["max_source_positions"] = window


def _depth_cut(kw: dict, defaults: dict) -> dict:
    """The full-size depths the tiny kwargs cut: {full depth: tiny depth}."""
    return {defaults[n]: kw[n] for n in LAYER_NAMES
            if isinstance(defaults.get(n), int) and isinstance(kw.get(n), int) and kw[n] < defaults[n]}


def _kinds_kept(types: list, n: int) -> list:
    """The first ``n`` of a per-layer list of types, with every kind of layer the full list has
    kept where ``n`` allows (a hybrid's one full-attention layer in four: configs validate that
    there is one): each kind missing takes the place of a repeated kind, from the end."""
    out = types[:n]
    for kind in dict.fromkeys(types):
        if kind in out:
            continue
        i = next((i for i in range(len(out) - 1, -1, -1) if out.count(out[i]) > 1), None)
        if i is None:
            break
        out[i] = kind
    return out


def fitted_config(cfg_cls, kwargs: dict):
    """``cfg_cls(**kwargs)`` with the ``_fit_*`` fits applied, then validated: transformers' strict
    configs validate at construction (mrope sections that sum to the head's rotary half, token ids
    inside the vocabulary), before a fit could cut the full-size value that fails; construction
    runs with validation held back, and the fitted config (and each sub-config) is validated as
    construction would have, raising what it raises."""
    held = _hold_validation()
    try:
        cfg = cfg_cls(**kwargs)
    finally:
        for c, v in held:
            c.validate = v
    _fit_special_ids(cfg)
    _fit_pad(cfg)
    _fit_mrope(cfg)
    _fit_sliding_window(cfg)
    _fit_pinpoints(cfg)
    _fit_feature_layers(cfg)
    for c in _configs(cfg):
        validate = getattr(c, "validate", None)
        if callable(validate):
            validate()
    return cfg


def _hold_validation() -> list:
    """Each loaded strict config class's ``validate`` replaced by a no-op; returns (class, the
    original) to put back."""
    from transformers.configuration_utils import PreTrainedConfig

    held, todo = [], [PreTrainedConfig]
    while todo:
        c = todo.pop()
        todo.extend(c.__subclasses__())
        if "validate" in vars(c):
            held.append((c, vars(c)["validate"]))
            c.validate = _no_validation
    return held


def _no_validation(self) -> None:
    return None


def _defaults(cfg_cls) -> dict:
    """The config's default attribute values (empty when its defaults do not build)."""
    try:
        return dict(vars(cfg_cls()))
    except Exception:  # a config whose defaults raise (a required argument): no defaults
        return {}


def sub_config_specs(cfg_cls) -> dict:
    """{key: spec} of a composite config's sub-configs: each spec's ``model_type``,
    ``config_class`` and ``init_kwargs`` (the sizes the composite gives its sub-config by default).
    transformers' own ``sub_configs_defaults`` where the release has them; older 5.x releases
    (5.5) name only ``sub_configs``, so the specs are read off the composite's default instance:
    each sub-config it made, and the values it set that differ from the sub-config's class
    defaults (Llava's CLIP tower: 24 layers of 1024, not CLIP's 12 of 768). Without this, every
    sub-config kept its full size there and most multimodal models ran out of memory."""
    specs = getattr(cfg_cls, "sub_configs_defaults", None)
    if specs:
        return dict(specs)
    return specs_read_off(cfg_cls, getattr(cfg_cls, "sub_configs", None) or {})


def specs_read_off(cfg_cls, keys) -> dict:
    """``sub_config_specs`` read off ``cfg_cls()``'s sub-configs ``keys``."""
    from types import SimpleNamespace

    from transformers.configuration_utils import PreTrainedConfig

    if not keys:
        return {}
    try:
        default = cfg_cls()
    except Exception:  # a composite whose defaults raise: no sub-config to read
        return {}
    out = {}
    for key in keys:
        sub = getattr(default, key, None)
        if not isinstance(sub, PreTrainedConfig):  # optional (None) or not a config
            continue
        own = _defaults(type(sub))
        init = {k: v for k, v in vars(sub).items()
                if not k.startswith("_") and k in own and own[k] != v and not isinstance(v, PreTrainedConfig)}
        out[key] = SimpleNamespace(config_class=type(sub), model_type=getattr(sub, "model_type", None),
                                   init_kwargs=init)
    return out


def _sub_config_class(spec):
    from transformers.configuration_utils import PreTrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cls = getattr(spec, "config_class", None)
    if isinstance(cls, type) and issubclass(cls, PreTrainedConfig):
        return cls
    try:
        return CONFIG_MAPPING[spec.model_type]
    except Exception:  # a model type the mapping lacks or cannot import: no config class
        return None


def _sub(cfg, *names):
    """The first of cfg's sub-configs ``names`` that exists, else cfg itself."""
    for n in names:
        sub = getattr(cfg, n, None)
        if sub is not None and not isinstance(sub, (dict, str)):
            return sub
    return cfg


def _size(value, default: int = 64) -> tuple[int, int]:
    if isinstance(value, (list, tuple)) and len(value) >= 2:
        return int(value[0]), int(value[1])
    if isinstance(value, dict):
        return int(value.get("height", default)), int(value.get("width", default))
    return (int(value), int(value)) if isinstance(value, int) else (default, default)


def _token(cfg, *names) -> Optional[int]:
    for holder in _holders(cfg):
        for n in names:
            v = getattr(holder, n, None)
            if isinstance(v, int):
                return v
    return None


def _holders(cfg) -> list:
    """The config and its text/decoder sub-configs, each once: where token ids live."""
    out = []
    vlm = _sub(cfg, "vlm_config")  # a retrieval head around a whole vision-language model (colpali)
    for h in (cfg, _sub(cfg, "text_config"), _sub(cfg, "decoder"), _sub(cfg, "text_encoder"), _sub(cfg, "encoder"),
              vlm, _sub(vlm, "text_config")):
        if all(h is not o for o in out):
            out.append(h)
    return out


def _is_token_attr(attr: str) -> bool:
    return attr.endswith(("_token_id", "_token_index", "_token_ids"))


def _fit_special_ids(cfg) -> None:
    """Special token ids (pad/bos/eos, image/video/audio placeholders) of the full-size vocabulary
    would index past the tiny one: each id at or past it is moved to a distinct id at its top
    (the same id the same new one in every sub-config, so an image token stays one token)."""
    text_vocab = getattr(_sub(cfg, "text_config", "decoder"), "vocab_size", None)
    moved: dict[int, int] = {}
    holders = _holders(cfg)
    own = [c for c in _configs(cfg) if isinstance(vars(c).get("vocab_size"), int)]  # a CTC head's classes
    for holder in holders + [c for c in own if all(c is not h for h in holders)]:
        vocab = getattr(holder, "vocab_size", None)
        vocab = vocab if isinstance(vocab, int) else text_vocab
        if not isinstance(vocab, int) or vocab < 8:
            continue
        for attr, val in list(vars(holder).items()):
            if not _is_token_attr(attr):
                continue
            vals = val if isinstance(val, list) else [val]
            if not all(isinstance(v, int) for v in vals) or all(v < vocab for v in vals):
                continue
            for v in vals:
                if v >= vocab and v not in moved:
                    moved[v] = vocab - 1 - len(moved)
            new = [moved.get(v, v) if v >= vocab else v for v in vals]
            try:
                setattr(holder, attr, new if isinstance(val, list) else new[0])
            except Exception:
                pass  # a read-only property derives it


def image_token_names(cfg) -> tuple:
    """The names of a config's image placeholder: its image token's, or where it has none (instructblip-video,
    whose images are a video's frames) its video token's."""
    image, video = ("image_token_id", "image_token_index"), ("video_token_id", "video_token_index")
    held = {n for h in _holders(cfg) for n in vars(h)}
    return video if held.isdisjoint(image) and not held.isdisjoint(video) else image


def _fit_placeholder(cfg, attrs: tuple = ("image_token_id", "image_token_index")) -> list:
    """A config that names an image placeholder but leaves it unset (blip-2: the processor adds it
    to the vocabulary) cannot find its image in the tokens: an id at the top of the tiny
    vocabulary that no other special token holds becomes the placeholder. Returns the
    (config, attribute) set, for a model that then fails with its image to run on text alone.
    ``attrs``: the audio placeholder's names for audio (voxtral leaves its own unset too)."""
    for holder in _holders(cfg):
        for attr in attrs:
            if attr in vars(holder) and getattr(holder, attr) is None:
                vocab = getattr(_sub(cfg, "text_config", "decoder"), "vocab_size", None) or VOCAB
                taken = _special_ids(cfg)
                try:
                    setattr(holder, attr, next(i for i in range(vocab - 1, 0, -1) if i not in taken))
                except Exception:  # a read-only property derives it
                    return []
                return [(holder, attr)]
    return []


_LACKS = re.compile(r"'(\w+)' object has no attribute '(\w+)'")


def fit_lacking(exc: BaseException, cfg) -> bool:
    """A model that reads an attribute its config class does not define (a checkpoint's config
    carries it: moonshine-streaming's num_key_value_heads, nemotron-omni's audio
    projection_hidden_size) gets it: another config's value of that name, else the tiny size of a
    name the generic tables know (key/value heads as many as the heads), a free id for a token, the
    config's width for a width, a bias for a layer's bias flag. Whether it was set."""
    m = _LACKS.search(str(exc)) if isinstance(exc, AttributeError) else None
    holder = next((c for c in _configs(cfg) if m and type(c).__name__ == m.group(1)), None)
    if holder is None or m.group(2).startswith("_"):
        return False
    name = m.group(2)
    known = dict(MOE, **{n: v for v, names in GENERIC + GENERIC_MORE for n in names})
    value = next((vars(c)[name] for c in _configs(cfg) if name in vars(c)), None)
    if value is None and name == "num_key_value_heads":
        value = getattr(holder, "num_attention_heads", None)
    if value is None:
        value = known.get(name)
    if value is None and _is_token_attr(name):
        vocab = getattr(holder, "vocab_size", None) or getattr(_sub(cfg, "text_config"), "vocab_size", None) or VOCAB
        taken = _special_ids(cfg)
        value = next((i for i in range(vocab - 1, 0, -1) if i not in taken), None)
    if value is None and WIDTH.search(name):
        value = getattr(holder, "hidden_size", None) or HIDDEN
    if value is None and name.endswith("_bias"):
        value = True  # whether a layer has a bias: a linear layer's default
    if value is None:
        return False
    try:
        setattr(holder, name, value)
    except Exception:  # a read-only property derives it
        return False
    return True


def _fit_pad(cfg) -> None:
    """A config with no pad token (llama, falcon) cannot pool a padded batch of 2 for sequence
    classification: id 0, which random ids avoid (``class_inputs``), pads."""
    for holder in _holders(cfg):
        if "pad_token_id" in vars(holder) and holder.pad_token_id is None and isinstance(
                getattr(holder, "vocab_size", None), int):
            try:
                holder.pad_token_id = 0
            except Exception:  # a read-only property derives it
                pass


def _configs(cfg) -> list:
    """The config and every sub-config under it, each once."""
    from transformers.configuration_utils import PreTrainedConfig

    out, todo = [], [cfg]
    while todo:
        c = todo.pop()
        if isinstance(c, PreTrainedConfig) and all(c is not o for o in out):
            out.append(c)
            todo.extend(v for v in vars(c).values() if isinstance(v, PreTrainedConfig))
    return out


def _fit_mrope(cfg) -> None:
    """Multimodal rope (qwen-vl, glm-4v and kin) splits each head's rotary half into (time, height,
    width) sections; the full-size sections (or the modeling code's default when the config has
    none) sum past the tiny head's: the sections are set to the tiny rotary half, split evenly."""
    for c in _configs(cfg):
        rope = getattr(c, "rope_parameters", None)
        if isinstance(rope, dict) and rope and all(isinstance(v, dict) for v in rope.values()):
            rope = None  # rope per layer type (cohere-compass): no multimodal sections of its own
        if not isinstance(rope, dict) or "mrope_section" not in (
                set(getattr(type(c), "ignore_keys_at_rope_validation", None) or ()) | set(rope)):
            continue
        heads = getattr(c, "num_attention_heads", None)
        dim = (getattr(c, "qk_rope_head_dim", None) or getattr(c, "head_dim", None)
               or (c.hidden_size // heads if isinstance(heads, int) and heads else None))
        if not isinstance(dim, int):
            continue
        half = int(dim * (rope.get("partial_rotary_factor") or getattr(c, "partial_rotary_factor", None) or 1.0)) // 2
        section = rope.get("mrope_section")
        if isinstance(section, (list, tuple)) and sum(section) == half:
            continue
        rope["mrope_section"] = mrope_sections(half, len(section) if isinstance(section, (list, tuple)) else 3)


def mrope_sections(half: int, n: int = 3) -> list[int]:
    """``half`` rotary frequencies in ``n`` sections as even as can be, the larger first."""
    return [half // n + (i < half % n) for i in range(n)]


def _special_ids(cfg) -> set:
    ids: set = set()
    for holder in _holders(cfg):
        for attr, val in vars(holder).items():
            if _is_token_attr(attr):
                ids.update(v for v in (val if isinstance(val, list) else [val]) if isinstance(v, int))
    return ids


def _tuples_to_lists(cfg) -> bool:
    """Every tuple of numbers a config (or sub-config) holds as a list; whether any was."""
    changed = False
    for c in _configs(cfg):
        for attr, val in list(vars(c).items()):
            if isinstance(val, tuple) and val and all(isinstance(v, (int, float)) for v in val):
                try:
                    setattr(c, attr, list(val))
                    changed = True
                except Exception:  # a read-only property derives it
                    pass
    return changed


def _fit_sliding_window(cfg) -> None:
    """A config that types its layers but sets no sliding window (step3p7's default is None)
    cannot build the window's mask, which some models build whatever the types: a window of 8
    tokens, inside the tiny batch (a layer typed full attention ignores it)."""
    for c in _configs(cfg):
        types = getattr(c, "layer_types", None)
        # read as stored: a heterogeneous config (neo-mme) refuses to read a per-layer attribute globally
        if isinstance(types, (list, tuple)) and "sliding_window" in vars(c) and vars(c)["sliding_window"] is None:
            try:
                c.sliding_window = 8
            except Exception:  # a read-only property derives it
                pass


def _pinpoints(cfg) -> list:
    """The (height, width) resolutions a llava-next-like ("anyres") config tiles an image to; [] for none."""
    pins = getattr(cfg, "image_grid_pinpoints", None)
    ok = isinstance(pins, (list, tuple)) and pins and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, int) and v > 0 for v in p) for p in pins)
    return [list(p) for p in pins] if ok else []


def _fit_pinpoints(cfg) -> None:
    """Anyres resolutions are multiples of the full-size vision tower's image size (336: 336 x 672, ...),
    each multiple a tile: the same multiples of the tiny tower's image size (64 x 128, ...)."""
    import math

    pins = _pinpoints(cfg)
    side = _size(getattr(_sub(cfg, "vision_config"), "image_size", None))[0]
    if not pins:
        return
    unit = math.gcd(*(v for p in pins for v in p))
    if unit == side:
        return
    try:
        cfg.image_grid_pinpoints = [[v // unit * side for v in p] for p in pins]
    except Exception:  # a read-only property derives it
        pass


def _fit_feature_layers(cfg) -> None:
    """The vision layers whose states a composite takes (vipllava's -2, -5, -8, -11, 6 of 24) may lie past the
    tiny tower's depth: each such index is taken modulo its hidden states (the layers and the embeddings),
    the list as long as before (the projector's width counts its layers)."""
    depth = getattr(_sub(cfg, "vision_config"), "num_hidden_layers", None)
    layers = getattr(cfg, "vision_feature_layer", None)
    if not isinstance(depth, int) or not isinstance(layers, (list, tuple)) \
            or all(-depth - 1 <= i <= depth for i in layers):
        return
    try:
        cfg.vision_feature_layer = [i if -depth - 1 <= i <= depth else i % (depth + 1) for i in layers]
    except Exception:  # a read-only property derives it
        pass
