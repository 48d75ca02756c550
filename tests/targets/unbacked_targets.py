"""Real transformers 5.x code whose `.item()` / `int(t)` feeds sizes and slice bounds, as mend
targets: ``mend fix tests/targets/unbacked_targets.py``.

* OmDet-Turbo's language backbone: ``max_len = (mask != 0).sum(1).max().item()`` cuts the
  prompt padding off (two slices);
* Kimi-K2.5's ``get_vision_temporal_merge_index``: ``num_patches = int(...sum())`` is
  ``repeat_interleave``'s ``output_size`` and an ``arange`` length; ``num_merged_tokens`` is
  returned, which no unbacked int can be;
* Qwen2.5-Omni's ``get_valid_indices``: ``max_len = after_conv1.max().item()`` is an
  ``arange`` length (the ``nonzero`` after it still breaks: GM501).
"""

import torch


def mend_target_omdet_turbo_language():
    from transformers import CLIPTextConfig, OmDetTurboConfig
    from transformers.models.omdet_turbo.modeling_omdet_turbo import OmDetTurboLanguageBackbone

    torch.manual_seed(0)
    text = CLIPTextConfig(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                          num_attention_heads=4, max_position_embeddings=16,
                          bos_token_id=0, eos_token_id=2, pad_token_id=1)
    cfg = OmDetTurboConfig(text_config=text, text_projection_in_dim=32, text_projection_out_dim=16)
    model = OmDetTurboLanguageBackbone(cfg).eval()
    ids = torch.randint(5, 99, (3, 16))
    mask = torch.ones(3, 16, dtype=torch.long)
    mask[0, 9:] = 0
    mask[1, 12:] = 0
    mask[2, 7:] = 0  # the longest prompt is 12 tokens: the output is cut to 12
    return model, (ids, mask)


def _kimi_merge(grid_thw, feats):
    from transformers.models.kimi_k25.modeling_kimi_k25 import get_vision_temporal_merge_index

    index, weight, _ = get_vision_temporal_merge_index(grid_thw, 2, 2)
    return feats * weight[:, None] + index[:, None].to(feats.dtype)


def mend_target_kimi_k25_temporal_merge():
    grid = torch.tensor([[2, 4, 4], [1, 2, 6]])  # two videos: 32 + 12 patches
    return _kimi_merge, (grid, torch.randn(44, 8))


def _qwen_valid(chunk_lengths, feats):
    from transformers.models.qwen2_5_omni.modeling_qwen2_5_omni import get_valid_indices

    idx = get_valid_indices(chunk_lengths)
    return feats.flatten(0, 1)[idx]


def mend_target_qwen2_5_omni_valid_indices():
    lengths = torch.tensor([9, 4, 7])  # after the first conv: 5, 2, 4 frames; the grid is 3 x 5
    return _qwen_valid, (lengths, torch.randn(3, 5, 8))
