"""A partial proof is no verdict: a fix one of whose checks could not run (the original is
not deterministic in train mode) or whose family documents a caveat (a warning lost under
torch.compile, a masked max on an all-padding batch) is 'partially verified', and a plain
``mend fix --write`` does not write it; ``--accept-partial`` / ``--unsafe-fixes`` do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''import warnings

import torch
from torch import nn


CALLS = [0]


class Counted(nn.Module):
    """Train mode scales by a call count kept outside the module: no two calls alike."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if self.training:
            CALLS[0] += 1
            h = h * CALLS[0]
        if h.sum() > 0:
            h = h * 2
        else:
            h = h - 1
        return h


def peak(x, lengths):
    pad = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    return x[pad].max()


def legacy(x):
    warnings.warn("legacy() is deprecated")
    return x * 2


def mend_target_counted():
    torch.manual_seed(0)
    return Counted(), (torch.randn(3, 4),)


def mend_target_peak():
    return peak, (torch.randn(2, 5), torch.tensor([3, 5]))


def mend_target_legacy():
    return legacy, (torch.randn(3),)
'''
WHERE = "torch.where(h.sum() > 0, h * 2, h - 1)"
MASKED = 'torch.where(pad, x, float("-inf")).max()'
GUARD = "if not torch.compiler.is_compiling():\n        warnings.warn"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("partial")
    (root / "proj").mkdir()
    return root


def _fix(root: Path, *flags: str, fmt: str = "json") -> tuple[subprocess.CompletedProcess, dict, str]:
    """``mend fix --write --format FMT FLAGS`` on a fresh copy of PROGRAM: (the run, its
    report's fixes by rule, the file's text after it). SARIF: each fix's entry of its
    result's ``properties.fixes``, with the result itself under ``result``."""
    path = root / "proj" / "models.py"
    path.write_text(PROGRAM)
    r = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--write", "--format", fmt, *flags,
                        str(root / "proj")], capture_output=True, text=True, cwd=root, timeout=900,
                       env={**os.environ, "PYTHONPATH": str(REPO), "MEND_CACHE_DIR": str(root / "cache")})
    if fmt == "sarif":
        fixes = {f["rule"]: {**f, "result": res} for res in json.loads(r.stdout)["runs"][0]["results"]
                 for f in res["properties"].get("fixes", ())}
    else:
        fixes = {f["rule"]: f for f in json.loads(r.stdout)["fixes"]}
    return r, fixes, path.read_text()


def test_plain_write_writes_no_partial_proof(project):
    r, fixes, text = _fix(project)
    assert text == PROGRAM, "a plain --write changed the file"
    assert r.returncode == 1, r.stderr
    counted = fixes["GM101"]
    assert counted["status"] == "partially verified"
    assert counted["partial"] and counted["partial"][0].startswith("train+grad: the original is not deterministic")
    assert "train+grad" not in counted["checks"] and "not written without --accept-partial" in counted["reason"]
    assert "--accept-partial writes them" in r.stderr
    # the caveat fixes are unsafe: offered, not planned, without --unsafe-fixes
    for rule in ("GM502", "GM203"):
        assert fixes[rule]["status"] == "advice" and "--unsafe-fixes" in fixes[rule]["advice"], fixes[rule]
    assert "all-padding" in fixes["GM502"]["reason"] and "-W error" in fixes["GM203"]["reason"]
    from graphmend.core.model import Report, summarize

    totals = summarize(Report.from_json(r.stdout))
    assert (totals.fixes_partial, totals.fixes_verified) == (1, 0)


def test_accept_partial_writes_the_fix_a_check_skipped(project):
    # (in SARIF: a partially verified fix is marked so on its result, and never offered as a
    # SARIF fix a viewer would apply, even where --accept-partial writes it)
    r, fixes, text = _fix(project, "--accept-partial", fmt="sarif")
    f = fixes["GM101"]
    assert f["status"] == "partially verified"
    assert f["partial"][0].startswith("train+grad: the original is not deterministic")
    assert WHERE in text, text
    assert MASKED not in text and GUARD not in text  # --accept-partial is no --unsafe-fixes
    message = f["result"]["message"]["text"]
    assert "Fix partially verified (a plain mend fix --write does not apply it)" in message
    assert "written with --accept-partial" in message and "the proof lacks: train+grad" in message
    assert "fixes" not in f["result"]


def test_unsafe_fixes_write_the_caveats_and_say_them(project):
    r, fixes, text = _fix(project, "--unsafe-fixes")
    assert MASKED in text and GUARD in text, text
    assert WHERE not in text  # the skipped check still needs --accept-partial
    for rule, words in (("GM502", "all-padding"), ("GM203", "-W error")):
        f = fixes[rule]
        assert f["status"] == "partially verified", f
        assert len(f["partial"]) == 1 and f["partial"][0].startswith("caveat: ") and words in f["partial"][0]
        assert "written with --unsafe-fixes" in f["reason"]


def test_a_way_of_running_the_original_does_not_support_is_no_gap():
    """Data-dependent branches raise under vmap in the original too: nothing to keep, so the
    proof is whole. A check the original runs but could not be compared in is a gap, and so
    is a core mode the original runs in but that was not compared."""
    from graphmend.verify import NOTHING_TO_TRAIN
    from graphmend.verify.modes import (CHECK_NAMES, COMPILED, COMPILED_DIFFERS, HOOKS, NOT_DETERMINISTIC, TRAIN,
                                        VMAP, proof_gap)

    assert not proof_gap(CHECK_NAMES[VMAP], "the original raises under torch.func.vmap: RuntimeError: data-dependent")
    assert not proof_gap(CHECK_NAMES[TRAIN], NOTHING_TO_TRAIN)
    assert proof_gap(CHECK_NAMES[HOOKS], f"{NOT_DETERMINISTIC} (output differs)")
    assert proof_gap(CHECK_NAMES[COMPILED], f"{COMPILED_DIFFERS} on input example (output differs)")
    assert not proof_gap(CHECK_NAMES[TRAIN], "the original raises in train mode: ValueError: labels")
    assert proof_gap(CHECK_NAMES[TRAIN], f"{NOT_DETERMINISTIC} (output differs)")
    assert proof_gap(CHECK_NAMES[TRAIN], "no floating-point output requires grad")
