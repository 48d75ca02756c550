"""Bench targets for transformers models that corpus/hf_models.py does not hold, built the way
benchmarks/survey_hf.py builds them (tiny config, random weights, a right-padded batch):

    MEND_BENCH_FLAGS=--unsafe-fixes MEND_TARGETS=benchmarks/hf_bench_targets.py::mend_target_hf_jetmoe \\
        benchmarks/gpu_bench.sh hf both
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _survey(model_type: str):
    from survey_hf import build

    model, inputs = build(model_type)
    return model, (), inputs


def mend_target_hf_jetmoe():
    """ScatterMoE-style experts: `.tolist()` split sizes (GM302, unsafe fix)."""
    return _survey("jetmoe")


def mend_target_hf_ctrl():
    """transformers 5.x CTRL: an `nn.Buffer` re-bound in `forward` (GM606, unsafe fix)."""
    return _survey("ctrl")
