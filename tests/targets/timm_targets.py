"""Targets for timm models: popular architectures at their smallest variants, each built with
``timm.create_model(name, pretrained=False, num_classes=10)`` (random weights, no downloads)
and a small input, so that a capture takes seconds on a 2-core CPU:

    PYTHONPATH=. python -m graphmend analyze tests/targets/timm_targets.py --dynamic-only
    MEND_NO_CACHE=1 PYTHONPATH=. python -m graphmend fix tests/targets/timm_targets.py

Run beside torch 2.14.1. timm is imported
inside each target, so this file imports without it.
"""

from __future__ import annotations

BATCH = 2


def _timm(name, side, **kw):
    import torch

    torch.manual_seed(0)
    import timm

    model = timm.create_model(name, pretrained=False, num_classes=10, **kw).eval()
    return model, (torch.randn(BATCH, 3, side, side),), {}


def mend_target_timm_resnet18():
    return _timm("resnet18", 64)


def mend_target_timm_efficientnet_b0():
    return _timm("efficientnet_b0", 64)


def mend_target_timm_mobilenetv3_small_100():
    return _timm("mobilenetv3_small_100", 64)


def mend_target_timm_convnext_atto():
    return _timm("convnext_atto", 64)


def mend_target_timm_vit_tiny_patch16():
    """ViT-Ti/16 at 64x64 (16 patches plus the class token)."""
    return _timm("vit_tiny_patch16_224", 64, img_size=64)


def mend_target_timm_deit_tiny_distilled():
    """DeiT-Ti distilled: class and distillation tokens, two heads averaged in eval."""
    return _timm("deit_tiny_distilled_patch16_224", 64, img_size=64)


def mend_target_timm_swin_tiny():
    """Swin-T at its native 224 (window 7 needs every stage's side a multiple of 7)."""
    return _timm("swin_tiny_patch4_window7_224", 224)


def mend_target_timm_levit_128s():
    """LeViT-128S: attention biases cached per device in eval."""
    return _timm("levit_128s", 224)


def mend_target_timm_maxvit_nano():
    """MaxViT-nano (rw): MBConv, block and grid attention, at 128 (window 4)."""
    return _timm("maxvit_nano_rw_256", 128, img_size=128)


def mend_target_timm_coat_lite_tiny():
    return _timm("coat_lite_tiny", 224)


def mend_target_timm_crossvit_tiny():
    """CrossViT-Ti: two branches at 240 and 224, the second resized inside forward."""
    return _timm("crossvit_tiny_240", 240)


def mend_target_timm_xcit_nano():
    """XCiT-nano: cross-covariance attention, Fourier positional encoding."""
    return _timm("xcit_nano_12_p16_224", 64, img_size=64)


def mend_target_timm_mobilevit_xxs():
    return _timm("mobilevit_xxs", 128)


def mend_target_timm_efficientformerv2_s0():
    """EfficientFormerV2-S0: attention biases cached per device, like LeViT."""
    return _timm("efficientformerv2_s0", 224)


def mend_target_timm_eva02_tiny():
    """EVA-02-Ti: rotary position embedding, SwiGLU, at 112 (8x8 patches of 14)."""
    return _timm("eva02_tiny_patch14_224", 112, img_size=112)


def mend_target_timm_fastvit_t8():
    return _timm("fastvit_t8", 128)


def mend_target_timm_sequencer2d_s():
    """Sequencer2D-S: bidirectional nn.LSTM along rows and columns in place of attention."""
    return _timm("sequencer2d_s", 224)


def mend_target_timm_convit_tiny():
    """ConViT-Ti: gated positional self-attention, relative indices built lazily."""
    return _timm("convit_tiny", 224)


def mend_target_timm_mvitv2_tiny():
    """MViTv2-T: pooling attention, decomposed relative positions, shapes computed in Python."""
    return _timm("mvitv2_tiny", 224)


def mend_target_timm_swinv2_cr_tiny():
    """SwinV2-CR-T: scaled cosine attention, continuous relative position bias."""
    return _timm("swinv2_cr_tiny_ns_224", 224)


def mend_target_timm_hiera_tiny():
    """Hiera-T: hierarchical ViT with unroll/reroll of the token order (MAE-style masks)."""
    return _timm("hiera_tiny_224", 224)


def mend_target_timm_vit_small_dynamic_img_size():
    """ViT-S/16 with dynamic_img_size=True: position embeddings resampled to the input's grid."""
    return _timm("vit_small_patch16_224", 96, dynamic_img_size=True)
