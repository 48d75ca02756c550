"""The MoE models GM501's opaque op touches, for one GPU cost-gate run (docs/benchmarks.md,
"The opaque MoE op on the GPU"): transformers' eager experts, tiny and at a real size::

    python -m graphmend fix benchmarks/moe_gpu.py --jobs 3 --bench \\
        --bench-modes default,reduce-overhead --bench-device cuda
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hf_bench_targets as H  # noqa: E402


def mend_target_hf_mixtral():
    return H.mend_target_hf_mixtral()


def mend_target_hf_qwen2_moe():
    return H.mend_target_hf_qwen2_moe()


def mend_target_hf_olmoe():
    return H.mend_target_hf_olmoe()


def mend_target_hf_mixtral_base():
    return H.mend_target_hf_mixtral_base()


def mend_target_hf_switch_transformers():
    from corpus.hf_models import mend_target_hf_switch_transformers

    return mend_target_hf_switch_transformers()


def mend_target_hf_nllb_moe():
    from corpus.hf_models import mend_target_hf_nllb_moe

    return mend_target_hf_nllb_moe()
