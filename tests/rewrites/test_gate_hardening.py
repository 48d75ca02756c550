"""Hardening: the gate accepts mend's own output, generated code is formatted,
``mend fix`` exits 1 when its only fix is rejected, the declared Python range is true."""

from __future__ import annotations

import ast
import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rewrites.fixes import fix_source
from rewrites.scan import scan_source

REPO = Path(__file__).resolve().parents[2]
FIX_FIXTURES = REPO / "tests" / "fixtures" / "fix"
# every file the fixes rewrite: the corpus and the fix fixtures (installed-package fixture included)
FIXED_FILES = sorted([*(REPO / "corpus").glob("*.py"), *FIX_FIXTURES.rglob("*.py")])


def _mend(*args, cwd):
    # the first call only: what these runs show is not recompiles (tests/tracer/test_recompiles.py's are)
    args = (*args, "--calls", "1") if args[0] in ("analyze", "fix") or "--dynamic" in args else args
    return subprocess.run([sys.executable, "-m", "graphmend", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO)})


def _changed_lines(old: str, new: str) -> set[int]:
    """1-based lines of ``new`` that the fix inserted or changed (from the diff)."""
    out: set[int] = set()
    sm = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    for tag, _, _, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            out.update(range(j1 + 1, j2 + 1))
    return out


def _fix_everything(text: str, line_length: int = 88):
    """Every rewrite the fixes can make in ``text`` (each line treated as one Dynamo broke on),
    cost-changing ones included: every shape of code mend writes."""
    every = range(1, text.count("\n") + 2)
    return fix_source(text, tensor_lines=every, shape_lines=every, numpy_lines=every, unsafe=True,
                      line_length=line_length)


# -- the gate: mend's guards and helpers are not breaks --------------------------------------

def test_static_detectors_report_nothing_on_lines_mend_wrote():
    rewritten = 0
    for path in FIXED_FILES:
        text = path.read_text(encoding="utf-8")
        r = _fix_everything(text)
        assert r.error is None, (path, r.error)
        if not r.changed:
            continue
        rewritten += 1
        changed = _changed_lines(text, r.new_source)
        hits = [(f.line, f.rule, f.source_line) for f, _, _ in scan_source(r.new_source, str(path)).findings
                if f.line in changed]
        assert not hits, (path.name, hits)
    assert rewritten >= 10  # the corpus really was rewritten


def test_mend_helpers_are_known_to_the_detectors():
    from rewrites.fixes import family_modules
    from rewrites.fixes.base import Helper
    from rewrites.guards import is_mend_helper

    helpers = [v for m in family_modules() for v in vars(m).values() if isinstance(v, Helper)]
    assert len({h.name for h in helpers}) == len(helpers) >= 11
    for h in helpers:
        # a helper may define a few functions together (the opaque-op runtime): each is mend's
        nodes = [n for n in ast.parse(h.source).body if isinstance(n, ast.FunctionDef)]
        assert nodes and nodes[0].name == h.name, h.name
        assert all(is_mend_helper(n) for n in nodes), [n.name for n in nodes]
    with pytest.raises(ValueError, match="_mend_"):
        Helper("def print_later(*args):\n    pass\n")


GUARDED = '''import torch
import logging
from torch.compiler import is_compiling

logger = logging.getLogger(__name__)


@torch.compile
def f(x):
    if not torch.compiler.is_compiling():
        print("eager", x)
    if not torch._dynamo.is_compiling():
        logger.info("eager %s", x.sum().item())
    if torch.compiler.is_dynamo_compiling():
        y = x * 2
    else:
        y = x * x.max().item()
    if not is_compiling() and (x > 0).any():
        logger.warning("positive")
    ok = torch.compiler.is_compiling() or bool(x.sum() > 0)
    z = x if torch.compiler.is_compiling() else x[x > 0]
    assert torch.compiler.is_compiling() or (x > 0).all()
    while not torch.compiler.is_compiling() and x.sum() > 10:
        x = x / 2
    return y, ok, z
'''


def test_code_compiled_code_never_runs_is_not_a_break():
    # hand-written guards in every spelling: nothing inside them is traced
    assert scan_source(GUARDED, "g.py").findings == []
    # the same code without the guards: every one of those lines is a finding
    bare = (GUARDED.replace("not torch.compiler.is_compiling()", "flag").replace("not torch._dynamo.is_compiling()", "flag")
            .replace("torch.compiler.is_dynamo_compiling()", "flag").replace("not is_compiling()", "flag")
            .replace("torch.compiler.is_compiling()", "flag"))
    found = {(f.line, f.rule) for f, _, _ in scan_source(bare, "g.py").findings}
    assert found == {(11, "GM201"), (13, "GM202"), (13, "GM301"), (17, "GM301"), (18, "GM101"), (19, "GM202"),
                     (20, "GM303"), (21, "GM502"), (23, "GM104")}, sorted(found)


