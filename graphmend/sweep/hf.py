"""transformers: which model classes a sweep runs, and how each is built tiny.

Enumeration (parent side, imports transformers' auto mappings, not the models): every
class any ``MODEL_*_MAPPING_NAMES`` maps a model type to (base models and every task head),
with the modality its tasks serve (``enumerate_classes``). A class is built by
``build_class``: its own config class, shrunk (sub-configs too), random weights, and inputs
of its modality chosen by its forward's signature (``class_inputs``).

The older unit is a model type (``--only bert``): its base model on a token batch
(``build``). An architecture is *text*
when its model type has a base model (``MODEL_MAPPING_NAMES``), a head of a text task
(causal / masked / seq2seq LM, sequence / token classification, question answering,
multiple choice, text encoding, next-sentence prediction), no entry in any mapping of
another modality (image, audio, video, speech, vision, depth, detection, segmentation,
time series, document, multimodal, ...), and a config with no audio, vision or text
sub-config (a composite of several models).

Building (worker side, inside the generated target): the config class with generic tiny
sizes (vocab 1000, hidden 64, 4 heads, 2 layers, FFN 128) for the parameters its
``__init__`` names, plus the per-architecture overrides in ``OVERRIDES`` where the generic
build fails (learnt from benchmarks/survey_hf.py); random weights, never a download; a
batch of 2 sequences, the second right-padded. The model then runs once eagerly: a model
that cannot be built, or whose eager forward rejects the batch, raises ``NotBuilt`` with
a one-line reason, and the sweep reports it as not built.

The tiny config (its sizes, the fitting of a built config) and ``class_inputs`` are in
``graphmend.sweep.hf_config``; this module runs them.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Optional

from graphmend.core.worker import describe  # an exception in one line, as every worker says it
from graphmend.sweep.building import NotBuilt
# the batch a class runs on, the tiny config and the fitting of a built one: in their own modules
from graphmend.sweep.hf_batch import B, POSITION_MASK, SEQ, _grid, _placeholder_counts, class_inputs
from graphmend.sweep.hf_config import (_configs, _fit_placeholder, _token, _tuples_to_lists, config_kwargs, fit_lacking,
                                       fitted_config, image_token_names, tiny_config_kwargs)
# inputs a forward documents, and the layout variants tried when the derived inputs fail
from graphmend.sweep.hf_inputs import VARIANTS, documented_inputs, documented_shape, named_missing, required
# the tiny sizes and the per-architecture overrides (OVERRIDES, CLASS_OVERRIDES): tables, in their own module
from graphmend.sweep.hf_overrides import CLASS_OVERRIDES, HEADS, OVERRIDES, VOCAB


# the heads of text tasks (MODEL_FOR_<TASK>_MAPPING_NAMES)
TEXT_TASKS = ("CAUSAL_LM", "MASKED_LM", "SEQ_TO_SEQ_CAUSAL_LM", "SEQUENCE_CLASSIFICATION", "TOKEN_CLASSIFICATION",
              "QUESTION_ANSWERING", "MULTIPLE_CHOICE", "TEXT_ENCODING", "NEXT_SENTENCE_PREDICTION")
# a mapping whose task name has one of these words serves another modality
OTHER_MODALITY = re.compile(r"IMAGE|AUDIO|VIDEO|VISION|VISUAL|SPEECH|CTC|SPECTROGRAM|WAVEFORM|DEPTH|DETECTION|"
                            r"SEGMENTATION|KEYPOINT|POSE|TIME_SERIES|DOCUMENT|MULTIMODAL|MASK_GENERATION|MATTING|"
                            r"XVECTOR|NORMAL_ESTIMATION|POINTMAP|RNNT|TDT|TABLE_RECOGNITION|TEXT_RECOGNITION|BACKBONE")
COMPOSITE = re.compile(r"audio|vision|image|speech|video|text_config")


def version() -> str:
    import transformers

    return transformers.__version__


SELECTION = ("every model class in the auto mappings of transformers (base models and every task head, "
             "every modality)")
_CLASSES: dict[str, dict] = {}


def _classes() -> dict[str, dict]:
    if not _CLASSES:
        _CLASSES.update((u["class"], u) for u in enumerate_classes())
    return _CLASSES


def enumerate_models() -> tuple[list[str], dict[str, str]]:
    """Every class of ``enumerate_classes``, in mapping order; none skipped (a class transformers
    lists but cannot build is a row ``not built`` with why)."""
    return list(_classes()), {}


def modality(name: str) -> str:
    """A class's modality (its tasks'); a model type (``--only bert``) is built on tokens: text."""
    unit = _classes().get(name) if is_class(name) else None
    return unit["modality"] if unit else "text"


def accepts(name: str) -> bool:
    """--only also takes a model type (``bert``): its base model on a token batch (``build``)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return not is_class(name) and name in CONFIG_MAPPING_NAMES


