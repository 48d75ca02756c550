"""transformers sweep: the tiny sizes and the per-architecture overrides of ``graphmend.sweep.hf``.

Tables only (no torch, no transformers at import): what the generic tiny build gets wrong for
one model type (``OVERRIDES``) or one class (``CLASS_OVERRIDES``), each with why. A key
``"sub.name"`` (``"text_config.mlp_layer_types"``) sets ``name`` in the tiny kwargs of the
sub-config ``sub``, the rest of which stays generic.
"""

from __future__ import annotations

VOCAB, HIDDEN, HEADS, FFN, LAYERS = 1000, 64, 4, 128, 2

# timm's arguments that make one of its ViTs tiny, at 64 px
TINY_TIMM_VIT = {"img_size": 64, "depth": LAYERS, "embed_dim": HIDDEN, "num_heads": HEADS}
# a SAM-style FPN's positional sizes, its backbone's feature maps (256, 128, 64 at 1024 px): at 64 px
SAM_FEATURE_SIZES = [[16, 16], [8, 8], [4, 4]]
# the four tiny layers whose states beit's segmentation head takes (its classes' reasons say why)
BEIT_SEGMENTATION = {"num_hidden_layers": 4, "out_indices": [1, 2, 3, 4]}

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
    # landmarks as many as the 16 tokens: the exact path (5.25's landmark path adds the (seq, seq) padding mask to
    # (seq, landmarks) scores, which fails eagerly on any padded batch)
    "nystromformer": ({"num_landmarks": 16, "segment_means_seq_len": 16}, {}),
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
    # DbrxAttention reads attn_config.rope_theta, which DbrxAttentionConfig does not define, and
    # clamps to clip_qkv unconditionally (None by default: torch.clamp refuses it) (5.x)
    "dbrx": ({"attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
              "ffn_config": {"ffn_hidden_size": FFN, "moe_num_experts": 4, "moe_top_k": 2}}, {}),
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
    "mamba2": ({"num_heads": 8, "expand": 2}, {}),  # hidden x expand must be heads x head_dim (16)
    # no projection around the quantizer: codebook = hidden; the vocabulary is text, then the image codes, then
    # the audio codes (validated): 64 codes each above id 800 of 1000
    "apertus1p5": ({"codebook_dim": HIDDEN, "vision_config.codebook_size": 64, "audio_config.codebook_size": 64,
                    "image_token_offset": 800, "audio_token_offset": 864}, {}),
    # no default: a checkpoint's config names each layer (a convolution or attention); one of each
    "lfm2_moe": ({"layer_types": ["conv", "full_attention"]}, {}),
    # no default: a checkpoint's config sizes the dense heads' upsampling and refinement convolutions
    "sapiens2": ({"head_config.upsample_out_channels": [32, 32], "head_config.conv_out_channels": [32]}, {}),
    # the last num_kv_shared_layers (default 15) reuse the key/value cache of an earlier layer of their type, which
    # two layers cannot hold: four, the last two of each type sharing the first two's
    "gemma3n_text": ({"num_hidden_layers": 4, "num_kv_shared_layers": 2, "intermediate_size": [FFN] * 4,
                      "layer_types": ["sliding_attention", "full_attention"] * 2}, {}),
    # no default: a checkpoint's config sizes the indexer of its indexed-attention layers (validated: one key head,
    # the budget a multiple of the compression, an index head as wide as the rotary part)
    "qwen4_exp_text": ({"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
                        "indexer_compress_ratio": 4}, {}),
    # the shared transformer of its hybrid layers is tied across them: the tiny model keeps two hybrid layers
    "zamba": ({"num_hidden_layers": 3, "layers_block_type": ["mamba", "hybrid", "hybrid"]}, {}),
    # the projector's first layer takes intermediate_size features where the pixel shuffle hands it the width x 4
    # (1 / pixel_shuffle_ratio^2); its own widths (4096) cut with the rest
    "llama4_vision_model": ({"intermediate_size": 4 * HIDDEN, "projector_input_dim": HIDDEN,
                             "projector_output_dim": HIDDEN, "vision_output_dim": HIDDEN}, {}),
    # validated: the adaptor's width is a quarter of the text's
    "fun_asr_nano": ({"adaptor_config.intermediate_size": HIDDEN // 4}, {}),
    # its vision tower is timm's fastvit_mci3 at full size (125 M parameters, 3072 features), whatever the config's
    # hidden size says: one block a stage, widths whose last (x 2, the final convolution's) is the tiny hidden size
    "fast_vlm": ({"vision_config.model_args": {"inference_mode": True, "layers": [1] * 5,
                                               "embed_dims": [16, 16, HIDDEN // 2, HIDDEN // 2, HIDDEN // 2]}}, {}),
    # its text model splits rotary frequencies by rope_parameters' mrope_section, defaulting in the modeling code to a
    # 128-wide head's [16, 24, 24], which the config does not declare: given, for the fit to cut to the tiny head
    "paddleocr_vl": ({"text_config.rope_parameters": {"rope_type": "default", "rope_theta": 500000.0,
                                                      "mrope_section": [16, 24, 24]}}, {}),
    # its high-res neck takes the state of the SAM tower's first global-attention layer (default 2, 5, 8, 11 of 12):
    # the tiny tower's last
    "deepseek_vl_hybrid": ({"high_res_vision_config.global_attn_indexes": [1]}, {}),
    # the adapter concatenates vision layers 24 and 18 by default (validated against the depth): the tiny two
    "molmo2": ({"adapter_config.vision_feature_layer": [1, 0]}, {}),
    # the vision tower concatenates its last state with those of intermediate_layers_indices (default 3..30):
    # two tiny layers, both taken, three widths out; one global layer
    "mllama_vision_model": ({"intermediate_layers_indices": [0, 1], "vision_output_dim": 3 * HIDDEN,
                             "num_global_layers": 1}, {}),
    "mllama_text_model": ({"cross_attention_layers": [1]}, {}),  # default layers 3..38: the second of two
    # a checkpoint's config gives rope per layer type, which the rotary embedding looks up; the default has none
    "cohere_compass_text": ({"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
                            {}),
    # four coordinates and two shapes are concatenated to the hidden size: 4 x 8 + 2 x 8 = 48; a 64 px image
    "layoutlmv3": ({"hidden_size": 48, "coordinate_size": 8, "shape_size": 8, "input_size": 64}, {}),
    "donut-swin": ({"window_size": 2}, {}),  # its bias table keeps the window the 2 x 2 last stage of 64 px cuts
    "swin": ({"window_size": 2}, {}),  # as donut-swin
    # its head's width is the last stage's (round_filters(1280) at the default width coefficient, 2560), which the
    # generic FFN size (hidden_dim) would cut from the head alone
    "efficientnet": ({"hidden_dim": 2560}, {}),
    # the neck takes the layers backbone_out_indices names (default 2, 5, 8, 11), one each of its 4 stages
    "dpt": ({"num_hidden_layers": 4, "backbone_out_indices": [0, 1, 2, 3]}, {}),
    # the image is cut into patches of patch_size (default 384) at 1/4, 1/2 and 1 of its size, each patch a
    # dinov2 image: patches of 16 px out of a 64 px image, of 8 px patches; the hooks are layers of the two
    "depth_pro": ({"patch_size": 16, "intermediate_hook_ids": [1, 0],
                   **{f"{m}_model_config.{k}": v for m in ("image", "patch", "fov")
                      for k, v in (("image_size", 16), ("patch_size", 8))}}, {}),
    # the shared positional embedding's features (default 128) are half the prompt and mask width
    "sam_vision_model": ({"num_pos_feats": HIDDEN // 2}, {}), "sam_hq_vision_model": ({"num_pos_feats": HIDDEN // 2}, {}),
    # no default: a checkpoint's config gives each class (2 by default) its score threshold and reading order
    "pp_doclayout_v2": ({"class_thresholds": [0.5, 0.5], "class_order": [0, 1]}, {}),
    # the projector's queries per image are looked up by its patches (default 1225 or 4900): a 64 px image has 4
    "aria": ({"projector_patch_to_query_dict": {4: 4}}, {}),
    "lilt": ({"hidden_size": 48}, {}),  # six layout embeddings of hidden_size // 6 are concatenated: 6 x 8
    # the indexer's heads must fit the query heads of one key head (4 // 2)
    "kolibri1_1": ({"index_num_heads": 1}, {}),
    # its 2-D rotary embedding fills hidden_size / 2 with 4 x head_dim / 2 frequencies: 8 heads
    "efficientloftr": ({"num_attention_heads": 8}, {}),
    # no default: a checkpoint's config names each layer's MLP; and the SAM encoder's last channels (896) must be
    # the vision encoder's width, whose default (4096) is not
    "deepseek_ocr2": ({"text_config.mlp_layer_types": ["dense", "sparse"],
                       "vision_config.sam_config.downsample_channels": [32, HIDDEN]}, {}),
    # validated: the assistant's text model has no per-layer inputs (its forward then needs a target model's
    # shared key/value states, which a sweep does not have)
    "gemma4_assistant": ({"text_config.hidden_size_per_layer_input": 0, "text_config.vocab_size_per_layer_input": 0},
                         {}),
    # the image embedding is the vision tower's last stage unprojected (320 channels x the width coefficient 2): the
    # text's projection must be as wide
    "align": ({"projection_dim": 640}, {}),
    # the vision tower is timm's full-size mobilenetv5, whose width (2048) hidden_size only restates
    "gemma3n_vision": ({"hidden_size": 2048}, {}),
    # the task tokens (task_inputs) are a sequence as long as any (16); the task MLP takes task_seq_len (default 77)
    "oneformer": ({"task_seq_len": 16}, {}),
    # the queries join the last num_blocks (default 4) of the layers, which two tiny layers never reach: the last one
    "eomt": ({"num_blocks": 1}, {}), "eomt_dinov3": ({"num_blocks": 1}, {}),
    # no default: a checkpoint's config gives the scales the projector resamples the backbone's features to
    "lw_detr": ({"projector_scale_factors": [1.0]}, {}),
    # the FPN's positional sizes are the backbone's feature maps at 1024 px (256, 128, 64): at 64 px, 16, 8 and 4
    "sam2_vision_model": ({"backbone_feature_sizes": SAM_FEATURE_SIZES}, {}),
    # its first stage's width is embed_dim_per_stage[0] (96), which hidden_size only restates
    "sam2_hiera_det_model": ({"hidden_size": 96}, {}),
    # as sam2's; and its default backbone misspells the timm architecture ("archirecture"), so resnet50 is built,
    # whose channels are not backbone_channel_list's (repvit_m1's)
    "edgetam_vision_model": ({"backbone_feature_sizes": SAM_FEATURE_SIZES,
                              "backbone_config": {"model_type": "timm_wrapper", "architecture": "repvit_m1",
                                                  "num_classes": 2,
                                                  "model_args": {"in_chans": 3, "features_only": True,
                                                                 "out_indices": [0, 1, 2, 3]}}}, {}),
    # the ViT backbone is a default the tiny build keeps (backbones may be timm's): full size (32 layers at 1008 px),
    # too slow to run; the tiny sizes, and the FPN's positional sizes of its maps at 64 px (x4, x2, x1 of 4 patches)
    "sam3_vision_model": ({"backbone_feature_sizes": SAM_FEATURE_SIZES,
                           "backbone_config": {"model_type": "sam3_vit_model", "hidden_size": HIDDEN,
                                               "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
                                               "intermediate_size": FFN, "image_size": 64,
                                               "global_attn_indexes": [1]}}, {}),
    # the frame encoder is timm's vit_pe_core_large_patch14_336, which checks the 336 px it was made for; timm's own
    # arguments make it tiny and take 64 px
    "pe_video_encoder": ({"vision_config.model_args": TINY_TIMM_VIT}, {}),
    # the vision tower is a timm model a checkpoint's config names (perception encoder's ViT; the default, resnet50, has
    # no embed_dim in model_args, which the projector reads); made tiny as pe-video's
    "perception_lm": ({"vision_config.architecture": "vit_pe_core_large_patch14_336",
                       "vision_config.model_args": TINY_TIMM_VIT}, {}),
    # its hidden_size is the width of the backbone's features (vitdet's default, 768), which the backbone, kept at its
    # default, decides
    "vitmatte": ({"hidden_size": 768}, {}),
    # the backbone checks the image against its default size (256 x 192): a tiny one at 64 px, its last layer out
    "vitpose": ({"backbone_config": {"model_type": "vitpose_backbone", "out_indices": [LAYERS], "hidden_size": HIDDEN,
                                     "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
                                     "image_size": [64, 64]}}, {}),
    # no default: a checkpoint's config maps the image placeholder and each VQ code to a token (code 12 is "IMGIMGBCZ",
    # its digits as letters): 64 codes at ids 800.., the placeholder below them
    "chameleon": ({"vq_config.num_embeddings": 64,
                   "vocabulary_map": {"<image>": 799, **{"IMGIMG" + "".join(chr(ord("A") + int(d)) for d in str(i))
                                                         + "Z": 800 + i for i in range(64)}}}, {}),
    # the model scores the ids of "yes" and "no", which it reads from the config, else the full vocabulary's (10784,
    # 3771), past the tiny one: two ids at its top
    "shieldgemma2": ({"yes_token_index": VOCAB - 2, "no_token_index": VOCAB - 3}, {}),
    # the Fourier image preprocessor's 261 channels take one cross-attention head (default 8)
    "perceiver": ({"num_cross_attention_heads": 1}, {}),
    "nllb-moe": ({"num_experts": 2, "encoder_sparse_step": 2, "decoder_sparse_step": 2, "expert_capacity": 8}, {}),
    # the backbone's out_indices default to its last stage; the head concatenates all six bridge stages
    "uvdoc": ({"backbone_config": {"model_type": "uvdoc_backbone", "out_indices": [1, 2, 3, 4, 5, 6]}}, {}),
    # no default: a checkpoint's config pairs vision and text layers for the deepstack projectors and names the
    # text layers of the 4 spatial groups (default 12..21 of 2); a 2 x 2 window of patches to 1 x 1 query
    "granite4_vision": ({"downsample_rate": "1/2", "deepstack_layer_map": [[-2, 0], [-1, 1]],
                         "spatial_target_layers": [0, 1, 0, 1]}, {}),
    # the Q-Former projector cross-attends to the speech encoder's states, as wide as its hidden size (a checkpoint's
    # config says so; the Q-Former's default, 1408, is blip-2's vision width)
    "granite_speech": ({"projector_config.encoder_hidden_size": HIDDEN}, {}),
    "granite_speech_plus": ({"projector_config.encoder_hidden_size": HIDDEN}, {}),
    # the audio encoder's output joins the text's embeddings: as wide as the text (a checkpoint's config says so; the
    # defaults, 3584 and 2048, are of different checkpoints)
    "qwen3_asr": ({"audio_config.output_dim": HIDDEN}, {}),
}


# class name -> (config kwargs, why): where the generic build fails for that class
CLASS_OVERRIDES: dict[str, tuple[dict, str]] = {
    "ReformerModelWithLMHead": ({"is_decoder": True}, "a causal LM head: it refuses a config that is not a decoder "
                                                      "(the reformer override makes the encoder classes bidirectional)"),
    "BeitForSemanticSegmentation": (BEIT_SEGMENTATION,
                                    "its head takes four distinct layers' states (default 3, 5, 7, 11 of 12): four "
                                    "tiny layers"),
    "Data2VecVisionForSemanticSegmentation": (BEIT_SEGMENTATION, "as BeitForSemanticSegmentation"),
    "HieraForPreTraining": ({"decoder_hidden_size": HIDDEN, "decoder_depth": 1, "decoder_num_heads": 1},
                            "no default: a checkpoint's config sizes the decoder that reconstructs the masked patches"),
    "Blip2QFormerModel": ({"encoder_hidden_size": HIDDEN},
                          "its cross-attention takes the vision tower's features (1408 wide by default), a width "
                          "Blip2Config sets from its vision config; alone, the features are as wide as the rest"),
    "FlavaForPreTraining": ({"return_loss": False},
                            "it computes its pre-training losses by default (return_loss), which need the processor's "
                            "codebook pixels; a forward for inference has none"),
    "T5ForSequenceClassification": ({"decoder_start_token_id": 0},
                                    "it makes its decoder inputs by shifting the input ids right from "
                                    "decoder_start_token_id, which T5Config does not define (a checkpoint's config "
                                    "gives it: 0, the pad token)"),
    "DetrForSegmentation": ({"encoder_attention_heads": 8, "decoder_attention_heads": 8},
                            "its mask head groups the hidden size plus the head count (64 + 4) in groups of 8"),
    "Blip2ForImageTextRetrieval": ({"qformer_config.use_qformer_text_input": True},
                                   "its Q-Former embeds the text too (a checkpoint's config says so; the default does not)"),
    "T5GemmaEncoderModel": ({"is_encoder_decoder": False},
                            "it refuses an encoder-decoder config, which T5GemmaConfig is by default (a checkpoint's "
                            "config for the encoder alone says it is not)"),
    "T5Gemma2Encoder": ({"text_config.dropout_rate": 0.0},
                        "its text encoder reads dropout_rate, which only the encoder-decoder config (T5Gemma2Config) "
                        "sets on its encoder's text config"),
}
