"""What `mend fix` proves before it calls a fix verified (tests/fixtures/fix/verify_project):
a rewritten arm that never ran leaves the fix `unverified` (never written, exit 1), the
target's own `Target(inputs=...)` exercises it, and a target with nothing to take gradients
of is verified eval only and says so. One `mend fix --write` run shared by the module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "fix" / "verify_project"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    pytest.importorskip("torch")
    proj = tmp_path_factory.mktemp("verify") / "project"
    shutil.copytree(FIXTURE, proj)
    before = {p.name: p.read_bytes() for p in proj.glob("*.py")}
    out = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--write", "--format", "json", str(proj)],
                         capture_output=True, text=True, cwd=proj.parent, timeout=900,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    fixes = {Path(f["file"]).name: f for f in json.loads(out.stdout)["fixes"]}
    return proj, before, out, fixes


def test_an_arm_that_never_ran_is_unverified_and_not_written(run):
    proj, before, out, fixes = run
    f = fixes["rare.py"]
    assert f["status"] == "unverified"
    assert "a rewritten arm never ran: the condition at line 14" in f["reason"] and "never true" in f["reason"]
    assert "inputs=[(args, kwargs)]" in f["reason"]  # says how to give the input that takes it
    assert f["checks"] == []  # nothing is claimed for it
    assert (proj / "rare.py").read_bytes() == before["rare.py"]
    assert out.returncode == 1  # an unverified candidate is a finding
    assert "rare.py:14: GM101 [unverified]" in out.stderr


def test_target_inputs_exercise_the_rare_arm(run):
    proj, before, _, fixes = run
    f = fixes["rare_given.py"]
    assert f["status"] == "verified", f["reason"]
    assert {"eval", "train+grad", "autocast", "train+grad autocast", "bf16", "inputs", "exceptions",
            "arms"} <= set(f["checks"])
    assert {"module hooks", "torch.func.grad", "replicate", "compiled (aot_eager, two shapes)",
            "output aliasing"} <= set(f["checks"])
    # vmap cannot take the original's data-dependent branch, and an embedding's gradient does
    # not depend on its weight: the checks it cannot serve, said
    assert {s.split(":")[0] for s in f["skipped_checks"]} == {"torch.func.vmap", "double backward"}
    text = (proj / "rare_given.py").read_text()
    assert "ids = torch.where((ids >= self.limit).any(), ids * 0, ids)" in text


def test_nothing_to_differentiate_is_verified_eval_only_and_said(run):
    proj, _, out, fixes = run
    f = fixes["counts.py"]
    assert f["status"] == "verified"
    assert "train+grad" not in f["checks"] and "train+grad autocast" not in f["checks"] and "eval" in f["checks"]
    # the ways of running it that take gradients are not run either (train+grad's entry says why)
    assert f["skipped_checks"][0] == "train+grad: no parameters and no floating-point input to take gradients of"
    assert [s.split(":")[0] for s in f["skipped_checks"][1:]] == ["torch.func.vmap"]
    assert "double backward" not in f["checks"] and "compiled (aot_eager, two shapes)" not in f["checks"]
    # the compiled program is still compared, in eval
    assert "compiled eval (aot_eager, two shapes)" in f["checks"]
    assert "not checked: train+grad: no parameters" in out.stderr
    assert "torch.where" in (proj / "counts.py").read_text()
