"""A fix that lets Dynamo go further into a function it stopped in exposes the next break
there. In a file outside the analysed tree mend plans rewrites only at the lines Dynamo
logged, so the exposed break gets a further round: planned, and the target verified again
with it, in the same run (torch 2.11's Longformer: its second size assert breaks as a new
site once the first is fixed, which rejected the first fix alone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphmend.core.model import Break, Frame, TargetResult
from graphmend.verify.run import Verdict, compare_breaks

REPO = Path(__file__).resolve().parents[2]

# Dynamo skips `forward` at the loop's first assert (a break in a loop), so it never logs
# the second one (line 15) before the first is fixed
LOOP = '''import torch


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(8, 8)

    def forward(self, h, mask):
        n = mask.sum()
        for _ in range(2):
            h = self.q(h)
            assert list(h.size()) == [2, n, 8], f"bad size {h.size()}"
            h = h * 2
            assert list(h.size()) == [2, n, 8], f"bad out {h.size()}"
        return h + 1
'''

# the break the fix exposes is one mend refuses to rewrite
REFUSED = LOOP.replace('''            h = h * 2
            assert list(h.size()) == [2, n, 8], f"bad out {h.size()}"
''', '''            if h.sum() > 0:
                self.seen.append(1)
''').replace("        self.q = torch.nn.Linear(8, 8)\n", "        self.q = torch.nn.Linear(8, 8)\n        self.seen = []\n")

TARGETS = '''import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lib"))

import stack  # noqa: E402


def mend_target_stack():
    torch.manual_seed(0)
    return stack.Stack().eval(), (torch.randn(2, 4, 8), torch.ones(4, dtype=torch.long))
'''


def _fix(tmp_path: Path, model: str, cache: Path) -> tuple[dict, str]:
    (tmp_path / "lib").mkdir(exist_ok=True)
    (tmp_path / "tree").mkdir(exist_ok=True)
    (tmp_path / "lib" / "stack.py").write_text(model, encoding="utf-8")
    (tmp_path / "tree" / "targets.py").write_text(TARGETS, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--format", "json", str(tmp_path / "tree")],
                         capture_output=True, text=True, timeout=900, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(REPO), "MEND_CACHE_DIR": str(cache)})
    assert run.returncode == 1, run.stderr  # verified fixes, unwritten (no --write)
    return json.loads(run.stdout), run.stderr


def test_the_break_a_fix_exposes_is_fixed_in_the_same_run_and_the_verdict_is_reused(tmp_path):
    pytest.importorskip("torch")
    report, _ = _fix(tmp_path, LOOP, tmp_path / "cache")
    target = report["fix_targets"][0]
    # Dynamo logged only line 13; line 15 came from the re-trace
    assert target["breaks_before"] == 1, target
    fixes = [(f["rule"], f["line"], f["status"]) for f in report["fixes"]]
    assert fixes == [("GM401", 13, "verified"), ("GM401", 15, "verified")], report["fixes"]
    assert target["breaks_after"] == 0 and target["remaining"] == [] and target["outputs_equal"] is True, target
    # both asserts are in the one diff
    diffs = [f["diff"] for f in report["fixes"]]
    assert all("_mend_check" in d or "torch._check" in d for d in diffs), diffs
    # once more with the same cache: both rounds' verdicts are reused, not redone
    again, err = _fix(tmp_path, LOOP, tmp_path / "cache")
    assert "verdicts were reused" in err, err
    assert [(f["rule"], f["line"], f["status"]) for f in again["fixes"]] == fixes


def test_an_exposed_break_mend_refuses_keeps_the_first_fix_and_says_why(tmp_path):
    pytest.importorskip("torch")
    report, _ = _fix(tmp_path, REFUSED, tmp_path / "cache")
    by_line = {f["line"]: f for f in report["fixes"]}
    assert by_line[15]["status"] == "advice" and "side effects" in by_line[15]["reason"], by_line[15]
    target = report["fix_targets"][0]
    if report["targets"][0]["breaks"][0].get("skipped_frame"):
        # torch 2.13 on: Dynamo names the frame it skipped, which now compiles up to line 15
        assert by_line[14]["status"] == "verified", report["fixes"]
        assert "stops at GM101 at stack.py:15" in by_line[14]["reason"], by_line[14]
        assert [r.split(":")[:2] for r in target["remaining"]] == [["GM101 stack.py", "15"]], target
    else:
        # torch 2.11 does not: the break at 15 is new, and no rewrite of it can be verified
        assert by_line[14]["status"] == "rejected", report["fixes"]
        assert "a new break appeared: GM101 at stack.py:15" in by_line[14]["reason"], by_line[14]


ORIGINAL = "def forward():\n    call()\n\ndef f():\n    if c:\n        x = 1\n    else:\n        x = 2\n    g()\n"
PATCHED = "def forward():\n    call()\n\ndef f():\n    x = where(c, 1, 2)\n    g()\n"


def _brk(line, top, reason="r"):
    return Break(rule="GM101", category="control-flow", reason=reason, file="/m.py", line=line, function="f",
                 stack=[Frame("/m.py", top, "forward"), Frame("/m.py", line, "f")])


@pytest.mark.parametrize("count_after, surfaced", [(2, True), (3, False)])
def test_exposed_are_the_breaks_new_to_the_retrace_at_lines_on_disk(count_after, surfaced):
    before = TargetResult("t", "/m.py", "t", graph_break_count=3, breaks=[_brk(5, 2)])
    # patched line 6 is the original's line 9; patched line 5 is one the rewrite wrote
    after = TargetResult("t", "/m.py", "t", graph_break_count=count_after,
                         breaks=[_brk(6, 2, reason="g"), _brk(5, 2, reason="w")])
    v = Verdict()
    compare_breaks(v, before, after, {"/m.py": PATCHED}, {"/m.py": ORIGINAL})
    assert [(b.line, b.reason) for b in v.exposed] == [(9, "g")]
    assert bool(v.surfaced) is surfaced  # surfaced or new, it is exposed either way