def test_guard_that_reads_a_tensor_first_is_still_a_break():
    # the tensor is read before the flag: that breaks; the body still never runs compiled
    src = ("import torch\n\n@torch.compile\ndef f(x):\n    if (x > 0).any() and not torch.compiler.is_compiling():\n"
           "        print(x)\n    if torch.compiler.is_compiling() and x.sum() > 0:\n        print(x)\n    return x\n")
    assert [(f.line, f.rule) for f, _, _ in scan_source(src, "g.py").findings] == [(5, "GM101"), (7, "GM101"),
                                                                                     (8, "GM201")]


def test_precommit_gate_passes_on_mended_code(tmp_path):
    """``mend fix --write`` then ``mend check`` (the hook): nothing on a line mend wrote."""
    proj = tmp_path / "project"
    shutil.copytree(FIX_FIXTURES / "project", proj)
    original = (proj / "models.py").read_text(encoding="utf-8")
    fixed = _mend("fix", "--write", "--quiet", str(proj), cwd=tmp_path)
    assert fixed.returncode in (0, 1), fixed.stderr
    text = (proj / "models.py").read_text(encoding="utf-8")
    changed = _changed_lines(original, text)
    assert changed
    check = _mend("check", "--format", "json", "models.py", cwd=proj)
    assert check.returncode in (0, 1), check.stderr
    lines = {f["line"] for f in json.loads(check.stdout)["findings"]}
    assert not lines & changed, (sorted(lines & changed), text)


# -- exit codes --------------------------------------------------------------------------

REJECTED_ONLY = '''import torch
from torch import nn


class Broadcast(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x.sum(0)
        else:
            y = x
        return y * 2


def mend_target_broadcast():
    return Broadcast(), (torch.randn(3, 5).abs(),)
'''


def test_fix_whose_only_fix_is_rejected_exits_1(tmp_path):
    (tmp_path / "models.py").write_text(REJECTED_ONLY, encoding="utf-8")
    r = _mend("fix", "--write", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "[rejected]" in r.stderr
    assert (tmp_path / "models.py").read_text(encoding="utf-8") == REJECTED_ONLY


# -- generated code reads like a person wrote it ----------------------------------------

def _ruff_format(text: str, line_length: int) -> str:
    out = subprocess.run([sys.executable, "-m", "ruff", "format", "--isolated", f"--line-length={line_length}", "-"],
                         input=text, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("line_length", [88, 119])
def test_fixed_code_is_stable_under_the_formatter(line_length):
    """Formatted code in, formatted code out: formatting the fixed file changes no line the
    fix wrote (the file is formatted first, so any change would be the fix's)."""
    checked = 0
    for path in FIXED_FILES:
        formatted = _ruff_format(path.read_text(encoding="utf-8"), line_length)
        r = _fix_everything(formatted, line_length)
        if not r.changed:
            continue
        checked += 1
        again = _ruff_format(r.new_source, line_length)
        changed = _changed_lines(formatted, r.new_source)
        moved = [j for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
                     a=r.new_source.splitlines(), b=again.splitlines(), autojunk=False).get_opcodes()
                 if tag != "equal" for j in range(i1 + 1, i2 + 1)]
        assert not set(moved) & changed, (path.name, "".join(difflib.unified_diff(
            r.new_source.splitlines(True), again.splitlines(True), "fixed", "formatted")))
    assert checked >= 10


def test_logging_guard_is_on_its_own_line():
    src = ("import logging\nimport torch\nlogger = logging.getLogger(__name__)\n\n\ndef f(x):\n"
           "    logger.warning_once(\"slow path\")  # once\n    return x\n")
    r = fix_source(src)
    assert "    if not torch.compiler.is_compiling():\n        logger.warning_once(\"slow path\")  # once\n" \
        in r.new_source
    assert not any(line.lstrip().startswith("if ") and not line.rstrip().endswith(":")
                   for line in r.new_source.splitlines())


def test_line_length_comes_from_the_formatter_config(tmp_path):
    from graphmend.core.config import ConfigError, load_config

    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n", encoding="utf-8")
    assert load_config([tmp_path]).line_length == 100
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 120\n", encoding="utf-8")
    assert load_config([tmp_path]).line_length == 120
    (tmp_path / "pyproject.toml").write_text("[tool.mend]\n", encoding="utf-8")
    assert load_config([tmp_path]).line_length == 88
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = \"wide\"\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="line-length"):
        load_config([tmp_path])


# -- the declared Python range -------------------------------------------------------------

def test_every_tomllib_import_has_its_python_310_fallback():
    """requires-python says 3.10: tomllib is 3.11's, so every import of it in shipped code goes
    through graphmend.core.config's fallback to tomli (declared for python < 3.11)."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.10"
    assert "tomli>=2; python_version < '3.11'" in project["dependencies"]
    bare = []
    for folder in ("graphmend", "tracer", "rewrites", "reports", "corpus"):
        for path in (REPO / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import) and any(a.name == "tomllib" for a in node.names) \
                        and path != REPO / "graphmend" / "core" / "config.py":
                    bare.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not bare, bare
    # and what is shipped parses as Python 3.10
    for folder in ("graphmend", "tracer", "rewrites", "reports"):
        for path in (REPO / folder).rglob("*.py"):
            ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 10))
