"""``mend fix`` with a break outside the analysed tree: one run (module-scoped) of the
smallest project -- one target calling an 'installed' module (tests/fixtures/fix/outside/
extlib) plus an in-tree ``int(t)``. Checks: exit 1 while verified fixes stay unapplied,
``--patch`` applies with ``patch -p1 -d <copy of the import root>`` and gives exactly the
verified source, the installed file untouched, ``int(t)`` rewritten and verified."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "fix" / "outside"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("outside")
    # the 'installed' module under a site-packages folder: what the working directory holds
    # outside site-packages is the user's own, written in place
    ext, proj = root / "site-packages", root / "outside" / "proj"
    shutil.copytree(FIXTURE / "extlib", ext)
    shutil.copytree(FIXTURE / "proj", proj)
    patch = root / "ext.patch"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(ext)])}
    r = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--format", "json", "--patch", str(patch), str(proj)],
                       capture_output=True, text=True, cwd=root, timeout=600, env=env)
    return root, ext, proj, patch, r


def test_exit_1_while_verified_fixes_are_unapplied(run):
    _, _, proj, _, r = run
    assert r.returncode == 1, r.stderr  # the in-tree fix was verified but not written (no --write)
    report = json.loads(r.stdout)
    verified = {(Path(f["file"]).name, f["rule"]) for f in report["fixes"] if f["status"] == "verified"}
    assert ("targets.py", "GM303") in verified and ("layers.py", "GM101") in verified, report["fixes"]
    (t,) = report["fix_targets"]
    assert t["breaks_before"] >= 2 and t["breaks_after"] == 0 and t["outputs_equal"] is True
    assert "int(x.abs().sum())" in (proj / "targets.py").read_text()  # nothing written without --write


def test_int_t_becomes_a_long_tensor(run):
    r = run[4]
    fix = next(f for f in json.loads(r.stdout)["fixes"] if f["rule"] == "GM303")
    assert "+    k = x.abs().sum().long()" in fix["diff"]


def test_patch_applies_to_a_copy_and_equals_the_verified_source(run):
    root, ext, _, patch, r = run
    from rewrites.fixes import fix_source

    text = patch.read_text()
    assert text.startswith("--- a/mend_ext/layers.py\n+++ b/mend_ext/layers.py\n"), text
    original = (ext / "mend_ext" / "layers.py").read_text()
    copy = root / "copy"
    shutil.copytree(ext, copy)
    p = subprocess.run(["patch", "-p1", "-d", str(copy)], input=text, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    patched = (copy / "mend_ext" / "layers.py").read_text()
    assert patched == fix_source(original, lines={9}, tensor_lines={9}).new_source  # the overlay's source
    assert "y = torch.where(h.sum() > 0, h * 2, h - 1)" in patched
    assert (ext / "mend_ext" / "layers.py").read_text() == original  # never written in place
    assert "apply with: patch -p1 -d" in r.stderr


# -- a fix as edits of the original file (SARIF's replacements) ----------------------------

def _apply(text: str, reps) -> str:
    """``reps`` (each against the original ``text``) applied, last first."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    at = lambda line, col: starts[line - 1] + col  # noqa: E731
    for r in sorted(reps, key=lambda r: (r.line, r.col), reverse=True):
        text = text[:at(r.line, r.col)] + r.text + text[at(r.end_line, r.end_col):]
    return text


@pytest.mark.parametrize("raw, new", [
    (b"a\r\nb\r\nc\r\n", "import torch\na\nB\nc\n"),  # CRLF kept in what is inserted; an insertion at the top
    (b"\xef\xbb\xbfa\nb", "a\nb\nc\n"),  # a BOM (no column of line 1) and a last line without an ending
    (b"x\ny\nz", "x\nz"),  # a deletion
    (b"x\ny\n", ""),  # everything, up to the end of the text
    (b"def f(x):\n    if x.sum() > 0:\n        x = x * 2\n    return x\n",
     "import torch\n\n\ndef f(x):\n    x = torch.where(x.sum() > 0, x * 2, x)\n    return x\n"),
])
def test_replacements_turn_the_original_file_into_the_fixed_one(raw, new):
    from graphmend.core.sources import SourceText
    from graphmend.fixing import replacements

    source = SourceText.decode(raw)
    reps = replacements(source, new)
    assert reps and all((r.line, r.col) <= (r.end_line, r.end_col) for r in reps)
    original = raw.decode(source.encoding).removeprefix("\ufeff")
    assert _apply(original, reps) == source.render(new).removeprefix("\ufeff")
    assert replacements(source, source.text) == []
