"""The issue's precise-detection lists, one assertion per pattern, inside a module's forward."""

from __future__ import annotations

import pytest

from rewrites.scan import scan_source

HEADER = """import torch
from torch import nn, Tensor


class M(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList([nn.Linear(4, 4)])

    def forward(self, x, t, h, mask=None, err=None, tol=1e-3):
        layers = self.layers
        h = h.float()
        err = (x - h).abs().max()
"""

NOT_BREAKS = [
    "if x.shape[0] > 1:", "if mask is None:", "if self.training:", "if isinstance(x, Tensor):",
    "if self.config.flag:", "if len(layers) > 2:", "if x.dim() == 3:", "if x.dtype == torch.float16:",
    'if x.device.type == "cuda":', "if torch.jit.is_scripting():", "if torch.compiler.is_compiling():",
    "if x.size(-1) != 4 and x.numel() > 0:", "if x.requires_grad or torch.is_tensor(x):",
    "while len(layers) > 3:",
]
BREAKS = [
    ("if (x > 0).any():", "GM101"), ("if h.abs().max() > 1e4:", "GM101"), ("if t.item() > 0:", "GM101"),
    ("while err > tol:", "GM104"), ("if torch.isinf(x).any():", "GM101"),
    ("if mask is not None and mask.sum() > 0:", "GM101"), ("if x.max(-1).values.min() > 0:", "GM101"),
]


def _codes(line: str) -> list[str]:
    body = HEADER + f"        {line}\n            x = x + 1\n        return x\n"
    result = scan_source(body, path="m.py")
    assert result.error is None
    return [f.rule for f, _k, _r in result.findings if f.line == body.count("\n") - 2]


@pytest.mark.parametrize("line", NOT_BREAKS)
def test_not_a_break(line):
    assert _codes(line) == []


@pytest.mark.parametrize("line,code", BREAKS)
def test_is_a_break(line, code):
    assert code in _codes(line)


def test_item_condition_is_gm1_and_gm3():
    assert set(_codes("if t.item() > 0:")) == {"GM101", "GM301"}


def test_assert_forms():
    src = HEADER + "        assert (x >= 0).all()\n        assert (x >= 0).all(), f'bad {x.sum()}'\n        return x\n"
    lines = [f.line for f, _k, _r in scan_source(src).findings if f.rule == "GM401"]
    # Dynamo turns a tensor assert with a constant (or no) message into torch._assert_async
    assert lines == [src.count("\n") - 1]


def test_positions_and_fields():
    src = "import torch\n\ndef f(x: torch.Tensor):\n    s = 'é'; v = x.sum().item()\n    return v\n"
    (finding, key, _root), = scan_source(src, path="/abs/f.py").findings
    assert (finding.rule, finding.line, finding.col) == ("GM301", 4, 17)  # 0-based characters, not bytes
    assert finding.end_line == 4 and finding.end_col == 31
    assert finding.function == "f" and key == "f" and finding.category == "host-scalar"
    assert finding.source_line == "    s = 'é'; v = x.sum().item()" and finding.status == "potential"


def _rules(src: str) -> list[tuple[str, int]]:
    result = scan_source(src, path="m.py")
    assert result.error is None
    return sorted((f.rule, f.line) for f, _k, _r in result.findings)


SKIPPED_CALLS = [
    ("import time", "time.perf_counter()"), ("import time", "time.time()"), ("import time", "time.monotonic_ns()"),
    ("import time", "time.sleep(0)"), ("from time import perf_counter as clock", "clock()"),
    ("import timeit", "timeit.default_timer()"), ("from datetime import datetime", "datetime.now()"),
    ("import datetime", "datetime.date.today()"), ("import random", "random.random()"),
    ("import os", "os.getpid()"), ("import uuid", "uuid.uuid4()"), ("import torch", "torch.manual_seed(0)"),
]
TRACED_CALLS = [
    ("import os", "os.getenv('HOME')"), ("import random", "random.randint(1, 3)"), ("import os", "os.path.join('a', 'b')"),
    ("import torch", "torch.seed()"), ("from mytime import time", "time()"),
]


@pytest.mark.parametrize("imp,call", SKIPPED_CALLS)
def test_skipped_host_call_is_gm605(imp, call):
    src = f"{imp}\nimport torch\n\n\ndef f(x: torch.Tensor):\n    y = x * 2\n    t = {call}\n    return y, t\n"
    assert _rules(src) == [("GM605", 7)]


