"""Gates: machine formats name files relative to the repository root (the git top
level, else the pyproject.toml's folder, else the analysed folder), so that GitHub annotations
and SARIF locations attach to the file wherever in the repository mend was pointed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app
from graphmend.core.sources import report_root

MODEL = '''import torch


@torch.compile
def forward(x):
    print(x)
    return x + 1
'''


def mend(cwd: Path, monkeypatch, *args: str):
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _tree(top: Path, git: bool, pyproject: bool) -> Path:
    top.mkdir(parents=True, exist_ok=True)
    if git:
        (top / ".git").mkdir(parents=True)  # what `git init` leaves; a worktree's .git file works the same
    if pyproject:
        (top / "pyproject.toml").write_text("[tool.mend]\n")
    (top / "mymodels").mkdir(parents=True)
    (top / "mymodels" / "block.py").write_text(MODEL)
    return top


def _github_files(text: str) -> set[str]:
    return set(re.findall(r"file=([^,:]+)", text))


def _sarif_uris(text: str) -> tuple[set[str], str]:
    run = json.loads(text)["runs"][0]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    return uris, run["originalUriBaseIds"]["PROJECTROOT"]["uri"]


@pytest.mark.parametrize("git,pyproject", [(True, False), (True, True), (False, True)])
def test_analysing_a_subfolder_names_files_from_the_repository_root(tmp_path, monkeypatch, git, pyproject):
    top = _tree(tmp_path / "repo", git, pyproject)
    r = mend(top, monkeypatch, "analyze", "--static-only", "mymodels", "--format", "github")
    assert r.exit_code == 1, r.output
    assert _github_files(r.stdout) == {"mymodels/block.py"}
    r = mend(top / "mymodels", monkeypatch, "analyze", "--static-only", ".", "--format", "sarif")
    uris, base = _sarif_uris(r.stdout)
    assert uris == {"mymodels/block.py"} and base == top.resolve().as_uri() + "/"
    doc = json.loads(mend(top, monkeypatch, "analyze", "--static-only", "mymodels", "-f", "json").stdout)
    assert doc["root"] == str(top.resolve())


def test_git_top_level_wins_over_a_nested_pyproject(tmp_path, monkeypatch):
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    proj = _tree(top / "proj", git=False, pyproject=True)
    r = mend(proj, monkeypatch, "check", "--format", "github")
    assert r.exit_code == 1, r.output
    assert _github_files(r.stdout) == {"proj/mymodels/block.py"}
    r = mend(proj, monkeypatch, "check", "--format", "sarif")
    assert _sarif_uris(r.stdout)[0] == {"proj/mymodels/block.py"}


def test_without_repository_or_config_the_analysed_folder_is_the_root(tmp_path, monkeypatch):
    top = _tree(tmp_path / "loose", git=False, pyproject=False)
    r = mend(top, monkeypatch, "analyze", "--static-only", "mymodels", "--format", "github")
    assert _github_files(r.stdout) == {"block.py"}


def test_report_root_rules(tmp_path):
    top = tmp_path / "repo"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "m.py").write_text("x = 1\n")
    assert report_root([top / "a" / "b"]) == str((top / "a" / "b").resolve())
    assert report_root([top / "a" / "b" / "m.py"], top / "a") == str((top / "a").resolve())
    # a config root the analysed folder is not under is no root for it
    assert report_root([top / "a"], top / "a" / "b") == str((top / "a").resolve())
    (top / ".git").write_text("gitdir: /elsewhere/.git/worktrees/repo\n")  # a worktree's .git is a file
    assert report_root([top / "a" / "b"], top / "a") == str(top.resolve())
