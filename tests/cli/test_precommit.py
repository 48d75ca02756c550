"""The shipped pre-commit hooks: their manifest, and the real ``pre-commit`` package running
``mend check`` on commits in a temporary git repository.

The checkout may hold uncommitted work, so the repository test uses a ``repo: local`` hook
with ``language: system`` that mirrors the shipped hook's entry and arguments (read from
.pre-commit-hooks.yaml) and runs the installed ``mend``. The README's own block is run as
written too, against a clone of the checkout's HEAD, with the hook environment pre-commit
builds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    assert static["entry"] == "mend check --" and static["language"] == "python"
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


def test_a_staged_file_named_like_an_option_is_checked_not_obeyed(tmp_path):
    """pre-commit runs ``entry`` then the staged names: a file named ``--output=setup.py``
    must be a path to check, never the option that overwrites setup.py."""
    import shlex

    argv = shlex.split(_hooks()["mend-check"]["entry"])
    assert argv[:2] == ["mend", "check"]
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n')
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "--output=setup.py").write_text("x = 1\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "graphmend", *argv[1:], "--output=setup.py"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert (tmp_path / "setup.py").read_text() == "from setuptools import setup\nsetup()\n"
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 files scanned" in out.stdout


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


# -- the README's pre-commit block, as written --------------------------------------------

def _yaml_blocks(path: Path) -> list[str]:
    import re

    return re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def _precommit_block(path: Path) -> str:
    """The block that fetches the hooks from graphmend's repository."""
    (block,) = [b for b in _yaml_blocks(path) if "id: mend-check" in b and "repos:" in b and "repo: local" not in b]
    return block


def _local_block(path: Path) -> str:
    """The block that runs the installed ``mend`` with no clone."""
    (block,) = [b for b in _yaml_blocks(path) if "id: mend-check" in b and "repo: local" in b]
    return block


PLACEHOLDER_REV = "<commit>"  # what the README writes while no release is tagged


def test_readme_precommit_block_runs_as_written(tmp_path):
    """The README's `.pre-commit-config.yaml`, unchanged but for its repository URL (a clone
    of this checkout's HEAD: uncommitted work is not in it, as for any pre-commit user):
    `pre-commit autoupdate --bleeding-edge` pins the rev it leaves open, then the real hook,
    installed by pre-commit in its own environment, fails a new break and passes without it."""
    import yaml  # pre-commit's own dependency

    block = _precommit_block(ROOT / "README.md")
    (entry,) = yaml.safe_load(block)["repos"]
    assert entry["repo"].startswith("https://") and [h["id"] for h in entry["hooks"]] == ["mend-check",
                                                                                         "mend-check-dynamic"]
    assert set(_hooks()) >= {h["id"] for h in entry["hooks"]}
    (ci_entry,) = yaml.safe_load(_precommit_block(ROOT / "docs" / "ci.md"))["repos"]
    assert (ci_entry["repo"], ci_entry["rev"]) == (entry["repo"], entry["rev"])  # docs/ci.md says the same
    # the pip lines install from the same repository at the same rev (graphmend is on no index)
    import re

    from packaging.requirements import Requirement

    for doc in (ROOT / "README.md", ROOT / "docs" / "ci.md"):
        lines = re.findall(r'pip install "(graphmend[^"]*)"', doc.read_text(encoding="utf-8"))
        assert lines, f"{doc.name} says how to install graphmend"
        for line in lines:
            req = Requirement(line)
            assert req.name == "graphmend" and req.url == f"git+{entry['repo']}@{entry['rev']}", (doc.name, line)
    assert "pip install graphmend " not in (ROOT / "docs" / "ci.md").read_text()

    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PRE_COMMIT_HOME": str(home / "cache"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "NO_COLOR": "1"}
    env.pop("GIT_DIR", None)
    clone = tmp_path / "graphmend"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], env=env, check=True, capture_output=True, timeout=300)
    head = _git(clone, "rev-parse", "HEAD", env=env).stdout.strip()

    project = tmp_path / "project"
    project.mkdir()
    (project / ".pre-commit-config.yaml").write_text(block.replace(entry["repo"], str(clone)))
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n\n[tool.mend]\n')
    (project / "model.py").write_text(MODEL.replace("        return torch.relu(y)",
                                                    "        print(y)\n        return torch.relu(y)"))
    _git(project, "init", "-q", "-b", "main", env=env)

    def pre_commit(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=project, env=env,
                              capture_output=True, text=True, timeout=900)

    if entry["rev"] == PLACEHOLDER_REV:
        # what the README says to do with it
        assert "autoupdate --bleeding-edge" in block
        update = pre_commit("autoupdate", "--bleeding-edge")
        assert update.returncode == 0, update.stdout + update.stderr
        pinned = yaml.safe_load((project / ".pre-commit-config.yaml").read_text())["repos"][0]
        assert pinned["rev"] == head
    else:  # a tag or sha as written: it must exist (the README once pinned v0.1.0, never tagged)
        found = _git(clone, "rev-parse", "--verify", "--quiet", f"{entry['rev']}^{{commit}}", env=env, check=False)
        assert found.returncode == 0, f"the README pins rev {entry['rev']!r}, which the repository does not have"
    _git(project, "add", "-A", env=env)
    failed = pre_commit("run", "mend-check", "--files", "model.py")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "GM201" in failed.stdout and "model.py:12" in failed.stdout and "1 new" in failed.stdout
    (project / "model.py").write_text(MODEL)
    _git(project, "add", "-A", env=env)
    passed = pre_commit("run", "mend-check", "--files", "model.py")
    assert passed.returncode == 0, passed.stdout + passed.stderr


