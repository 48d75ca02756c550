"""GM604 end to end: a NumPy reduction of a Python list read back as a size (BigBird's
random-attention plan) is found at the break's own line, rewritten to the builtin, verified;
``np.interp`` (the diffusers schedulers' ``set_timesteps``) goes through the interp helper."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BLOCK_PLAN = '''import numpy as np
import torch


class BlockSparse(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)

    def plan(self, length, block, n_rand):
        plan_from, plan_rand = [], []
        if (2 * n_rand + 5) < (length // block):
            plan_from += [int((2 * n_rand + 5) * block), length]
            plan_rand += [n_rand, 0]
        else:
            plan_from.append(length)
            plan_rand.append(n_rand)
        return plan_from, plan_rand

    def rand_blocks(self, length, block, heads, plan_from, plan_rand):
        n_blocks = length // block
        last = plan_from.index(length)
        adj = [np.zeros((n_blocks, np.sum(plan_rand[: last + 1])), dtype=np.int32) for _ in range(heads)]
        return [a[1 : n_blocks - 1, :] for a in adj]

    def forward(self, x):
        length = x.shape[1]
        plan_from, plan_rand = self.plan(length, 4, 2)
        adj = torch.tensor(np.stack(self.rand_blocks(length, 4, 2, plan_from, plan_rand), axis=0), dtype=torch.long)
        return self.proj(x) + adj.float().mean() + adj.shape[-1]


def mend_target_block_plan():
    torch.manual_seed(0)
    return BlockSparse().eval(), (torch.randn(2, 64, 16),)
'''


def _fix_written(folder: Path, name: str, text: str, status: int = 0) -> tuple[dict, Path]:
    """``mend fix --write`` over ``folder`` holding ``name`` with ``text``, exiting ``status``
    (1: a rewrite was refused): its JSON report and the file's path."""
    pytest.importorskip("torch")
    repo = Path(__file__).resolve().parents[2]
    model = folder / name
    model.write_text(text, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--format", "json", "--quiet", "--write",
                          str(folder)], capture_output=True, text=True, timeout=900, cwd=folder,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    assert run.returncode == status, run.stderr
    return json.loads(run.stdout), model


def test_numpy_size_at_the_break_line_fixed_and_verified(tmp_path):
    report, model = _fix_written(tmp_path, "blockplan.py", BLOCK_PLAN)
    verified = [(f["rule"], f["line"]) for f in report["fixes"] if f["status"] == "verified"]
    assert verified == [("GM604", 23)], report["fixes"]
    target = report["fix_targets"][0]
    assert target["breaks_before"] > 0 and target["breaks_after"] == 0 and target["outputs_equal"] is True, target
    # targets[] carries the same outcome beside the capture (the shape the fix JSON promises)
    analysed = report["targets"][0]
    assert analysed["name"] == target["name"] and analysed["breaks"], analysed
    assert {k: analysed[k] for k in ("breaks_before", "breaks_after", "outputs_equal", "unexercised_branches")} == \
        {k: target[k] for k in ("breaks_before", "breaks_after", "outputs_equal", "unexercised_branches")}
    text = model.read_text(encoding="utf-8")
    assert "np.zeros((n_blocks, sum(plan_rand[: last + 1]))" in text and "import math" not in text


SCHEDULE = '''import numpy as np
import torch


class Schedule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("alphas_cumprod", torch.linspace(0.999, 0.05, 100))
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        sigmas = np.array(((1 - self.alphas_cumprod) / self.alphas_cumprod) ** 0.5)
        timesteps = np.linspace(0, 99, 7)[::-1].copy()
        sigmas = np.interp(timesteps, np.arange(0, len(sigmas)), sigmas)
        return self.proj(x) * torch.from_numpy(sigmas).to(x.dtype).sum()


def mend_target_schedule():
    torch.manual_seed(0)
    return Schedule().eval(), (torch.randn(2, 8),)
'''


def test_interp_at_the_break_line_goes_through_the_helper_and_is_verified(tmp_path):
    report, model = _fix_written(tmp_path, "schedule.py", SCHEDULE)
    fixes = {(f["rule"], f["line"]): f for f in report["fixes"]}
    assert fixes[("GM604", 14)]["status"] == "verified", fixes
    assert {"train+grad", "compiled (aot_eager, two shapes)"} <= set(fixes[("GM604", 14)]["checks"])
    target = report["fix_targets"][0]
    assert target["breaks_before"] == 1 and target["breaks_after"] == 0 and target["outputs_equal"] is True, target
    text = model.read_text(encoding="utf-8")
    assert text.count("def _mend_interp(") == 1
    assert "        sigmas = _mend_interp(timesteps, np.arange(0, len(sigmas)), sigmas)\n" in text


DESCENDING = '''import numpy as np
import torch


class Descending(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        xp = np.linspace(1.0, 0.0, 9)
        fp = np.arange(9.0) ** 2
        w = np.interp(np.array([0.05, 0.3, 0.62, 0.9]), xp, fp)
        return self.proj(x) * torch.from_numpy(w).to(x.dtype).sum()


def mend_target_descending():
    torch.manual_seed(0)
    return Descending().eval(), (torch.randn(2, 8),)
'''


def test_interp_on_a_descending_xp_is_rejected_and_not_written(tmp_path):
    """np.interp asks for an increasing xp and gives its binary search's values otherwise; the
    helper's interval search gives others, and the compiled-program check sees it."""
    report, model = _fix_written(tmp_path, "descending.py", DESCENDING, status=1)
    fixes = {(f["rule"], f["line"]): f for f in report["fixes"]}
    assert fixes[("GM604", 13)]["status"] == "rejected", fixes
    assert "compiled" in fixes[("GM604", 13)]["reason"]
    assert model.read_text(encoding="utf-8") == DESCENDING
