"""Bench targets for transformers models that corpus/hf_models.py does not hold, built the way
benchmarks/survey_hf.py builds them (tiny config, random weights, a right-padded batch):

    MEND_TARGETS=tests/targets/hf_bench_targets.py::mend_target_hf_jetmoe benchmarks/gpu_bench.sh hf both
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _survey(model_type: str, **from_config):
    from survey_hf import build

    model, inputs = build(model_type, **from_config)
    return model, (), inputs


def _sweep(model_type: str, **from_config):
    """Built as `mend sweep transformers` builds it (architectures survey_hf does not list)."""
    from graphmend.sweep.hf import build

    model, inputs = build(model_type, from_config=from_config)
    return model, (), inputs


def mend_target_hf_jetmoe():
    """ScatterMoE-style experts: `.tolist()` split sizes (GM302: kept a list of unbacked ints)."""
    return _survey("jetmoe")


def mend_target_hf_jetmoe_base():
    """JetMoE at a real size, for the GPU: hidden 1024, 8 experts (2 per token) in the MLP and
    the attention, 4 layers, one sequence of 2048 tokens (random weights, no downloads)."""
    import torch
    import transformers as T

    cfg = T.JetMoeConfig(vocab_size=32000, hidden_size=1024, num_hidden_layers=4, num_key_value_heads=8,
                         kv_channels=64, intermediate_size=2816, max_position_embeddings=4096,
                         num_local_experts=8, num_experts_per_tok=2)
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # verified where it is timed: too big for a CPU
    model = T.JetMoeModel(cfg).eval().to(device)
    ids = torch.randint(1, cfg.vocab_size, (1, 2048), device=device)
    return model, (), dict(input_ids=ids, attention_mask=torch.ones_like(ids))


def mend_target_hf_mixtral():
    """transformers 5.x Mixtral with its eager experts (the reference implementation, and what runs
    where `grouped_mm` cannot: 5.24's default on CPU is grouped_mm, which does not break): sparse
    expert dispatch over `nonzero()` / `torch.where(mask)` with `index_add_` (GM501), one opaque
    custom op after the safe fix (same sparse algorithm)."""
    return _survey("mixtral", experts_implementation="eager")


def mend_target_hf_mixtral_base():
    """Mixtral at a real size, for the GPU: hidden 1024, 8 experts (2 per token), 4 layers, one
    sequence of 2048 tokens, eager experts (the loop the opaque op takes; random weights)."""
    import torch
    import transformers as T

    cfg = T.MixtralConfig(vocab_size=32000, hidden_size=1024, intermediate_size=3584, num_hidden_layers=4,
                          num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=4096,
                          num_local_experts=8, num_experts_per_tok=2)
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # verified where it is timed: too big for a CPU
    model = T.AutoModel.from_config(cfg, experts_implementation="eager").eval().to(device)
    ids = torch.randint(1, cfg.vocab_size, (1, 2048), device=device)
    return model, (), dict(input_ids=ids, attention_mask=torch.ones_like(ids))


def mend_target_hf_qwen2_moe():
    """transformers 5.x Qwen2-MoE, eager experts: Mixtral's expert loop plus a shared expert (GM501)."""
    return _survey("qwen2_moe", experts_implementation="eager")


def mend_target_hf_olmoe():
    """transformers 5.x OLMoE, eager experts: Mixtral's expert loop (GM501)."""
    return _survey("olmoe", experts_implementation="eager")


def mend_target_hf_gpt_oss():
    """transformers 5.x gpt-oss, eager experts: the expert loop over `nonzero()` hits, with a
    float32 accumulator on the input's device and bias-carrying expert weights (GM501)."""
    return _sweep("gpt_oss", experts_implementation="eager")


def mend_target_hf_openai_privacy_filter():
    """transformers 5.x OpenAI privacy filter: gpt-oss's expert loop, accumulating in float32
    (`torch.zeros_like(hidden_states, dtype=torch.float32, device=...)`, GM501)."""
    return _sweep("openai_privacy_filter")


def mend_target_hf_ctrl():
    """transformers 5.x CTRL: an `nn.Buffer` re-bound in `forward` (GM606, unsafe fix)."""
    return _survey("ctrl")


def mend_target_hf_xmod_two_languages():
    """X-MOD with two language adapters and a batch that mixes them (`lang_ids` per row): the
    adapter dispatch of transformers 4.x (GM503, unsafe fix) on more than one run."""
    import torch
    import transformers as T
    from survey_hf import VOCAB, config_kwargs

    cfg = T.XmodConfig(**config_kwargs(T.XmodConfig, {"default_language": "en_XX"}),
                       languages=["en_XX", "de_DE"])
    torch.manual_seed(0)
    model = T.XmodModel(cfg).eval()
    ids = torch.randint(5, VOCAB, (3, 16))
    mask = torch.ones(3, 16, dtype=torch.long)
    mask[1, 10:] = 0
    return model, (), {"input_ids": ids, "attention_mask": mask, "lang_ids": torch.tensor([0, 1, 1])}
