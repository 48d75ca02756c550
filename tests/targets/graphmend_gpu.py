"""The GraphMend models mend's fixes touch, for one GPU cost-gate run on transformers
4.52.4: Phi-3's LongRoPE (GM101) and
Longformer's padding warning (GM202), tiny and at a real size::

    python -m graphmend fix tests/targets/graphmend_gpu.py --jobs 3 --bench \\
        --bench-modes default,reduce-overhead --bench-device cuda
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import graphmend_base as B  # noqa: E402
import graphmend_models as G  # noqa: E402


def mend_target_phi3_longrope():
    return G.mend_target_phi3_longrope()


def mend_target_longformer():
    return G.mend_target_longformer()


def mend_target_phi3_longrope_base():
    return B.mend_target_phi3_longrope_base()


def mend_target_longformer_base():
    return B.mend_target_longformer_base()
