"""GraphMend's evaluation models (the rows of its artifact's RESULTS.md that logger calls and
LongRoPE break), as tiny configs with random weights, for transformers 4.52.4 (GraphMend's
version; the Phi-3 target builds on 5.x too). Run mend on them from a venv that has that
transformers:

    python -m venv --system-site-packages /work/venv452
    /work/venv452/bin/pip install transformers==4.52.4
    PYTHONPATH=. /work/venv452/bin/python -m graphmend fix tests/targets/graphmend_models.py -f json -o out.json

The model code mend repairs lives in site-packages, outside the analysed file: the overlay path.
"""

import torch

V, H, L = 1000, 64, 2


def _ids(seq=16):
    torch.manual_seed(1)
    ids = torch.randint(5, V, (2, seq))
    mask = torch.ones(2, seq, dtype=torch.long)
    mask[1, 10:] = 0
    return ids, mask


def _seq2seq(cfg_name, model_name, **kw):
    import transformers as T
    torch.manual_seed(0)
    cfg = getattr(T, cfg_name)(vocab_size=V, d_model=H, encoder_layers=L, decoder_layers=L, encoder_attention_heads=4,
                               decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                               max_position_embeddings=64, pad_token_id=1, decoder_start_token_id=2, **kw)
    ids, mask = _ids()
    return getattr(T, model_name)(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :8])


def mend_target_t5():
    import transformers as T
    torch.manual_seed(0)
    cfg = T.T5Config(vocab_size=V, d_model=H, d_kv=16, d_ff=128, num_layers=L, num_heads=4, decoder_start_token_id=0)
    ids, mask = _ids()
    return T.T5Model(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :8])


def mend_target_bart():
    return _seq2seq("BartConfig", "BartModel")


def mend_target_blenderbot():
    return _seq2seq("BlenderbotConfig", "BlenderbotModel")


def mend_target_marian():
    return _seq2seq("MarianConfig", "MarianModel")


def mend_target_pegasus_causal():
    import transformers as T
    torch.manual_seed(0)
    cfg = T.PegasusConfig(vocab_size=V, d_model=H, encoder_layers=L, decoder_layers=L, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                          max_position_embeddings=64, pad_token_id=1)
    ids, mask = _ids()
    return T.PegasusForCausalLM(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask)


def mend_target_biogpt():
    import transformers as T
    torch.manual_seed(0)
    cfg = T.BioGptConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=4,
                         intermediate_size=128, max_position_embeddings=64, pad_token_id=1)
    ids, mask = _ids()
    return T.BioGptModel(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask)


def mend_target_whisper():
    import transformers as T
    torch.manual_seed(0)
    cfg = T.WhisperConfig(vocab_size=V, d_model=H, encoder_layers=L, decoder_layers=L, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16,
                          max_source_positions=32, max_target_positions=32, pad_token_id=1, decoder_start_token_id=2)
    torch.manual_seed(1)
    feats = torch.randn(2, 16, 64)
    return T.WhisperModel(cfg).eval(), (), dict(input_features=feats, decoder_input_ids=torch.randint(5, V, (2, 8)))


def mend_target_layoutlmv3():
    import transformers as T
    torch.manual_seed(0)
    cfg = T.LayoutLMv3Config(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=4,
                             intermediate_size=128, max_position_embeddings=64, input_size=32, patch_size=16,
                             max_2d_position_embeddings=128, coordinate_size=8, shape_size=16)
    ids, mask = _ids()
    bbox = torch.randint(0, 60, (2, 16, 4))
    bbox[..., 2:] += bbox[..., :2]
    return T.LayoutLMv3Model(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask, bbox=bbox)


def _longformer(hidden=H, heads=4, layers=L, ffn=128, vocab=V, window=8, seq=13, batch=2, device="cpu"):
    import transformers as T
    torch.manual_seed(0)
    cfg = T.LongformerConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                             intermediate_size=ffn, attention_window=window, max_position_embeddings=seq + window + 2)
    torch.manual_seed(1)
    ids = torch.randint(5, vocab, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[-1, seq * 3 // 4:] = 0  # the last sequence is right-padded
    model = T.LongformerModel(cfg).eval().to(device)
    return model, (), dict(input_ids=ids.to(device), attention_mask=mask.to(device))


def mend_target_longformer():
    """GraphMend's Longformer row (5 -> 3 breaks there): a plain call, no global attention,
    13 tokens, so the input is padded to the attention window (a logger warning)."""
    return _longformer()


def _phi3(hidden=64, heads=4, layers=2, ffn=128, vocab=1000, original=16, longest=64):
    import transformers as T
    torch.manual_seed(0)
    half = hidden // heads // 2
    kw = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
              num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=longest,
              original_max_position_embeddings=original, pad_token_id=0)
    scaling = {"type": "longrope", "short_factor": [1.0 + 0.1 * i for i in range(half)],
               "long_factor": [2.0 + 0.2 * i for i in range(half)]}
    if T.__version__.startswith("4."):
        cfg = T.Phi3Config(rope_scaling=scaling, **kw)
    else:
        scaling = dict(scaling, rope_type="longrope", original_max_position_embeddings=original, rope_theta=10000.0)
        scaling.pop("type")
        cfg = T.Phi3Config(rope_parameters=scaling, **kw)
    return T.Phi3Model(cfg).eval()


def mend_target_phi3_longrope():
    import graphmend

    model = _phi3()
    torch.manual_seed(1)
    short = torch.randint(1, 1000, (2, 8))    # within the original 16 positions: short factors
    long = torch.randint(1, 1000, (2, 24))    # beyond them: long factors
    return graphmend.Target(model, (), dict(input_ids=short), inputs=[((), dict(input_ids=long))])
