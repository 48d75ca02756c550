"""The unsafe GM606 fix for an ``nn.Buffer`` re-assigned in ``forward`` (transformers 5.x
CTRL): the exact rewrite, its refusals, that the rewritten module computes the same and
compiles to one graph, what "unsafe" means here, and ``mend fix --unsafe-fixes`` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewrites.fixes import fix_source, gm6_buffers
from rewrites.scan import scan_source

FIXED = [c for c in gm6_buffers.CASES if c.after is not None]
CTRL, CTRL_FIXED = FIXED[0].before, FIXED[0].after


@pytest.mark.parametrize("case", FIXED, ids=["ctrl", "base-class-chain"])
def test_buffer_fix_text(case):
    """The text, idempotence and the refusal without --unsafe-fixes are test_fix_cases.py's."""
    safe = fix_source(case.before, **case.options(unsafe=False))
    assert [r.rule for r in safe.refused if "--unsafe-fixes" in r.advice] == ["GM606"]
    r = fix_source(case.before, **case.options())
    assert [(s.rule, s.strategy) for s in r.applied] == [("GM606", "buffer_local")]


@pytest.mark.parametrize("case", [c for c in gm6_buffers.CASES if c.after is None],
                         ids=["reassigned", "method-reads", "in-with", "self-passed", "lambda-after",
                              "lambda-before", "not-a-buffer", "not-a-conversion"])
def test_buffer_fix_refused_by_every_family(case):
    assert not fix_source(case.before, **case.options()).changed


def test_buffer_fix_only_at_a_break_line_or_a_known_buffer():
    assert not fix_source(CTRL, lines={1}, unsafe=True).changed
    plain = CTRL.replace("nn.Buffer(torch.randn(n, d), persistent=False)", "torch.randn(n, d)")
    assert fix_source(plain, lines={14}, unsafe=True).changed  # Dynamo broke there: evidence enough


def test_static_scan_reports_the_assignment():
    found = scan_source(CTRL, "ctrl.py").findings
    assert [(f.rule, f.line) for f, *_ in found if f.rule == "GM606"] == [("GM606", 14)]


def _load(src):
    ns: dict = {}
    exec(compile(src, "<ctrl>", "exec"), ns)
    return ns["Model"]


def test_same_values_one_graph_and_what_unsafe_means():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    before = _load(CTRL)(12, 8).eval()
    after = _load(CTRL_FIXED)(12, 8).eval()
    after.load_state_dict(before.state_dict())
    after.pos_encoding.copy_(before.pos_encoding)  # non-persistent: not in the state dict
    x, ids = torch.randn(2, 5, 8), torch.randint(0, 12, (2, 5))
    torch.testing.assert_close(after(x, ids), before(x, ids))
    torch._dynamo.reset()
    assert torch._dynamo.explain(before)(x, ids).graph_break_count >= 1
    torch._dynamo.reset()
    compiled = torch.compile(after, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x, ids), before(x, ids))
    # the unsafe part: the original re-binds its buffer to the input's dtype, the fix does not
    before(x.double(), ids)
    after(x.double(), ids)
    assert before.pos_encoding.dtype == torch.float64 and after.pos_encoding.dtype == torch.float32


def test_mend_fix_unsafe_verifies_the_buffer_fix(tmp_path):
    pytest.importorskip("torch")
    repo = Path(__file__).resolve().parent.parent
    model = tmp_path / "ctrl_like.py"
    model.write_text(CTRL + "\n\ndef mend_target_ctrl():\n    torch.manual_seed(0)\n"
                     "    return Model(12, 8).eval(), (torch.randn(2, 5, 8), torch.randint(0, 12, (2, 5)))\n",
                     encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--unsafe-fixes", "--format", "json", "--quiet",
                          str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    report = json.loads(run.stdout)
    verified = [(f["rule"], f["line"]) for f in report["fixes"] if f["status"] == "verified"]
    assert verified == [("GM606", 14)], (report["fixes"], run.stderr)
    target = report["fix_targets"][0]
    assert target["breaks_before"] >= 1 and target["breaks_after"] == 0 and target["outputs_equal"] is True, target
    assert model.read_text(encoding="utf-8").startswith(CTRL)  # no --write: nothing written
