"""The shipped pre-commit hooks: their manifest, and the real ``pre-commit`` package running
``mend check`` on commits in a temporary git repository.

The checkout may hold uncommitted work, so the repository test uses a ``repo: local`` hook
with ``language: system`` that mirrors the shipped hook's entry and arguments (read from
.pre-commit-hooks.yaml) and runs the installed ``mend``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"

MODEL = '''import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return torch.relu(y)
'''


def _hooks() -> dict:
    from pre_commit.clientlib import load_manifest

    return {h["id"]: h for h in load_manifest(str(MANIFEST))}


def test_manifest_is_valid_for_pre_commit_and_has_both_hooks():
    hooks = _hooks()  # pre-commit's own schema validation; raises on a bad manifest
    static = hooks["mend-check"]
    assert static["entry"] == "mend check" and static["language"] == "python"
    assert static["types"] == ["python"] and static["pass_filenames"] is True and static["require_serial"] is True
    assert not any("torch" in d for d in static["additional_dependencies"])
    dyn = hooks["mend-check-dynamic"]
    assert dyn["entry"] == "mend check --dynamic" and dyn["pass_filenames"] is False
    assert dyn["stages"] == ["manual"]
    assert any(d.startswith("torch") for d in dyn["additional_dependencies"])


def test_hook_environment_would_not_install_torch():
    """``language: python`` installs the package with its base dependencies: torch stays an extra."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.split(">")[0].split("<")[0].split("=")[0].strip().lower() == "torch"
                   for d in project["dependencies"])
    assert any(d.startswith("torch") for d in project["optional-dependencies"]["torch"])


def _git(repo: Path, *args: str, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=check, timeout=120)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A git repository with pre-commit installed and a local hook mirroring mend-check."""
    if shutil.which("mend") is None or shutil.which("git") is None:
        pytest.fail("the 'mend' and 'git' commands must be on PATH (pip install -e .)")
    repo = tmp_path_factory.mktemp("precommit_repo")
    home = tmp_path_factory.mktemp("precommit_home")
    env = {**os.environ, "HOME": str(home), "PRE_COMMIT_HOME": str(home / "cache"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "NO_COLOR": "1"}
    env.pop("GIT_DIR", None)
    shipped = _hooks()["mend-check"]
    # pre-commit runs `entry` from the repo root on the staged files, as it would the shipped hook.
    config = (
        "repos:\n- repo: local\n  hooks:\n"
        f"  - id: {shipped['id']}\n    name: {shipped['id']}\n    entry: {shipped['entry']}\n"
        "    language: system\n"
        f"    types: {shipped['types']}\n".replace("'", "")
        + f"    pass_filenames: {str(shipped['pass_filenames']).lower()}\n"
        f"    require_serial: {str(shipped['require_serial']).lower()}\n"
    )
    (repo / ".pre-commit-config.yaml").write_text(config)
    (repo / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n\n[tool.mend]\n')
    (repo / "model.py").write_text(MODEL)
    (repo / "README.md").write_text("demo\n")
    _git(repo, "init", "-q", "-b", "main", env=env)
    subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=repo, env=env, check=True,
                   capture_output=True, timeout=120)
    _git(repo, "add", "-A", env=env)
    first = _git(repo, "commit", "-q", "-m", "clean model", env=env, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    return repo, env


def _commit(repo: Path, env: dict, message: str) -> subprocess.CompletedProcess:
    _git(repo, "add", "-A", env=env)
    return _git(repo, "commit", "-q", "-m", message, env=env, check=False)


def test_commit_with_new_print_in_forward_fails_then_baseline_lets_it_through(repo):
    repo, env = repo
    model = repo / "model.py"
    model.write_text(MODEL.replace("        return torch.relu(y)", "        print(y)\n        return torch.relu(y)"))
    out = _commit(repo, env, "debug print")
    assert out.returncode != 0, "the hook let a new graph break through"
    text = out.stdout + out.stderr
    assert "model.py:12" in text and "GM201" in text and "1 new" in text
    # Recording it as known (what a team does for a break they accept) lets the commit through.
    subprocess.run(["mend", "check", "--update-baseline", "model.py"], cwd=repo, env=env, check=True,
                   capture_output=True, timeout=120)
    assert "GM201" in (repo / ".mend-baseline.json").read_text()
    out = _commit(repo, env, "known print")
    assert out.returncode == 0, out.stdout + out.stderr
    # The known break moved down a few lines: still known.
    model.write_text("# a header comment\n\n" + model.read_text())
    out = _commit(repo, env, "move")
    assert out.returncode == 0, out.stdout + out.stderr


def test_unrelated_change_passes(repo):
    repo, env = repo
    (repo / "README.md").write_text("demo, more words\n")
    (repo / "util.py").write_text("def helper(x):\n    return x + 1\n")
    out = _commit(repo, env, "unrelated")
    assert out.returncode == 0, out.stdout + out.stderr
