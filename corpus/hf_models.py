"""Real models no one here wrote: ``transformers`` models built from their config classes.

Tiny sizes (2 layers, hidden 64, vocab 1000), random weights, no downloads (never
``from_pretrained``), realistic inputs (padding in the attention mask). Each of these breaks
under torch.compile with transformers 5.x; the manifest holds the measured counts
(``hf = true``). transformers is imported inside each target, so without the ``hf`` extra
every target here fails alone with an ImportError that says what to install.
"""

from __future__ import annotations

import torch

VOCAB, HIDDEN, HEADS, FFN, LAYERS = 1000, 64, 4, 128, 2


def _transformers():
    try:
        import transformers
    except ImportError as exc:  # the one documented reason an hf target does not run
        raise ImportError('these corpus targets need transformers: pip install "graphmend[hf]"') from exc
    return transformers


def _text_batch(batch: int = 2, seq: int = 16, pad_from: int = 10):
    ids = torch.randint(5, VOCAB, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, pad_from:] = 0  # the second sequence is right-padded
    return ids, mask


def mend_target_hf_longformer():
    T = _transformers()
    torch.manual_seed(0)
    cfg = T.LongformerConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                             intermediate_size=FFN, attention_window=8, max_position_embeddings=80)
    ids, mask = _text_batch()
    global_mask = torch.zeros_like(mask)
    global_mask[:, 0] = 1  # CLS attends globally
    return T.LongformerModel(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask, global_attention_mask=global_mask)


def mend_target_hf_bigbird():
    T = _transformers()
    torch.manual_seed(0)
    cfg = T.BigBirdConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                          intermediate_size=FFN, max_position_embeddings=128, block_size=4, num_random_blocks=2,
                          attention_type="block_sparse")
    ids, mask = _text_batch(seq=64, pad_from=56)
    return T.BigBirdModel(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask)


def mend_target_hf_reformer():
    T = _transformers()
    torch.manual_seed(0)
    cfg = T.ReformerConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=2, attention_head_size=32,
                           feed_forward_size=FFN, attn_layers=["local", "lsh"], axial_pos_embds=False,
                           max_position_embeddings=64, local_attn_chunk_length=8, lsh_attn_chunk_length=8,
                           num_buckets=4, is_decoder=False)
    ids, mask = _text_batch()
    import graphmend

    # a batch without padding: the hashing takes its no-padding-bucket arm too
    return graphmend.Target(T.ReformerModel(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask),
                            inputs=[((), dict(input_ids=ids, attention_mask=torch.ones_like(mask)))])


def mend_target_hf_led():
    T = _transformers()
    torch.manual_seed(0)
    cfg = T.LEDConfig(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
                      encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
                      decoder_ffn_dim=FFN, max_encoder_position_embeddings=64, max_decoder_position_embeddings=64,
                      attention_window=8)
    ids, mask = _text_batch()
    return T.LEDModel(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :8])


def mend_target_hf_switch_transformers():
    T = _transformers()
    torch.manual_seed(0)
    # one sparse layer each side: every expert loop multiplies the break count (and the time)
    cfg = T.SwitchTransformersConfig(vocab_size=VOCAB, d_model=HIDDEN, d_kv=16, d_ff=FFN, num_layers=1,
                                     num_decoder_layers=1, num_heads=HEADS, num_experts=2, expert_capacity=8,
                                     num_sparse_encoder_layers=1, num_sparse_decoder_layers=1)
    ids, mask = _text_batch()
    return T.SwitchTransformersModel(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :8])


def mend_target_hf_xlm():
    T = _transformers()
    torch.manual_seed(0)
    cfg = T.XLMConfig(vocab_size=VOCAB, emb_dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS)
    ids, mask = _text_batch()
    return T.XLMModel(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask)


def mend_target_hf_flaubert():
    T = _transformers()
    torch.manual_seed(0)
    cfg = T.FlaubertConfig(vocab_size=VOCAB, emb_dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS)
    ids, mask = _text_batch()
    return T.FlaubertModel(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask)


def mend_target_hf_nllb_moe():
    T = _transformers()
    torch.manual_seed(0)
    cfg = T.NllbMoeConfig(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
                          encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
                          decoder_ffn_dim=FFN, num_experts=2, encoder_sparse_step=2, decoder_sparse_step=2,
                          max_position_embeddings=64, expert_capacity=8)
    ids, mask = _text_batch()
    return T.NllbMoeModel(cfg).eval(), (), dict(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :8])
