"""``mend check`` end to end with the real static scanner (rewrites.scan), in process through
typer's runner, plus one subprocess proving the static check never imports torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app

MODEL = '''import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print(y)
        return torch.relu(y)
'''

CLEAN = '''import torch
from torch import nn


class Other(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2
'''


def mend(cwd: Path, monkeypatch, *args: str):
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, ["check", *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n\n[tool.mend]\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    (tmp_path / "pkg" / "other.py").write_text(CLEAN)
    return tmp_path


def test_new_break_fails_listing_location_rule_message_and_hint(project, monkeypatch):
    r = mend(project, monkeypatch)
    assert r.exit_code == 1, r.output
    assert "pkg/model.py:12" in r.output and "GM201" in r.output and "print" in r.output
    assert "fix:" in r.output  # the fix hint
    data = json.loads(mend(project, monkeypatch, "--format", "json").stdout)
    (new,) = data["check"]["new"]
    assert (new["rule"], new["line"], new["function"], new["source"]) == ("GM201", 12, "Net.forward", "print(y)")
    assert new["col"] == data["findings"][0]["col"] is not None  # the scanner's column, carried through
    assert new["fix_hint"] and new["message"]
    assert [f["line"] for f in data["findings"]] == [12]  # the report's findings are the new ones only


def test_update_baseline_then_clean_then_moved_code_stays_known(project, monkeypatch):
    r = mend(project, monkeypatch, "--update-baseline")
    assert r.exit_code == 0, r.output
    path = project / ".mend-baseline.json"
    first = path.read_bytes()
    assert first.endswith(b"}\n")
    (entry,) = json.loads(first)["entries"]
    assert entry == {"file": "pkg/model.py", "rule": "GM201", "function": "Net.forward", "source": "print(y)",
                     "origin": "static", "count": 1}
    assert mend(project, monkeypatch).exit_code == 0
    assert mend(project, monkeypatch, "--update-baseline").exit_code == 0
    assert path.read_bytes() == first  # deterministic
    model = project / "pkg" / "model.py"
    model.write_text("# moved down\n\n\n" + MODEL)
    assert mend(project, monkeypatch).exit_code == 0
    # a second copy of the known line is new (the count went up), and only it is listed
    model.write_text(MODEL.replace("        return torch.relu(y)", "        print(y)\n        return torch.relu(y)"))
    data = json.loads(mend(project, monkeypatch, "-f", "json").stdout)
    assert [e["line"] for e in data["check"]["new"]] == [13] and data["check"]["known"] == 1


def test_stale_entries_only_for_checked_files_and_update_keeps_others(project, monkeypatch):
    (project / "pkg" / "other.py").write_text(MODEL.replace("class Net", "class Net2"))
    assert mend(project, monkeypatch, "--update-baseline").exit_code == 0
    (project / "pkg" / "model.py").write_text(CLEAN)  # the break in model.py is fixed
    (project / "pkg" / "other.py").write_text(CLEAN)  # ...and in other.py, which is not checked below
    data = json.loads(mend(project, monkeypatch, "pkg/model.py", "-f", "json").stdout)
    assert data["check"]["new"] == []
    assert [Path(e["file"]).name for e in data["check"]["stale"]] == ["model.py"]
    r = mend(project, monkeypatch, "pkg/model.py")
    assert r.exit_code == 0 and "stale" in r.output
    assert mend(project, monkeypatch, "--update-baseline", "pkg/model.py").exit_code == 0
    files = [e["file"] for e in json.loads((project / ".mend-baseline.json").read_text())["entries"]]
    assert files == ["pkg/other.py"]  # model.py's stale entry pruned, other.py's kept


def test_non_python_ignored_missing_file_and_bad_baseline_exit_2(project, monkeypatch):
    (project / "notes.txt").write_text("print(x)\n")
    r = mend(project, monkeypatch, "notes.txt")
    assert r.exit_code == 0 and "0 new" in r.output  # nothing to check, not the whole tree
    twice = json.loads(mend(project, monkeypatch, "pkg/model.py", "pkg", "./pkg/model.py", "-f", "json").stdout)
    assert len(twice["check"]["new"]) == 1  # one file named three ways is checked once
    r = mend(project, monkeypatch, "pkg/other.py", "gone.py")
    assert r.exit_code == 2 and "gone.py" in r.output
    (project / "broken.json").write_text("{not json")
    r = mend(project, monkeypatch, "--baseline", "broken.json")
    assert r.exit_code == 2 and "broken.json" in r.output and "not valid JSON" in r.output
    assert len([ln for ln in r.output.splitlines() if ln.strip()]) == 1


def test_config_baseline_path_and_excludes(project, monkeypatch):
    (project / "pyproject.toml").write_text('[tool.mend]\nbaseline = "ci/known.json"\nexclude = ["pkg/other.py"]\n')
    (project / "pkg" / "other.py").write_text(MODEL)
    assert mend(project, monkeypatch, "--update-baseline").exit_code == 0
    entries = json.loads((project / "ci" / "known.json").read_text())["entries"]
    assert [e["file"] for e in entries] == ["../pkg/model.py"] or [e["file"] for e in entries] == \
        [str((project / "pkg" / "model.py").resolve().as_posix())]
    r = mend(project, monkeypatch, "pkg/other.py")  # excluded even when named (pre-commit passes it)
    assert r.exit_code == 0, r.output


def test_sarif_and_github_formats(project, monkeypatch, tmp_path):
    out = tmp_path / "out.sarif"
    r = mend(project, monkeypatch, "--format", "sarif", "--output", str(out))
    assert r.exit_code == 1
    sarif = json.loads(out.read_text())
    results = sarif["runs"][0]["results"]
    assert [x["ruleId"] for x in results] == ["GM201"]
    r = mend(project, monkeypatch, "--format", "github")
    assert r.exit_code == 1 and "::error" in r.stdout and "pkg/model.py" in r.stdout and "GM201" in r.stdout


def test_static_check_never_imports_torch(project):
    code = ("import sys\nfrom graphmend.cli.app import main\n"
            "sys.argv = ['mend', 'check', 'pkg/model.py']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', code)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "NO-TORCH 1", proc.stdout + proc.stderr


def test_unparsable_file_fails_naming_it_and_the_rest_is_still_checked(project, monkeypatch):
    (project / "pkg" / "broken.py").write_text("def forward(self:\n")
    r = mend(project, monkeypatch, "-f", "json")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert [Path(e["file"]).name for e in data["errors"]] == ["broken.py"]
    assert [e["line"] for e in data["check"]["new"]] == [12]  # model.py was still checked


def test_unparsable_file_keeps_its_baseline_entries(project, monkeypatch):
    assert mend(project, monkeypatch, "--update-baseline").exit_code == 0
    (project / "pkg" / "model.py").write_text(MODEL + "def broken(:\n")
    r = mend(project, monkeypatch, "pkg/model.py", "-f", "json")
    assert r.exit_code == 1 and json.loads(r.stdout)["check"]["stale"] == []  # not "fixed": unknown
    mend(project, monkeypatch, "--update-baseline", "pkg/model.py")
    assert "print(y)" in (project / ".mend-baseline.json").read_text()


def test_every_format_counts_what_check_listed(project, monkeypatch):
    """The totals of a check report count its verdict: new, known (baselined) and stale, not
    the findings the check views leave out (they said "0 findings" under a list of new ones)."""
    model = project / "pkg" / "model.py"
    model.write_text(MODEL.replace("        y = self.lin(x)", "        print(x)\n        y = self.lin(x)"))
    assert mend(project, monkeypatch, "--update-baseline").exit_code == 0
    # print(x) is fixed (stale), print(y) stays (known), a tensor branch is new
    model.write_text(MODEL.replace("        return torch.relu(y)",
                                   "        if y.sum() > 0:\n            y = -y\n        return torch.relu(y)"))
    outputs = {fmt: mend(project, monkeypatch, "--format", fmt, "-q") for fmt in
               ("text", "md", "html", "github", "json", "sarif")}
    assert all(r.exit_code == 1 for r in outputs.values()), {f: r.output for f, r in outputs.items()}
    text = outputs["text"].stdout
    assert "1 new, 1 stale, 1 known" in text  # the check section's heading
    (total,) = [ln for ln in text.splitlines() if ln.startswith("Total:")]
    assert "1 new, 1 known, 1 stale" in total and "findings" not in total and "distinct breaks" not in total
    assert "**1** new, 1 known, 1 stale" in outputs["md"].stdout.splitlines()[2]
    html = outputs["html"].stdout
    cards = html[html.index('<div class="cards">'):html.index("</header>")]
    assert "<b>1</b><span>new</span>" in cards and "<b>1</b><span>known</span>" in cards
    assert "<b>1</b><span>stale</span>" in cards and "findings" not in cards
    github = outputs["github"].stdout.splitlines()
    assert len([ln for ln in github if ln.startswith("::error")]) == 1
    (notice,) = [ln for ln in github if ln.startswith("::notice")]
    assert "1 new graph breaks" in notice and "1 known, 1 stale" in notice
    data = json.loads(outputs["json"].stdout)
    s = data["summary"]
    assert (s["check_new"], s["check_known"], s["check_stale"]) == (1, 1, 1)
    assert s["findings"] == len(data["findings"]) == len(data["check"]["new"]) == 1
    sarif = json.loads(outputs["sarif"].stdout)
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in sarif["runs"][0]["results"]] == [13]


def test_without_a_baseline_check_says_how_to_make_one_and_shows_lines_as_written(project, monkeypatch):
    (project / "pkg" / "gate.py").write_text("import torch\n\n\nclass Gate(torch.nn.Module):\n    def forward(self, x):\n"
                                             "        if x.sum()  >  0:\n            return x\n        return -x\n")
    r = mend(project, monkeypatch, "pkg")
    assert r.exit_code == 1, r.output
    assert ("no baseline at " in r.output and "accept today's with `mend check pkg --update-baseline` "
            "(then commit .mend-baseline.json)" in r.output), r.output
    assert "source: if x.sum()  >  0:" in r.output  # the line as written; the key alone is normalised
    assert mend(project, monkeypatch, "pkg", "--update-baseline").exit_code == 0
    assert "no baseline" not in mend(project, monkeypatch, "pkg").output
