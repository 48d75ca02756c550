"""The MoE models GM501's opaque op touches, for one GPU cost-gate run: transformers' eager experts, tiny and at a real size, one
unit per target so that a run cut short resumes::

    python3 benchmarks/cost_sweep.py tests/targets/moe_gpu.py --split tests/targets/moe_gpu.py \\
        --modes default,reduce-overhead --device cuda --parallel 3 --jobs 2 --out build/sweep-moe
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
