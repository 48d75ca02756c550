"""GM501's found index end to end: corpus/sampling.py (a scheduler that finds its step with
``nonzero`` and reads it back with ``.item()``, stepped by a sampling loop) through
``mend fix --write``. The fix passes every check; the patched program, re-traced over three
calls of other batch sizes, is one graph that no call recompiles past the first size change
(automatic dynamic shapes), where the original split the loop and recompiled its scheduler per step."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_scheduler_index_stays_in_the_graph_and_the_loop_compiles_once(tmp_path):
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
    (fix,) = report["fixes"]
    assert (fix["rule"], fix["line"], fix["end_line"], fix["status"]) == ("GM501", 26, 30, "verified"), fix
    assert not fix["skipped_checks"] and {"train+grad", "torch.func.vmap", "replicate",
                                          "compiled (aot_eager, two shapes)", "retrace"} <= set(fix["checks"]), fix
    (target,) = report["fix_targets"]
    assert (target["breaks_before"], target["breaks_after"]) == (3, 0), target  # the loop frame's skip too
    assert target["recompiles_before"] > 0 and target["recompiles_after"] == 0, target
    text = model.read_text(encoding="utf-8")
    assert ("        index = _mend_sampling_index_for_timestep_26_op(schedule_timesteps == timestep)\n"
            "        torch._check(index >= 0)\n        return index\n") in text
    assert "    pos = 1 if len(indices) > 1 else 0\n" in text  # moved into the op's function, as written
    # the patched program, re-traced over the capture's three calls of other sizes: one graph, no recompile
    assert (target["graph_breaks_after"], target["recompiles_after"]) == (0, 0), target
