"""The three eager-expert MoE families GM501 fixes, tiny configs (transformers 5.x), for the
cost gate on a CPU under each torch version (docs/benchmarks.md, "GM501 on torch 2.15")::

    python -m graphmend fix benchmarks/moe_cpu.py --jobs 2 --bench --bench-device cpu -f json -o out.json
"""

import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hf_bench_targets as H  # noqa: E402


def mend_target_hf_qwen2_moe():
    return H.mend_target_hf_qwen2_moe()


def mend_target_hf_mixtral():
    return H.mend_target_hf_mixtral()


def mend_target_hf_openai_privacy_filter():
    return H.mend_target_hf_openai_privacy_filter()
