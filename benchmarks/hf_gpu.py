"""The transformers models whose fixes the eval table verifies and no earlier GPU run timed
with the current fix pipeline, one unit per target, for the GPU cost gate (docs/benchmarks.md,
"Session 15 on the GPU"); the real-size Mixtral last, so a sweep cut short by its deadline
has the small ones::

    python3 benchmarks/cost_sweep.py benchmarks/hf_gpu.py --split benchmarks/hf_gpu.py \\
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
