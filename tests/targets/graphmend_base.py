"""GraphMend's models at a real size, for the GPU cost gate (one real-size config),
with transformers 4.52.4 where their breaks are. Random weights, no downloads; built on the GPU when there is one (too big to
verify on a 2-core CPU in reasonable time)::

    python -m graphmend fix tests/targets/graphmend_base.py --bench --bench-modes default,reduce-overhead \\
        --bench-device cuda
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graphmend_models import _longformer, _phi3  # noqa: E402


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def mend_target_phi3_longrope_base():
    """Phi-3 with LongRoPE at hidden 1024, 16 heads, 4 layers, 2048 original positions: one
    prompt of 4096 tokens (the long table), and one of 1024 verification also runs (the short)."""
    import graphmend

    model = _phi3(hidden=1024, heads=16, layers=4, ffn=2816, vocab=32000, original=2048, longest=8192)
    model = model.to(_device())
    torch.manual_seed(1)
    long = torch.randint(1, 32000, (1, 4096), device=_device())
    short = torch.randint(1, 32000, (1, 1024), device=_device())
    return graphmend.Target(model, (), dict(input_ids=long), inputs=[((), dict(input_ids=short))])


def mend_target_longformer_base():
    """Longformer at base width (hidden 768, 12 heads, window 512), 6 layers, one sequence of
    4000 tokens, padded to 4096 (its logger warning; no global attention)."""
    return _longformer(hidden=768, heads=12, layers=6, ffn=3072, vocab=32000, window=512, seq=4000, batch=1,
                       device=_device())