@pytest.mark.parametrize("imp,call", TRACED_CALLS)
def test_traced_host_call_is_not_flagged(imp, call):
    src = f"{imp}\nimport torch\n\n\ndef f(x: torch.Tensor):\n    y = x * 2\n    t = {call}\n    return y, t\n"
    assert _rules(src) == []


GUARDED = {
    "compiler": "    if not torch.compiler.is_compiling():\n        print(time.time())\n",
    "dynamo": "    if not torch._dynamo.is_compiling():\n        print(time.time())\n",
    "dynamo_compiling": "    if torch.compiler.is_dynamo_compiling():\n        pass\n    else:\n        print(time.time())\n",
    "transformers_relative": "    if not is_torchdynamo_compiling():\n        print(time.time())\n",
    "local_wrapper": "    if not _compiling():\n        print(time.time())\n",
    "early_return": "    if torch.compiler.is_compiling():\n        return y\n    print(time.time())\n    logger.info('eager')\n",
    "early_return_not": "    if not torch._dynamo.is_compiling():\n        print(time.time())\n        return y\n",
    "early_continue": "    for i in range(2):\n        if torch.compiler.is_compiling():\n            continue\n"
                      "        print(time.time())\n",
}


@pytest.mark.parametrize("case", sorted(GUARDED))
def test_code_dead_under_compile_is_not_flagged(case):
    src = ("import logging\nimport time\nimport torch\nfrom ...utils import is_torchdynamo_compiling\n\n"
           "logger = logging.getLogger(__name__)\n\n\ndef _compiling():\n    \"\"\"Whether Dynamo traces.\"\"\"\n"
           "    return torch.compiler.is_compiling()\n\n\ndef f(x: torch.Tensor):\n    y = x * 2\n"
           + GUARDED[case] + "    return y\n")
    assert _rules(src) == []


def test_code_after_a_guard_that_falls_through_is_flagged():
    # the early-exit reading must not swallow code compiled code does reach
    src = ("import time\nimport torch\n\n\ndef f(x: torch.Tensor):\n    if torch.compiler.is_compiling():\n"
           "        x = x + 1\n    print(time.time())\n    return x\n")
    assert _rules(src) == [("GM201", 8), ("GM605", 8)]


def test_local_function_returning_tensor_and_bool_factories():
    src = ("import torch\nfrom torch import Tensor\n\n\ndef iou(a: Tensor, b: Tensor) -> Tensor:\n    return a * b\n\n\n"
           "def nms(boxes: Tensor, order: Tensor, n: int):\n    ious = iou(boxes, boxes)[0]\n"
           "    order = order[ious <= 0.5]\n    seen = torch.zeros(n, dtype=torch.bool)\n"
           "    picked = boxes[seen[order]]\n    return order, picked\n")
    assert _rules(src) == [("GM502", 11), ("GM502", 13)]


def test_numpy_value_as_numpy_size_and_zero_d_index():
    src = ("import numpy as np\nimport torch\n\n\ndef f(x: torch.Tensor, order: torch.Tensor, plan, k: int):\n"
           "    z = np.zeros((4, np.sum(plan[:k])), dtype=np.int32)\n    ok = np.zeros((4, len(plan)))\n"
           "    i = order[0]\n    best = x[x.argmax()]\n    return x[i], z, ok, best, x[order]\n")
    assert _rules(src) == [("GM303", 9), ("GM303", 10), ("GM604", 6)]


def test_benchmark_programs_regions_and_negatives():
    """tests/fixtures/scan_recall: programs whose breaks sit in free functions a target returns or
    torch.compile wraps; the functions that compile cleanly (guards, shape branches) give nothing."""
    from pathlib import Path

    from graphmend.core.config import Config
    from rewrites.scan import scan_paths

    root = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "scan_recall"
    found = {(Path(f.file).name, f.function) for f in scan_paths([str(root)], Config()).findings}
    assert {("box_ops.py", "greedy_nms"), ("box_ops.py", "postprocess"), ("ddim_scheduler.py", "DDIMScheduler.step"),
            ("ode_solvers.py", "odeint_adaptive"), ("beam_search.py", "beam_search"),
            ("graph_utils.py", "bfs_levels"), ("profiling.py", "timed_step"),
            ("profiling.py", "Trainer.train_step"), ("profiling.py", "decorated_step")} <= found
    assert not {name for name in found if name[0] == "clean_code.py"}
    assert not found & {("profiling.py", "guarded_step"), ("profiling.py", "dynamo_guarded_step"),
                        ("box_ops.py", "encode_boxes"), ("ode_solvers.py", "odeint_fixed"),
                        ("beam_search.py", "greedy_decode"), ("graph_utils.py", "GCNConv.forward")}
