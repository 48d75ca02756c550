"""The GPU sample of the population: every model the CPU population table
(docs/results.md) brings fewer breaks with verified fixes, built
exactly as ``mend sweep`` builds it (tiny config, random weights), one target each, for
``benchmarks/population_gpu.sh``. torchaudio: the three models the lengths-to-mask fix takes
to one graph, and Tacotron2 (its training step); transformers: the three multimodal and text
classes that `torch_compilable_check`'s rewrite reaches (T5Gemma2, ModernVBert, Qwen3-VL-MoE).
timm, torchvision and diffusers have no verified fix in the population yet, so no sample here.
"""

from graphmend.sweep.hf import target as _hf
from graphmend.sweep.torchaudio_models import target as _audio


def mend_target_ta_conformer():
    return _audio("Conformer")


def mend_target_ta_emformer():
    return _audio("Emformer")


def mend_target_ta_emformer_rnnt():
    return _audio("emformer_rnnt_model")


def mend_target_ta_tacotron2():
    return _audio("Tacotron2")


def mend_target_hf_t5gemma2():
    return _hf("T5Gemma2ForSequenceClassification")


def mend_target_hf_modernvbert():
    return _hf("ModernVBertForSequenceClassification")


def mend_target_hf_qwen3_vl_moe():
    return _hf("Qwen3VLMoeModel")
