"""Two diffusers sampling loops end to end: corpus/sampling.py through one ``mend fix --write``.

Euler (GM501's found index): the scheduler finds its step with ``nonzero`` and reads it back
with ``.item()``. DDIM (GM303's tensor index): the scheduler indexes its alphas with the
timestep, a 0-d tensor, and picks the previous step's alpha with a conditional expression on
it. Every fix passes every check; each patched program, re-traced over three calls of other
batch sizes, is one graph that no call recompiles past the first size change (automatic
dynamic shapes), where the original split the loop and recompiled per step."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALL_CHECKS = {"train+grad", "torch.func.vmap", "replicate", "compiled (aot_eager, two shapes)", "retrace"}


def test_the_schedulers_indexes_stay_in_the_graph_and_each_loop_compiles_once(tmp_path):
    pytest.importorskip("torch")
    folder = tmp_path / "proj"
    folder.mkdir()
    model = folder / "sampling.py"
    shutil.copy(ROOT / "corpus" / "sampling.py", model)
    run = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--format", "json", "--quiet", "--write",
                          str(folder)], capture_output=True, text=True, timeout=900, cwd=folder,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "MEND_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode in (0, 1), run.stderr
    report = json.loads(run.stdout)
    fixes = {(f["rule"], f["line"]): f for f in report["fixes"]}
    assert set(fixes) == {("GM501", 29), ("GM303", 74), ("GM303", 75), ("GM102", 75)}, sorted(fixes)
    for fix in fixes.values():
        assert fix["status"] == "verified" and not fix["skipped_checks"] and ALL_CHECKS <= set(fix["checks"]), fix
    assert fixes[("GM501", 29)]["end_line"] == 33
    targets = {t["name"].split("::")[1]: t for t in report["fix_targets"]}
    euler, ddim = targets["mend_target_sampling_loop"], targets["mend_target_ddim_loop"]
    assert (euler["breaks_before"], euler["breaks_after"]) == (3, 0), euler  # the loop frame's skip too
    assert (ddim["breaks_before"], ddim["breaks_after"]) == (2, 0), ddim
    for target in (euler, ddim):
        assert target["recompiles_before"] > 0, target
        # the patched program, re-traced over the capture's three calls of other sizes: one graph, no recompile
        assert (target["graph_breaks_after"], target["recompiles_after"]) == (0, 0), target
    text = model.read_text(encoding="utf-8")
    assert ("        index = _mend_sampling_index_for_timestep_29_op(schedule_timesteps == timestep)\n"
            "        torch._check(index >= 0)\n        return index\n") in text
    assert "    pos = 1 if len(indices) > 1 else 0\n" in text  # moved into the op's function, as written
    # the index helper defined once, called for the timestep and, in torch.where's arm, the step before it
    assert text.count("def _mend_index(x, i):") == 1
    assert "        alpha_prod_t = _mend_index(self.alphas_cumprod, timestep)\n" in text
    assert ("            _mend_index(\n                self.alphas_cumprod,\n"
            "                torch.where(prev_timestep >= 0, prev_timestep, 0),\n            ),\n") in text
