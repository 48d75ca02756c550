"""transformers: which architectures a sweep runs, and how each is built tiny.

Enumeration (parent side, imports transformers' auto mappings): an architecture is *text*
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
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Optional

from graphmend.core.jobs import describe  # an exception in one line, as every worker says it

VOCAB, HIDDEN, HEADS, FFN, LAYERS = 1000, 64, 4, 128, 2

# Config __init__ parameter names that mean the same thing across architectures; only the
# ones a config's signature names are passed (setting others after __init__ would miss
# values the config derives in __init__, e.g. head_dim).
GENERIC = [  # pairs, not a dict: LAYERS and 2 kv heads share a value
    (VOCAB, ["vocab_size", "src_vocab_size", "tgt_vocab_size"]),
    (HIDDEN, ["hidden_size", "d_model", "n_embd", "emb_dim", "dim", "embed_dim", "n_embed", "d_embed"]),
    (LAYERS, ["num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers", "decoder_layers",
              "num_decoder_layers", "num_encoder_layers"]),
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
           shared_expert_intermediate_size=64, n_routed_experts=4, n_shared_experts=1, n_group=1, topk_group=1)

# model_type -> (extra config kwargs, options). options: seq, pad_from, extra (an input
# builder's name). What the generic build gets wrong for these architectures.
OVERRIDES: dict[str, tuple[dict, dict]] = {
    "electra": ({"embedding_size": 64}, {}), "albert": ({"embedding_size": 32}, {}),
    "mega": ({"ema_projection_size": 4, "shared_representation_size": 32}, {}),  # transformers 4.x
    "ibert": ({"quant_mode": False}, {}), "convbert": ({"embedding_size": 64}, {}),
    "roformer": ({"embedding_size": 64}, {}), "squeezebert": ({"embedding_size": 64}, {}),
    "rembert": ({"input_embedding_size": 32, "output_embedding_size": 32}, {}),
    "mobilebert": ({"embedding_size": 32, "intra_bottleneck_size": 32, "true_hidden_size": 32,
                    "num_feedforward_networks": 1}, {}),
    "funnel": ({"block_sizes": [1, 1], "n_head": HEADS, "d_head": 16}, {}),
    "esm": ({"pad_token_id": 1, "mask_token_id": 4}, {}),
    "luke": ({"entity_vocab_size": 100, "entity_emb_size": 32}, {}),
    "xmod": ({"default_language": "en_XX"}, {}),
    "canine": ({"downsampling_rate": 4, "local_transformer_stride": 4}, {}),
    "nystromformer": ({"num_landmarks": 4, "segment_means_seq_len": 16}, {}),
    "mra": ({}, {"seq": 64, "pad_from": 56}),
    "longformer": ({"attention_window": 8}, {"extra": "global_attention"}),
    "big_bird": ({"block_size": 4, "num_random_blocks": 2, "attention_type": "block_sparse"},
                 {"seq": 64, "pad_from": 56}),
    "reformer": ({"num_attention_heads": 2, "attention_head_size": 32, "feed_forward_size": FFN,
                  "attn_layers": ["local", "lsh"], "axial_pos_embds": False, "max_position_embeddings": 64,
                  "local_attn_chunk_length": 8, "lsh_attn_chunk_length": 8, "num_buckets": 4,
                  "is_decoder": False}, {}),
    "gpt_neo": ({"attention_types": [[["global", "local"], 1]], "window_size": 8}, {}),
    "gptj": ({"rotary_dim": 8}, {}), "codegen": ({"rotary_dim": 8}, {}),
    "opt": ({"word_embed_proj_dim": HIDDEN}, {}), "mpt": ({"expansion_ratio": 2}, {}),
    "jetmoe": ({"num_local_experts": 4, "num_experts_per_tok": 2, "kv_channels": 16}, {}),
    "dbrx": ({"attn_config": {"kv_n_heads": 2}, "ffn_config": {"ffn_hidden_size": FFN, "moe_num_experts": 4,
                                                               "moe_top_k": 2}}, {}),
    "jamba": ({"num_experts": 4, "expert_layer_period": 2, "expert_layer_offset": 1, "attn_layer_period": 2,
               "attn_layer_offset": 1, "use_mamba_kernels": False, "mamba_d_state": 8}, {}),
    "recurrent_gemma": ({"lru_width": HIDDEN, "attention_window_size": 16, "num_key_value_heads": 1,
                         "block_types": ["recurrent", "attention"]}, {}),
    "mamba": ({"state_size": 8}, {}), "rwkv": ({"attention_hidden_size": HIDDEN}, {}),
    "transfo-xl": ({"cutoffs": [200, 500], "div_val": 1, "mem_len": 16}, {}),
    "pegasus_x": ({"block_size": 8, "num_global_tokens": 4}, {}), "marian": ({"decoder_vocab_size": VOCAB}, {}),
    "led": ({"attention_window": 8}, {}),
    "bigbird_pegasus": ({"block_size": 4, "num_random_blocks": 2, "attention_type": "block_sparse"},
                        {"seq": 64, "pad_from": 56}),
    "prophetnet": ({"ngram": 2, "num_buckets": 32}, {}), "xlm-prophetnet": ({"ngram": 2, "num_buckets": 32}, {}),
    "fsmt": ({"langs": ["en", "de"]}, {}),
    "switch_transformers": ({"num_layers": 1, "num_decoder_layers": 1, "num_experts": 2, "expert_capacity": 8,
                             "num_sparse_encoder_layers": 1, "num_sparse_decoder_layers": 1}, {}),
    "nllb-moe": ({"num_experts": 2, "encoder_sparse_step": 2, "decoder_sparse_step": 2, "expert_capacity": 8}, {}),
}

# the heads of text tasks (MODEL_FOR_<TASK>_MAPPING_NAMES)
TEXT_TASKS = ("CAUSAL_LM", "MASKED_LM", "SEQ_TO_SEQ_CAUSAL_LM", "SEQUENCE_CLASSIFICATION", "TOKEN_CLASSIFICATION",
              "QUESTION_ANSWERING", "MULTIPLE_CHOICE", "TEXT_ENCODING", "NEXT_SENTENCE_PREDICTION")
# a mapping whose task name has one of these words serves another modality
OTHER_MODALITY = re.compile(r"IMAGE|AUDIO|VIDEO|VISION|VISUAL|SPEECH|CTC|SPECTROGRAM|WAVEFORM|DEPTH|DETECTION|"
                            r"SEGMENTATION|KEYPOINT|POSE|TIME_SERIES|DOCUMENT|MULTIMODAL|MASK_GENERATION|MATTING|"
                            r"XVECTOR|NORMAL_ESTIMATION|POINTMAP|RNNT|TDT|TABLE_RECOGNITION|TEXT_RECOGNITION|BACKBONE")
COMPOSITE = re.compile(r"audio|vision|image|speech|video|text_config")


class NotBuilt(Exception):
    """The architecture cannot be built tiny from its config (or its eager forward rejects the batch)."""


def version() -> str:
    import transformers

    return transformers.__version__


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


def config_kwargs(cls, extra: dict) -> dict:
    try:
        params = set(inspect.signature(cls.__init__).parameters)
    except (TypeError, ValueError):
        params = set()
    kw = {name: value for value, names in GENERIC for name in names if name in params}
    kw.update({k: v for k, v in MOE.items() if k in params and k not in extra})
    kw.update(extra)
    return kw


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
    tries = [extra]
    if "num_key_value_heads" not in extra:
        tries.append({**extra, "num_key_value_heads": HEADS})
    first: NotBuilt | None = None
    for kwargs in tries:
        try:
            return _build(model_type, kwargs, opts, from_config or {})
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
        if "use_cache" not in accepted:
            raise NotBuilt(f"eager forward: {describe(exc)}") from None
        try:
            with torch.no_grad():
                model(**inputs, use_cache=False)
        except Exception:
            raise NotBuilt(f"eager forward: {describe(exc)}") from None
        inputs["use_cache"] = False
    return model, inputs


def target(model_type: str) -> tuple[Any, tuple, dict]:
    """What a generated ``mend_target_*`` returns: ``(model, (), inputs)``."""
    model, inputs = build(model_type)
    return model, (), inputs
