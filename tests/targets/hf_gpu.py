"""transformers models with verified fixes, one unit per target, for the GPU cost gate; the real-size Mixtral last, so a sweep cut short by its deadline
has the small ones::

    python3 benchmarks/cost_sweep.py tests/targets/hf_gpu.py --split tests/targets/hf_gpu.py \\
        --modes default,reduce-overhead --device cuda --parallel 3 --jobs 2 --out build/sweep-gpu
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hf_bench_targets as H  # noqa: E402


def mend_target_hf_qwen2_moe():
    return H.mend_target_hf_qwen2_moe()


def mend_target_hf_gpt_oss():
    return H.mend_target_hf_gpt_oss()


def mend_target_hf_bigbird_pegasus():
    return H._survey("bigbird_pegasus")


def mend_target_hf_longformer():
    from corpus.hf_models import mend_target_hf_longformer

    return mend_target_hf_longformer()


def mend_target_hf_openai_privacy_filter():
    return H.mend_target_hf_openai_privacy_filter()


def mend_target_hf_mixtral_base():
    return H.mend_target_hf_mixtral_base()


def mend_target_hf_ctrl():
    """CTRL's `nn.Buffer` table re-bound in `forward` (GM606's guard)."""
    return H.mend_target_hf_ctrl()


def mend_target_hf_switch_transformers():
    """The router's `self.classifier.to(self.dtype)`: a break on every call on torch 2.11 (GM607)."""
    from corpus.hf_models import mend_target_hf_switch_transformers

    return mend_target_hf_switch_transformers()


def mend_target_hf_nllb_moe():
    from corpus.hf_models import mend_target_hf_nllb_moe

    return mend_target_hf_nllb_moe()


def mend_target_hf_xmod_two_languages():
    """X-MOD's language adapters, a batch mixing two languages (GM502's opaque region)."""
    return H.mend_target_hf_xmod_two_languages()


def _on_device(model, ids, **extra):
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"  # verified where it is timed: too big for a CPU
    ids = ids.to(device)
    return model.eval().to(device), (), dict(input_ids=ids, attention_mask=torch.ones_like(ids),
                                             **{k: v.to(device) for k, v in extra.items()})


def mend_target_hf_ctrl_base():
    """CTRL at a base size (hidden 768, 12 layers, 12 heads) on one sequence of 2048 tokens."""
    import torch
    import transformers as T

    torch.manual_seed(0)
    cfg = T.CTRLConfig(vocab_size=32000, n_positions=2048, n_embd=768, dff=3072, n_layer=12, n_head=12)
    return _on_device(T.CTRLModel(cfg), torch.randint(1, cfg.vocab_size, (1, 2048)))


def mend_target_hf_switch_base():
    """Switch Transformers at switch-base-8's size (d_model 768, 12 + 12 layers, every other one
    sparse with 8 experts): 1024 tokens in, 256 out."""
    import torch
    import transformers as T

    torch.manual_seed(0)
    cfg = T.SwitchTransformersConfig(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12,
                                     num_decoder_layers=12, num_heads=12, num_experts=8, expert_capacity=256,
                                     num_sparse_encoder_layers=6, num_sparse_decoder_layers=6)
    ids = torch.randint(1, cfg.vocab_size, (1, 1024))
    return _on_device(T.SwitchTransformersModel(cfg), ids, decoder_input_ids=ids[:, :256])


def mend_target_hf_xmod_base():
    """X-MOD at xmod-base's size (hidden 768, 12 layers, 12 heads, one adapter per language in
    every layer), two languages, 4 sequences of 512 tokens, rows alternating en_XX / de_DE."""
    import torch
    import transformers as T

    torch.manual_seed(0)
    cfg = T.XmodConfig(vocab_size=32000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                       intermediate_size=3072, max_position_embeddings=514, languages=["en_XX", "de_DE"],
                       default_language="en_XX")
    ids = torch.randint(5, cfg.vocab_size, (4, 512))
    return _on_device(T.XmodModel(cfg), ids, lang_ids=torch.tensor([0, 1, 0, 1]))