def enumerate_text() -> tuple[list[str], dict[str, str]]:
    """(the text architectures' model types in mapping order, {model type: why it is not text}
    for every other model type that has a config)."""
    from transformers.models.auto import modeling_auto as M
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    text: set[str] = set()
    for task in TEXT_TASKS:
        text.update(getattr(M, f"MODEL_FOR_{task}_MAPPING_NAMES", {}))
    other: dict[str, str] = {}
    for name in dir(M):
        if name.startswith("MODEL_FOR_") and name.endswith("_MAPPING_NAMES") and OTHER_MODALITY.search(name):
            for t in getattr(M, name):
                other.setdefault(t, name[len("MODEL_FOR_"):-len("_MAPPING_NAMES")].lower())
    keep, skipped = [], {}
    for t in CONFIG_MAPPING_NAMES:
        if t not in M.MODEL_MAPPING_NAMES:
            skipped[t] = "no base model (AutoModel)"
        elif t not in text:
            skipped[t] = "no text-task head"
        elif t in other:
            skipped[t] = f"serves another modality ({other[t]})"
        else:
            try:
                subs = getattr(CONFIG_MAPPING[t], "sub_configs", None) or {}
            except Exception as exc:  # a config class that does not import
                skipped[t] = f"config does not import: {type(exc).__name__}"
                continue
            composite = [k for k in subs if COMPOSITE.search(k)]
            if composite:
                skipped[t] = f"composite config ({', '.join(composite)})"
            else:
                keep.append(t)
    return keep, skipped


def build(model_type: str, from_config: Optional[dict] = None,
          override: Optional[tuple[dict, dict]] = None) -> tuple[Any, dict]:
    """The tiny model (eval) and its keyword inputs; ``NotBuilt`` with why not.
    ``from_config``: what ``AutoModel.from_config`` takes besides the config
    (``experts_implementation="eager"``); ``override``: (config kwargs, options) in place of
    ``OVERRIDES``' (benchmarks/survey_hf.py keeps its own table, for older transformers too).

    Two generic second tries, each taken only when the first build fails: attention with as
    many key/value heads as query heads (some architectures refuse grouped-query attention,
    latent attention needs it), and ``use_cache=False`` (hybrid models whose cache has no
    attention layer to count). The reason reported is the first failure's."""
    try:
        import transformers  # noqa: F401
    except Exception as exc:
        raise NotBuilt(f"transformers does not import: {describe(exc)}") from None
    extra, opts = override if override is not None else OVERRIDES.get(model_type, ({}, {}))
    return _first_built(extra, lambda kwargs: _build(model_type, kwargs, opts, from_config or {}))


def _first_built(extra: dict, make):
    """``make(extra)``, else ``make`` with as many key/value heads as attention heads (a
    grouped-attention default that the tiny head count does not divide); NotBuilt with the
    first failure's reason when neither builds."""
    tries = [extra] + ([{**extra, "num_key_value_heads": HEADS}] if "num_key_value_heads" not in extra else [])
    first: Optional[NotBuilt] = None
    for kwargs in tries:
        try:
            return make(kwargs)
        except NotBuilt as exc:
            first = first or exc
    assert first is not None
    raise first


