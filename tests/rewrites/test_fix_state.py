"""GM702 end to end: corpus/recompiles.py (a step counter, an annealed temperature, a lazy
length cache, a size bounded by a branch) through ``mend fix --write``. A plain run names the
fix and its flag and writes nothing (the fix has a caveat: CUDA graphs); with
``--unsafe-fixes`` the recompile entries the manifest marks fixable pass every check, are
partially verified for the caveat alone and written, the rest stay as advice; the written
file, captured again over three calls of other sizes, no longer recompiles on them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "corpus"


def _fix(folder: Path, *flags: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--format", "json", "--quiet", "--write",
                          *flags, str(folder)], capture_output=True, text=True, timeout=900, cwd=folder,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "MEND_CACHE_DIR": str(folder.parent / "cache")})
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory) -> tuple[dict, Path]:
    """(the --unsafe-fixes run's report, the file it wrote); a plain run before it wrote nothing."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("recompiles") / "proj"
    folder.mkdir()
    model = folder / "recompiles.py"
    shutil.copy(CORPUS / "recompiles.py", model)
    plain = _fix(folder)
    assert model.read_text(encoding="utf-8") == (CORPUS / "recompiles.py").read_text(encoding="utf-8")
    offered = {f["line"]: f for f in plain["fixes"] if f["rule"] == "GM702"}
    assert offered[22]["status"] == "advice" and "--unsafe-fixes" in offered[22]["advice"], offered
    assert "CUDA graphs" in offered[22]["reason"], offered
    return _fix(folder, "--unsafe-fixes"), model


def _manifest() -> dict:
    with open(CORPUS / "manifest.toml", "rb") as f:
        return {k: v for k, v in tomllib.load(f)["targets"].items() if k.startswith("recompiles.py::")}


def test_the_fixable_recompiles_are_verified_and_the_others_stay_advice(fixed):
    report, _ = fixed
    fixes = {(f["rule"], f["line"]): f for f in report["fixes"] if f["rule"].startswith("GM7")}
    entries = [e for v in _manifest().values() for e in v["recompiles"]]
    for e in entries:
        got = fixes.get((e["rule"], e["line"]))
        if e["fixable"]:
            # every check ran and passed; what the proof lacks is the caveat alone
            assert got is not None and got["status"] == "partially verified", (e, got)
            assert [p.split(":")[0] for p in got["partial"]] == ["caveat"] and not got["skipped_checks"], got
            assert {"compiled (aot_eager, two shapes)", "replicate", "module attributes"} <= set(got["checks"]), got
        else:
            assert got is None or got["status"] == "advice", (e, got)
    advice = fixes[("GM702", 68)]  # the length cache, compared in a branch
    assert "used as a Python number at line 68 (`seq_len > self.max_seq_len_cached`)" in advice["reason"], advice
    # no other family's refusal speaks for a line only a recompile named
    assert not [f for f in report["fixes"] if f["line"] == 68 and f["rule"] != "GM702"]


def test_the_written_counter_keeps_its_name_a_python_number(fixed):
    _, model = fixed
    text = model.read_text(encoding="utf-8")
    assert "        self._step = self._step + 1\n" in text
    assert "        warmup = min(1.0, self._step.double() / 100)\n" in text
    assert text.count("    @property\n") == 2 and "    def step(self):\n" in text
    # the cache and the bounded size are as they were
    original = (CORPUS / "recompiles.py").read_text(encoding="utf-8")
    tail = original[original.index("class LazyRotary"):]
    assert text.endswith(tail)
    import importlib.util

    spec = importlib.util.spec_from_file_location("mended_recompiles", model)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import torch

    m = mod.StepScaled()
    m(torch.randn(2, 5, 16))
    m.step = 41  # the user's own reads and writes go through the property
    m(torch.randn(2, 5, 16))
    assert m.step == 42 and type(m.step) is int and "_step" not in m.state_dict()


def test_the_written_file_no_longer_recompiles_on_the_value(fixed):
    from graphmend.core.config import Config
    from graphmend.core.discovery import discover
    from tracer.capture import capture_targets

    _, model = fixed
    specs = discover([str(model)], Config(root=str(model.parent))).targets
    got = {t.name.split("::")[1]: t for t in capture_targets(specs, modes=("eval",), calls=3)}
    for name in ("mend_target_step_counter", "mend_target_temperature"):
        t = got[name]
        assert t.error is None and not t.breaks and t.graph_count == 1, (name, t.error)
        assert not t.caused_recompiles, (name, t.recompiles)
        assert t.replay_recompile == "", (name, t.replay_recompile)  # settled: calls made again reuse its graph
    assert [r.rule for r in got["mend_target_lazy_rope_cache"].caused_recompiles] == ["GM702"]


HIDDEN_READER = '''import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.step = 0

    def scale(self):
        return getattr(self, "step") / 10

    def forward(self, x):
        self.step += 1
        return self.proj(x) * self.scale()


def mend_target_m():
    torch.manual_seed(0)
    return M(), (torch.randn(2, 8),)
'''


def test_a_reader_the_rewrite_does_not_reach_is_rejected(tmp_path):
    """``getattr(self, "step")`` in a method the rewrite leaves alone reads the property, whose
    ``.item()`` breaks the graph the recompile was in: verification sees the new break and
    rejects the fix, and nothing is written even with --unsafe-fixes."""
    pytest.importorskip("torch")
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "m.py").write_text(HIDDEN_READER, encoding="utf-8")
    report = _fix(folder, "--unsafe-fixes", "--no-cache")
    fix = next(f for f in report["fixes"] if f["rule"] == "GM702")
    assert fix["status"] == "rejected" and "a new break appeared: GM301" in fix["reason"], fix
    assert (folder / "m.py").read_text(encoding="utf-8") == HIDDEN_READER
    assert report["fix_targets"][0]["recompiles_after"] == report["fix_targets"][0]["recompiles_before"] == 1
