"""``mend analyze``'s fix column and its "N issues have a candidate fix" are the planner's own
verdict at each issue's place (graphmend.fixing.plan_issues), never "the rule has a fixer":
a GM101 branch the planner rewrites is a candidate; one it refuses is advice, with its reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from graphmend.core.config import Config
from graphmend.pipeline import AnalyzeOptions, analyze

SRC = '''import torch
from torch import nn


class Gate(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class LayerDrop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            if torch.rand([]) < 0.1:
                continue
            x = layer(x)
        return x
'''


def test_the_fix_of_an_issue_is_what_the_planner_does_there(tmp_path, monkeypatch):
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "m.py").write_text(SRC, encoding="utf-8")
    report = analyze([tmp_path], Config(), AnalyzeOptions(dynamic=False))
    by_line = {i.line: i for i in report.issues if i.rule == "GM101"}
    gate, drop = by_line[7], by_line[19]
    assert (gate.fix, gate.fix_why) == ("safe", "")
    # GM101 has a fixer, but not for a random draw that skips the rest of the loop
    assert drop.fix is None and "random draw" in drop.fix_why, drop.fix_why
    safe = sum(i.fix == "safe" for i in report.issues)
    assert any(s.startswith(f"{safe} of {len(report.issues)} issues have a candidate fix") or
               s.startswith(f"{safe} of {len(report.issues)} issues has a candidate fix") for s in report.next_steps), \
        report.next_steps


def test_planning_at_analyze_time_imports_no_torch(tmp_path):
    (tmp_path / "m.py").write_text(SRC, encoding="utf-8")
    code = ("import sys; from graphmend.core.config import Config; "
            "from graphmend.pipeline import AnalyzeOptions, analyze; "
            f"r = analyze([{str(tmp_path)!r}], Config(), AnalyzeOptions(dynamic=False)); "
            "assert any(i.fix == 'safe' for i in r.issues); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2],
                         env={"MEND_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