def _build(model_type: str, extra: dict, opts: dict, from_config: dict) -> tuple[Any, dict]:
    import torch
    import transformers as T
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    try:
        cfg_cls = CONFIG_MAPPING[model_type]
        cfg = cfg_cls(**config_kwargs(cfg_cls, extra))
    except Exception as exc:
        raise NotBuilt(f"config: {describe(exc)}") from None
    # special token ids beyond the tiny vocabulary would index out of the embedding
    for attr in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id"):
        val = getattr(cfg, attr, None)
        if isinstance(val, int) and val >= VOCAB:
            setattr(cfg, attr, 2)
    torch.manual_seed(0)
    try:
        names = MODEL_MAPPING_NAMES.get(model_type)
        if isinstance(names, (tuple, list)):  # e.g. funnel: AutoModel would need config.architectures
            model = getattr(T, names[0])(cfg)
        else:
            model = T.AutoModel.from_config(cfg, **from_config)
        model.eval()
    except Exception as exc:
        raise NotBuilt(f"model: {describe(exc)}") from None
    seq, pad_from = opts.get("seq", 16), opts.get("pad_from", 10)
    ids = torch.randint(5, VOCAB, (2, seq))
    mask = torch.ones(2, seq, dtype=torch.long)
    mask[1, pad_from:] = 0  # the second sequence is right-padded
    inputs = {"input_ids": ids, "attention_mask": mask}
    if getattr(cfg, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = ids[:, :8]
    if opts.get("extra") == "global_attention":
        glob = torch.zeros_like(mask)
        glob[:, 0] = 1
        inputs["global_attention_mask"] = glob
    try:
        accepted = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        accepted = {}
    if accepted and not any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
        inputs = {k: v for k, v in inputs.items() if k in accepted}
    # one eager call: a batch the model rejects is a build problem, not a compile one
    try:
        with torch.no_grad():
            model(**inputs)
    except Exception as exc:
        if "use_cache" not in accepted and not any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
            raise NotBuilt(f"eager forward: {describe(exc)}") from None
        try:
            with torch.no_grad():
                model(**inputs, use_cache=False)
        except Exception:  # the retry without a cache fails too: the first failure is the reason
            raise NotBuilt(f"eager forward: {describe(exc)}") from None
        inputs["use_cache"] = False
    return model, inputs


def target(unit: str) -> tuple[Any, tuple, dict]:
    """What a generated ``mend_target_*`` returns: ``(model, (), inputs)``, for a class name
    (``build_class``) or a model type (``build``)."""
    model, inputs = build_class(unit) if is_class(unit) else build(unit)
    return model, (), inputs


# -- every class, every modality -------------------------------------------------------------

# A task mapping's modality, first match wins (MODEL_FOR_<TASK>_MAPPING_NAMES); a class in
# mappings of several modalities takes the first of MODALITIES that it serves.
MODALITIES = ("video", "time series", "multimodal", "audio", "vision", "tabular", "reinforcement", "text")
TASK_MODALITY = [
    ("video", re.compile(r"VIDEO")),
    ("time series", re.compile(r"TIME_SERIES")),
    ("multimodal", re.compile(r"IMAGE_TEXT|MULTIMODAL|VISUAL_QUESTION|ZERO_SHOT|DOCUMENT|TEXT_RECOGNITION|"
                              r"TABLE_RECOGNITION|RETRIEVAL")),
    ("audio", re.compile(r"AUDIO|CTC|SPEECH|SPECTROGRAM|WAVEFORM|RNNT|TDT")),
    ("vision", re.compile(r"IMAGE|DEPTH|DETECTION|SEGMENTATION|KEYPOINT|POSE|MASK_GENERATION|MATTING|BACKBONE|"
                          r"NORMAL_ESTIMATION|POINTMAP")),
    ("tabular", re.compile(r"TABLE_QUESTION")),
    ("reinforcement", re.compile(r"DECISION")),
]
GENERAL_TASKS = ("", "PRETRAINING")  # the base model and pre-training heads: the model type's modality


def task_modality(task: str) -> Optional[str]:
    """The modality a task mapping serves; None for the base model and pre-training heads."""
    if task in GENERAL_TASKS:
        return None
    return next((m for m, rx in TASK_MODALITY if rx.search(task)), "text")


def enumerate_classes() -> list[dict]:
    """Every class the auto mappings name, in mapping order (the base models first), each
    ``{"class", "model_type", "modality", "tasks"}``. Imports no model module: a class that
    transformers lists but does not export is enumerated, and is not built."""
    from transformers.models.auto import modeling_auto as M
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    names = ["MODEL_MAPPING_NAMES"] + sorted(n for n in dir(M) if n.startswith("MODEL_FOR_")
                                               and n.endswith("_MAPPING_NAMES"))
    found: dict[str, dict] = {}
    type_modalities: dict[str, set] = {}
    for name in names:
        task = name[len("MODEL_FOR_"):-len("_MAPPING_NAMES")] if name.startswith("MODEL_FOR_") else ""
        modality = task_modality(task)
        for model_type, value in getattr(M, name).items():
            for cls in (value if isinstance(value, (list, tuple)) else [value]):
                unit = found.setdefault(cls, {"class": cls, "model_type": model_type, "modalities": set(),
                                              "tasks": []})
                unit["tasks"].append(task.lower() or "base")
                if modality:
                    unit["modalities"].add(modality)
                    type_modalities.setdefault(model_type, set()).add(modality)
    out = []
    for unit in found.values():
        mods = unit.pop("modalities") or type_modalities.get(unit["model_type"], set())
        if not mods:  # a type with only a base model: its config says what it takes
            mods = {_config_modality(CONFIG_MAPPING_NAMES.get(unit["model_type"], ""), unit["model_type"])}
        unit["modality"] = next(m for m in MODALITIES if m in mods)
        out.append(unit)
    return out


def _config_modality(config_name: str, model_type: str = "") -> str:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:  # a composite of a text model and a vision or audio one (clip-like, aimv2)
        subs = " ".join(getattr(CONFIG_MAPPING[model_type], "sub_configs", None) or {})
    except Exception:  # a model type the mapping lacks or cannot import: no sub-configs
        subs = ""
    if "text" in subs and re.search(r"vision|image|audio|speech", subs):
        return "multimodal"
    low = config_name.lower()
    for word, modality in (("video", "video"), ("timeseries", "time series"), ("audio", "audio"),
                           ("speech", "audio"), ("vision", "vision"), ("image", "vision")):
        if word in low:
            return modality
    return "text"


_MISMATCH = re.compile(r"tokens:? *(\d+),? *features:? *(\d+)", re.I)


def build_class(name: str, from_config: Optional[dict] = None) -> tuple[Any, dict]:
    """The tiny model of class ``name`` (eval) and its keyword inputs, after one eager forward;
    ``NotBuilt`` with why not. Generic second tries as ``build``'s (as many key/value heads as
    query heads, in every sub-config; ``use_cache=False``), one for image or audio placeholders
    (a model that counts its features and says how many tokens it expected gets that many), each
    layout variant (``VARIANTS``), audio padded to the whole hops a failure names, and, where
    the config left its image or audio placeholder unset and the model fails with one filled in,
    the text alone as before. The config is validated after it is fitted (``fitted_config``)."""
    try:
        import transformers as T
    except Exception as exc:
        raise NotBuilt(f"transformers does not import: {describe(exc)}") from None
    try:
        cls = getattr(T, name)
    except Exception as exc:
        raise NotBuilt(f"class: {describe(exc)}" if not isinstance(exc, AttributeError)
                       else f"class: transformers exports no {name}") from None
    cfg_cls = getattr(cls, "config_class", None)
    if cfg_cls is None:
        raise NotBuilt("class: no config_class")
    extra, _ = OVERRIDES.get(getattr(cfg_cls, "model_type", ""), ({}, {}))
    extra = {**extra, **CLASS_OVERRIDES.get(name, ({}, ""))[0]}
    return _first_built(extra, lambda kwargs: _build_class(cls, cfg_cls, kwargs, from_config or {}))


def _build_class(cls, cfg_cls, extra: dict, from_config: dict) -> tuple[Any, dict]:
    try:
        cfg = fitted_config(cfg_cls, tiny_config_kwargs(cfg_cls, extra))
    except Exception as exc:  # a strict config's validator error says why in its cause
        why = exc.__cause__ if type(exc).__name__.startswith("StrictDataclass") and exc.__cause__ else exc
        raise NotBuilt(f"config: {describe(why)}") from None
    model = _fitted_model(cls, cfg, from_config)
    try:
        accepted = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        accepted = {}
    filled = _fit_placeholder(cfg, image_token_names(cfg)) if "pixel_values" in accepted and "input_ids" in accepted \
        else []
    if "input_ids" in accepted and ("input_features" in accepted or "input_values" in accepted):
        filled += _fit_placeholder(cfg, ("audio_token_id", "audio_token_index"))
    # a model that copied the unset placeholder when it was built (nemotron-omni's image_token_id) takes it too
    for holder, attr in list(filled):
        for m in model.modules():
            if attr in vars(m) and vars(m)[attr] is None:
                setattr(m, attr, getattr(holder, attr))
                filled.append((m, attr))
    try:
        return model, _fitted_run(model, cfg, accepted)
    except Exception as exc:
        if not filled:
            raise NotBuilt(f"eager forward: {describe(exc)}") from None
        first = exc
    for holder, attr in filled:  # the placeholder the config left unset, unset again: text alone
        setattr(holder, attr, None)
    try:
        return model, _fitted_run(model, cfg, accepted)
    except Exception:  # on its text alone too: the failure with the placeholder filled is the reason
        raise NotBuilt(f"eager forward: {describe(first)}") from None


FITS = 4  # attributes a model may read that its config lacks (``fit_lacking``), one a retry


def _fitted_model(cls, cfg, from_config: dict):
    """``_model``, again after each failure a fit of the config answers: a tuple default the model
    concatenates to a list (convnextv2's hidden_sizes; a config read from a checkpoint's JSON holds
    lists), an attribute the model reads that the config lacks (``fit_lacking``). NotBuilt with the
    first failure's reason when no fit helps."""
    first: Optional[Exception] = None
    for _ in range(FITS + 1):
        try:
            return _model(cls, cfg, from_config)
        except Exception as exc:
            first = first or exc
            if not (("(not \"tuple\")" in str(exc) and _tuples_to_lists(cfg)) or fit_lacking(exc, cfg)):
                break
    raise NotBuilt(f"model: {describe(first)}") from None


def _fitted_run(model, cfg, accepted) -> dict:
    """``_run``, again after each failure that names an attribute the config lacks (``fit_lacking``)."""
    for _ in range(FITS):
        try:
            return _run(model, cfg, accepted)
        except AttributeError as exc:
            if not fit_lacking(exc, cfg):
                raise
    return _run(model, cfg, accepted)


def _run(model, cfg, accepted) -> dict:
    """The inputs ``model`` ran on eagerly (``class_inputs``, then each layout variant, with as
    many image placeholders as a failure names); the first failure when none runs."""
    image_tokens = 0
    # image placeholders: an image token's, or (kosmos-2) the positions a mask marks for the image's latents
    if "pixel_values" in accepted and "input_ids" in accepted and (
            _token(cfg, *image_token_names(cfg)) or POSITION_MASK in accepted):
        image_tokens = (getattr(cfg, "image_seq_length", None) or getattr(cfg, "mm_tokens_per_image", None)
                        or getattr(cfg, "num_query_tokens", None) or getattr(cfg, "latent_query_num", None) or 1)
    if ("image_grid_thw" in accepted or "image_grid_hw" in accepted) and "input_ids" in accepted:
        image_tokens = _grid(cfg)[1]
    audio_tokens = 1
    first: Optional[Exception] = None
    tried = {(image_tokens, audio_tokens)}
    configs = _configs(cfg)
    alias = _main_alias(model, accepted)
    if alias:  # the modality's input is derived under the model's main input's name, passed under the forward's
        accepted = {**accepted, alias[1]: accepted[alias[0]]}
    for _ in range(4):
        inputs = class_inputs(model, cfg, accepted, image_tokens, audio_tokens)
        for key in ("input_ids", "decoder_input_ids"):
            rows = documented_shape(model, configs, key, B) if key in inputs else None
            if rows and rows[1][0] != B and rows[1][0] % B == 0:  # musicgen: a row a codebook, (batch x codebooks, seq)
                inputs[key] = inputs[key].repeat_interleave(rows[1][0] // B, 0)
            # a decoder of audio codes (dia): (batch, seq, codebooks); not the text (splinter documents choices)
            elif rows and key == "decoder_input_ids" and len(rows[1]) == 3 and rows[1][0] == B and inputs[key].dim() == 2:
                inputs[key] = inputs[key].unsqueeze(-1).repeat(1, 1, rows[1][2])
        # what the forward requires and the modality does not say (a decoder's latents): as documented
        inputs.update(documented_inputs(model, configs, required(accepted, inputs), B, inputs))
        errors: list[Exception] = []
        # the inputs as derived, then each layout variant the modality is known in
        candidates = ([inputs] + _variants(inputs, accepted) + _as_hidden_states(inputs, cfg, accepted)
                      + _merged_patches(inputs, model, configs) + _documented_patches(model, cfg, configs, inputs)
                      + _patch_rows(inputs, cfg))
        grown = [inputs]  # the derived inputs and those grown from them by what failures named
        for i, variant in enumerate(candidates):
            try:
                ran = _renamed(variant, alias)
                _eager(model, ran, accepted)
                return ran
            except _Retry as retry:
                return retry.inputs
            except Exception as exc:
                errors.append(exc)
                named = {}
                if any(variant is g for g in grown) and len(grown) < 4:
                    named = documented_inputs(model, configs, named_missing(exc, accepted, variant), B, variant)
                if named:  # an argument the failure names (`visual_feats` cannot be None), as documented, next
                    grown.append({**variant, **named})
                    candidates.insert(i + 1, grown[-1])
                longer = (_frames_per_token(exc, variant) or _streams_per_token(exc, variant)
                          or _padded_to_multiple(exc, variant)) if i == 0 else None
                longer = longer or _stacked_frames(exc, variant)
                if longer is not None:
                    candidates.insert(i + 1, longer)
        first = first or errors[0]
        # the placeholder count any layout's failure names (the derived one may fail earlier): of audio
        # placeholders where it says audio, else of image ones
        m = next((m for m in map(_MISMATCH.search, map(str, errors)) if m), None)
        counts = _placeholder_counts(int(m.group(2)), cfg) if m else []
        sound = m is not None and "audio" in m.string.lower()
        nxt = next((c for c in [(image_tokens, n) if sound else (n, audio_tokens) for n in counts]
                    if c not in tried), None)
        if nxt is None:
            break
        image_tokens, audio_tokens = nxt
        tried.add(nxt)
    assert first is not None
    raise first


# the inputs ``class_inputs`` derives for a modality, by the model's main input name
MAIN_INPUTS = ("input_values", "input_features", "pixel_values", "input_ids")


def _main_alias(model, accepted) -> Optional[tuple[str, str]]:
    """(the forward's first argument, the model's main input), where the forward requires under
    another name (vibevoice's acoustic encoder: ``hidden_states``) the main input its class
    declares (``input_values``) and names none of the inputs of a modality; else None."""
    main = getattr(model, "main_input_name", None)
    if main not in MAIN_INPUTS or not accepted or any(n in accepted for n in MAIN_INPUTS):
        return None
    params = [(n, p) for n, p in accepted.items() if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                                                 p.KEYWORD_ONLY)]
    if not params or params[0][1].default is not params[0][1].empty:
        return None
    note = params[0][1].annotation  # a tensor, or not said; not a session (sam2-video's inference_session)
    if note is not params[0][1].empty and "Tensor" not in str(note):
        return None
    return params[0][0], main


def _renamed(x: dict, alias: Optional[tuple[str, str]]) -> dict:
    """``x`` with the main input under the forward's name for it (``_main_alias``)."""
    if not alias or alias[1] not in x:
        return x
    out = {k: v for k, v in x.items() if k != alias[1]}
    out.setdefault(alias[0], x[alias[1]])
    return out


def _as_hidden_states(x: dict, cfg, accepted) -> list[dict]:
    """A bare encoder-decoder with no pre-nets (speecht5's model) takes hidden states where its
    heads take audio: ``input_values`` (batch, frames, hidden) and ``decoder_input_values``
    (batch, frames, hidden), as its forward documents them ("... or hidden states")."""
    import torch

    v, width = x.get("input_values"), getattr(cfg, "hidden_size", None)
    if v is None or v.dim() != 2 or "decoder_input_values" not in accepted or not isinstance(width, int) \
            or not getattr(cfg, "is_encoder_decoder", False):
        return []
    out = {k: t for k, t in x.items() if k != "attention_mask"}  # the mask counted samples, not frames
    out["input_values"] = torch.randn(B, SEQ, width)
    out["decoder_input_values"] = torch.randn(B, SEQ // 2, width)
    return [out]


def _patch_rows(x: dict, cfg) -> list[dict]:
    """A model with no vision tower that embeds an image's patches itself, by one linear layer (fuyu): the image
    as rows of patches, (batch, patches, channels x patch x patch), four a sample, of the config's patch size."""
    import torch

    v, p = x.get("pixel_values"), getattr(cfg, "patch_size", None)
    if v is None or v.dim() != 4 or not isinstance(p, int) or getattr(cfg, "vision_config", None) is not None:
        return []
    return [{**x, "pixel_values": torch.randn(v.shape[0], 4, v.shape[1] * p * p)}]


def _merged_patches(x: dict, model, configs: list) -> list[dict]:
    """A grid model whose vision tower takes its patches already merged, one row a language-model token
    (inkling-2: ``(num_image_tokens, patch_size * spatial_merge_size, ..., num_channels)``, its grid counted
    in tokens): the derived patches regrouped in the shape the tower (or the model) documents, m x m a row,
    the grid's height and width divided by m."""
    import torch

    v = x.get("pixel_values")
    key = next((k for k in ("image_grid_thw", "grid_thw") if k in x), None)
    if v is None or v.dim() != 2 or key is None:
        return []
    from transformers import PreTrainedModel

    towers = [model] + [m for m in model.modules() if m is not model and isinstance(m, PreTrainedModel)]
    for tower in towers:
        doc = documented_shape(tower, configs, "pixel_values", B)
        row = int(torch.tensor(doc[1][1:]).prod()) if doc and len(doc[1]) > 2 else 0
        if not row or v.numel() % row or v.shape[0] % (v.numel() // row):
            continue
        m = round((v.shape[0] // (v.numel() // row)) ** 0.5)
        grid = x[key]
        if m > 1 and m * m * (v.numel() // row) == v.shape[0] and not (grid[:, 1:] % m).any():
            return [{**x, "pixel_values": v.reshape(-1, *doc[1][1:]), key: grid // torch.tensor([1, m, m])}]
    return []


def _documented_patches(model, cfg, configs: list, x: dict) -> list[dict]:
    """An image as the flattened patches a forward documents, ``(num_patches, 3 * patch_size ** 2)``
    (neo-mme): one patch an image placeholder of the tokens, each of the documented width. A head
    documented with the generic image shape passes the pixels on to its base model, which may say patches."""
    import torch

    v, ids = x.get("pixel_values"), x.get("input_ids")
    if v is None or v.dim() == 2:
        return []
    docs = (documented_shape(m, configs, "pixel_values", B) for m in (model, getattr(model, "base_model", model)))
    doc = next((d for d in docs if d is not None and len(d[1]) == 2), None)
    if doc is None:
        return []
    img = _token(cfg, *image_token_names(cfg))
    patches = int((ids == img).sum()) if ids is not None and isinstance(img, int) else 0
    return [{**x, "pixel_values": torch.randn(patches or doc[1][0], doc[1][1])}]


_PER_TOKEN = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                        r"dimension 1")


def _frames_per_token(exc: Exception, x: dict) -> Optional[dict]:
    """A streaming audio LM adds one audio embedding to each token (voxtral-realtime): where a failure
    says the tokens (a) and the audio embeddings (b) differ in length, the mel frames times a / b."""
    m = _PER_TOKEN.search(str(exc))
    f, ids = x.get("input_features"), x.get("input_ids")
    if m is None or f is None or ids is None or f.dim() != 3 or int(m.group(1)) != ids.shape[1]:
        return None
    a, b = int(m.group(1)), int(m.group(2))
    if b <= 0 or a % b:
        return None
    out = {**x, "input_features": f.repeat(1, 1, a // b)}
    for key in ("input_features_mask", "feature_attention_mask"):
        if key in x:
            out[key] = x[key].repeat(1, a // b)
    return out


_MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")


def _stacked_frames(exc: Exception, x: dict) -> Optional[dict]:
    """An encoder whose input layer takes k frames stacked (granite-speech 5: 4 x its mel bins, which
    its feature extractor stacks): where a failure says the time-major features' width (a) met a
    layer k x a wide, the features k frames a row, (batch, frames / k, k x a), their masks a row each."""
    m = _MATMUL.search(str(exc))
    f = x.get("input_features")
    if m is None or f is None or f.dim() != 3 or int(m.group(2)) != f.shape[-1]:
        return None
    width, frames = int(m.group(3)), f.shape[1]
    k = width // f.shape[-1]
    if k < 2 or width % f.shape[-1] or frames % k or int(m.group(1)) != f.shape[0] * frames:
        return None
    out = {**x, "input_features": f.reshape(f.shape[0], frames // k, width)}
    for key in ("input_features_mask", "feature_attention_mask", "attention_mask"):
        mask = x.get(key)
        if mask is not None and mask.dim() == 2 and mask.shape[1] == frames:
            out[key] = mask[:, ::k].contiguous()
    return out


def _streams_per_token(exc: Exception, x: dict) -> Optional[dict]:
    """A model of parallel token streams (kyutai's speech-to-text: the text and each audio codebook) takes
    ids (batch, seq, streams) and offsets each stream into its own table: where a failure says the tokens
    (a) met b offsets, the ids b a position."""
    m = _PER_TOKEN.search(str(exc))
    ids = x.get("input_ids")
    if m is None or ids is None or ids.dim() != 2 or int(m.group(1)) != ids.shape[1] or int(m.group(2)) < 2 \
            or "input_features" in x:
        return None
    return {**x, "input_ids": ids.unsqueeze(-1).repeat(1, 1, int(m.group(2)))}


_MULTIPLE = re.compile(r"`(\w+)` length (\d+) is not a multiple of (\d+)")


def _padded_to_multiple(exc: Exception, x: dict) -> Optional[dict]:
    """Audio a model takes in whole hops only ("`input_values` length 4000 is not a multiple of
    96", its feature extractor pads it): the input the failure names, zero-padded to the next multiple."""
    import torch

    m = _MULTIPLE.search(str(exc))
    v = x.get(m.group(1)) if m else None
    if v is None or v.shape[-1] != int(m.group(2)) or int(m.group(3)) <= 0:
        return None
    return {**x, m.group(1): torch.nn.functional.pad(v, (0, -v.shape[-1] % int(m.group(3))))}


def _model(cls, cfg, from_config: dict):
    import torch

    torch.manual_seed(0)
    model = cls._from_config(cfg, **from_config) if hasattr(cls, "_from_config") else cls(cfg)
    return model.eval()


def _variants(inputs: dict, accepted) -> list[dict]:
    """Each layout variant of ``inputs`` (``VARIANTS``), less what the forward does not take;
    one that then differs from ``inputs`` in nothing is not tried again."""
    out = []
    for f in VARIANTS:
        v = f(inputs)
        if v is not None and accepted:
            v = {k: t for k, t in v.items() if k in accepted}
        if v is not None and (set(v) != set(inputs) or any(v[k] is not inputs[k] for k in v)):
            out.append(v)
    return out


class _Retry(Exception):
    def __init__(self, inputs):
        self.inputs = inputs


def _eager(model, inputs: dict, accepted) -> None:
    """One eager call (a batch the model rejects is a build problem, not a compile one); a
    second with ``use_cache=False`` (raises ``_Retry`` with the inputs that ran)."""
    import torch

    try:
        with torch.no_grad():
            model(**inputs)
    except Exception as exc:
        if "use_cache" not in accepted and not any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
            raise
        try:
            with torch.no_grad():
                model(**inputs, use_cache=False)
        except Exception:  # the retry without a cache fails too: the first failure is the reason
            raise exc from None
        raise _Retry({**inputs, "use_cache": False}) from None


def is_class(unit: str) -> bool:
    """A sweep unit is a class name (``BertForMaskedLM``) or a model type (``bert``)."""
    return unit[:1].isupper()