# -- the README's local (no clone) pre-commit block, as written ----------------------------

def _staged(project: Path, env: dict) -> list[str]:
    out = _git(project, "diff", "--cached", "--name-only", "--diff-filter=ACMR", "-z", env=env).stdout
    return [name for name in out.split("\0") if name]


def _run_like_pre_commit(project: Path, config: Path, env: dict) -> subprocess.CompletedProcess:
    """What ``pre-commit run`` does with a ``language: system`` hook at commit time: the
    staged files its ``types`` select (``python``: a .py/.pyi name), appended to ``entry``
    (split as a shell would) and ``args``, in one call (``require_serial``) from the
    repository root, with the caller's environment (no hook environment is built)."""
    import shlex

    import yaml

    (repo_entry,) = yaml.safe_load(config.read_text())["repos"]
    (hook,) = repo_entry["hooks"]
    assert repo_entry["repo"] == "local" and hook["language"] == "system"
    assert hook.get("types") == ["python"] and hook.get("require_serial") is True
    files = [f for f in _staged(project, env) if f.endswith((".py", ".pyi"))]
    if not files and not hook.get("always_run"):
        return subprocess.CompletedProcess([], 0, "(no files to check) Skipped", "")
    argv = [*shlex.split(hook["entry"]), *hook.get("args", [])]
    if hook.get("pass_filenames", True):
        argv += files
    return subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_readme_local_precommit_block_runs_as_written(tmp_path):
    """The README's ``repo: local`` block (``language: system``: the ``mend`` on PATH, no clone),
    written unchanged into a temporary git repository's .pre-commit-config.yaml, blocks a
    commit that adds a graph break and lets the fixed file through.

    With the ``pre-commit`` package importable (the dev extra), the real ``pre-commit``
    installs its git hook and ``git commit`` runs it. The test installs nothing: where
    pre-commit is missing, and always as a cross-check, it parses the snippet and runs the
    hook's ``entry`` on the staged files exactly as pre-commit would (``_run_like_pre_commit``).
    ``mend`` is the installed console script; PYTHONPATH points its imports at this checkout."""
    import importlib.util

    import yaml

    block = _local_block(ROOT / "README.md")
    (entry,) = yaml.safe_load(block)["repos"]
    assert entry["repo"] == "local"
    (hook,) = entry["hooks"]
    shipped = _hooks()["mend-check"]
    # the local hook is the shipped one, run from the installed mend
    assert hook["language"] == "system"
    for key in ("id", "entry", "types", "require_serial"):
        assert hook[key] == shipped[key], key
    assert hook.get("pass_filenames", True) is shipped["pass_filenames"]
    if shutil.which("mend") is None or shutil.which("git") is None:
        pytest.fail("the 'mend' and 'git' commands must be on PATH (pip install -e .)")

    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PRE_COMMIT_HOME": str(home / "cache"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "NO_COLOR": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("GIT_DIR", None)
    project = tmp_path / "project"
    project.mkdir()
    config = project / ".pre-commit-config.yaml"
    config.write_text(block)
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n\n[tool.mend]\n')
    (project / "model.py").write_text(MODEL.replace("        return torch.relu(y)",
                                                    "        print(y)\n        return torch.relu(y)"))
    (project / "notes.txt").write_text("not python\n")
    _git(project, "init", "-q", "-b", "main", env=env)
    _git(project, "add", "-A", env=env)
    real = importlib.util.find_spec("pre_commit") is not None
    if real:
        subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=project, env=env, check=True,
                       capture_output=True, timeout=120)

    def verdicts() -> list[subprocess.CompletedProcess]:
        runs = [_run_like_pre_commit(project, config, env)]
        if real:
            runs.append(_git(project, "commit", "-q", "-m", "change", env=env, check=False))
        return runs

    for out in verdicts():
        text = out.stdout + out.stderr
        assert out.returncode == 1, text
        assert "GM201" in text and "model.py:12" in text and "1 new" in text, text
    (project / "model.py").write_text(MODEL)
    _git(project, "add", "-A", env=env)
    for out in verdicts():
        assert out.returncode == 0, out.stdout + out.stderr
    if real:
        assert _git(project, "log", "--format=%s", env=env).stdout.strip() == "change"
