"""Rewrites planned from the same lines are written together or not at all. A ternary on a 0-d
index tensor (``table[i] if i >= 0 else one``) is two rewrites at one line: GM303 keeps the index
in the graph, GM102 turns the ternary into ``torch.where``. When the ternary's other arm never
runs, GM102 is unverified; GM303, whose own checks pass, is planned from the same line, and
writing it would write GM102 with it. It takes GM102's verdict, and ``--write`` leaves the file
as it was (graphmend/fix_outcomes.py ``_couple``; graphmend/fixing.py ``_without_strays``, the
same at the write, across targets)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

PROGRAM = '''import torch
from torch import nn


class Table(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.linspace(0.1, 1.0, 10))
        self.one = torch.tensor(1.0)
        self.fc = nn.Linear(4, 4)

    def forward(self, x, t):
        prev_t = t.abs() + 1  # never negative: the ternary's other arm never runs
        a = self.table[prev_t] if prev_t >= 0 else self.one
        return self.fc(x) * a


def mend_target_table():
    torch.manual_seed(0)
    return Table(), (torch.randn(2, 4), torch.tensor(7))
'''


@pytest.mark.slow
def test_a_passing_rewrite_planned_with_an_unverified_one_is_not_written(tmp_path, mend_fix_write):
    path = tmp_path / "table.py"
    path.write_text(PROGRAM)
    _, report = mend_fix_write(path)
    fixes = {f["rule"]: f for f in report["fixes"]}
    assert path.read_text() == PROGRAM, "an unverified rewrite was written"
    assert fixes["GM102"]["status"] == "unverified" and "never false" in fixes["GM102"]["reason"], fixes["GM102"]
    index = fixes["GM303"]
    assert index["status"] == "unverified", index
    assert index["reason"].startswith("applied only with the GM102 rewrite at line 14"), index["reason"]


def test_the_write_leaves_out_the_lines_of_a_rewrite_it_would_not_write():
    """Another target left the rewrite at a shared line unverified: the site that passed there
    takes that verdict, and the lines written are the other sites' only."""
    from graphmend.core.model import UNVERIFIED, VERIFIED
    from graphmend.fixing import _without_strays

    def record(rule, line, status, reason=""):
        return SimpleNamespace(site=SimpleNamespace(rule=rule, line=line), trigger={line}, status=status,
                               reason=reason)

    index, where, other = (record("GM303", 14, VERIFIED), record("GM102", 14, UNVERIFIED, "an arm never ran"),
                           record("GM101", 30, VERIFIED))
    asked = []

    def fix(lines, rules):
        asked.append(set(lines))
        # the planner plans whatever the lines select: both rewrites at line 14
        planned = [s.site for s in (index, where, other) if s.trigger & set(lines)]
        return SimpleNamespace(applied=planned)

    c = SimpleNamespace(sites=[index, where, other], fix=fix)
    _, lines = _without_strays(c, SimpleNamespace(rules=()), lambda s: s.status == VERIFIED)
    assert lines == {30} and asked == [{14, 30}, {30}]
    assert index.status == UNVERIFIED and "GM102 rewrite at line 14" in index.reason and "an arm never ran" in index.reason
    assert other.status == VERIFIED


def test_a_stray_no_site_shares_lines_with_leaves_the_file_unwritten():
    """A rewrite the lines bring in from elsewhere (its own selecting lines are none of theirs):
    no site can be told apart from it, so none of the file's is written, and the write ends."""
    from graphmend.core.model import REJECTED, VERIFIED
    from graphmend.fixing import _without_strays

    def record(rule, line, trigger, status, reason=""):
        return SimpleNamespace(site=SimpleNamespace(rule=rule, line=line), trigger=trigger, status=status,
                               reason=reason)

    region, stray = record("GM501", 40, {40}, VERIFIED), record("GM502", 44, {44}, REJECTED, "a new break")

    def fix(lines, rules):
        return SimpleNamespace(applied=[region.site, stray.site] if lines else [])

    c = SimpleNamespace(sites=[region, stray], fix=fix)
    _, lines = _without_strays(c, SimpleNamespace(rules=()), lambda s: s.status == VERIFIED)
    assert lines == set()
    assert region.status == REJECTED and "GM502 rewrite at line 44" in region.reason


def test_rewrites_that_passed_only_with_one_that_then_failed_are_not_verified(monkeypatch, tmp_path):
    """The rewrites that passed are tried once more together; where one of them then fails,
    the others passed only with it applied and never ran without it: none is verified there
    (graphmend/fix_outcomes.py), so a plain --write writes none of them."""
    import graphmend.fix_outcomes as outcomes
    import graphmend.verify.run as verify_run
    from graphmend.core.config import Config
    from graphmend.core.model import FixTarget, TargetResult, UNVERIFIED
    from graphmend.fix_candidates import SiteRecord, _real
    from graphmend.fixing import FixOptions
    from graphmend.verify.run import Verdict
    from rewrites.fixes.base import Site

    path = str(tmp_path / "m.py")
    branch = SiteRecord(path, Site("GM101", 5, 8, "if -> where", conditions=[(5, 7, 5, 20)]), {5})
    index = SiteRecord(path, Site("GM303", 12, 12, "index"), {12})
    kept = SiteRecord(path, Site("GM301", 20, 20, "item"), {20})
    arm = f"{_real(path)}:5:7"
    remains = (path, "GM301", "Unsupported Tensor.item()")
    runs = iter([
        # all three: the .item() break stays (GM301 rejected), the others pass
        Verdict(arms={arm: [False, True]}, remaining_keys=[remains], key_lines={remains: [20]}),
        # the two that passed, together: the branch's other arm no longer runs
        Verdict(arms={arm: [True]}, inputs=["example"]),
    ])
    monkeypatch.setattr(verify_run, "run_original", lambda *a, **k: SimpleNamespace(read=[]))
    monkeypatch.setattr(verify_run, "verify_target", lambda *a, **k: next(runs))
    monkeypatch.setattr(outcomes, "_patch_for", lambda c, ss, rules: "patched")
    before = TargetResult(name="m.py::t", file=path, function="t")
    ft = FixTarget(name="m.py::t", breaks_before=3, breaks_after=3)
    _, outcome = outcomes._verify_sites(None, before, [branch, index, kept], {path: SimpleNamespace(original="")},
                                        {}, FixOptions(), Config(), ft)
    verdicts = outcome.verdicts
    assert outcome.final is None
    assert verdicts[id(branch)][0] == UNVERIFIED and "was never false" in verdicts[id(branch)][1]
    assert verdicts[id(index)] == (UNVERIFIED, "verified only together with the GM101 rewrite at line 5, which is "
                                               f"then {UNVERIFIED}: {verdicts[id(branch)][1]}")
    assert verdicts[id(kept)][1].startswith("the break remains after the rewrite")
