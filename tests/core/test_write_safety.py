"""How mend replaces a user's file: an edit saved while mend writes is never lost, owner,
group, mode, hard links and symlinks survive, a kill leaves no temp file behind, and
``mend sweep --targets-dir`` never writes into a folder holding other files. Torch-free
except the sweep refusal, which stops before any capture."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from graphmend.core.sources import SourceError, SourceText, write_bytes_atomic, write_source

REPO = Path(__file__).resolve().parents[2]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_edit_saved_while_mend_writes_is_kept_and_named(tmp_path, monkeypatch):
    f = tmp_path / "m.py"
    f.write_bytes(b"a = 1\n")
    src = SourceText.read(f)
    real = tempfile.mkstemp

    def mkstemp_then_user_saves(*args, **kwargs):
        # after mend's first "changed?" check, before its rename: the user's editor saves
        out = real(*args, **kwargs)
        f.write_bytes(b"a = 1  # the user's edit\n")
        return out

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_user_saves)
    with pytest.raises(SourceError) as exc:
        write_source(src, "a = 2\n")
    assert exc.value.path == str(f) and exc.value.message == "changed while mend ran; not written"
    assert f.read_bytes() == b"a = 1  # the user's edit\n"
    assert _leftovers(tmp_path) == []


def test_file_replaced_by_an_editor_rename_while_mend_writes_is_kept(tmp_path, monkeypatch):
    # same bytes, new inode (an editor that saves by rename): still someone else's file now
    f = tmp_path / "m.py"
    f.write_bytes(b"a = 1\n")
    src = SourceText.read(f)
    real = tempfile.mkstemp

    def mkstemp_then_editor_renames(*args, **kwargs):
        out = real(*args, **kwargs)
        other = tmp_path / "editor.swp"
        other.write_bytes(b"a = 1\n")
        os.replace(other, f)
        return out

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_editor_renames)
    with pytest.raises(SourceError, match="changed while mend ran"):
        write_source(src, "a = 2\n")
    assert f.read_bytes() == b"a = 1\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: only root can give a file to another user")
def test_as_root_owner_group_and_mode_kept(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(b"a = 1\n")
    os.chown(f, 4321, 4322)
    os.chmod(f, 0o640)
    write_source(SourceText.read(f), "a = 2\n")
    st = f.stat()
    assert f.read_bytes() == b"a = 2\n"
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (4321, 4322, 0o640)
    # mend's own files over an existing one (a baseline, a report) the same
    b = tmp_path / "baseline.json"
    b.write_bytes(b"{}\n")
    os.chown(b, 4321, 4322)
    os.chmod(b, 0o600)
    write_bytes_atomic(b, b'{"v": 1}\n')
    st = b.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (4321, 4322, 0o600)


def test_hard_linked_file_refused_links_kept(tmp_path):
    f, other = tmp_path / "m.py", tmp_path / "other_name.py"
    f.write_bytes(b"a = 1\n")
    os.link(f, other)
    with pytest.raises(SourceError) as exc:
        write_source(SourceText.read(f), "a = 2\n")
    assert exc.value.path == str(f)
    assert exc.value.message == "cannot write: it has 2 hard links, which replacing it would split; not written"
    assert f.read_bytes() == other.read_bytes() == b"a = 1\n"
    assert f.stat().st_nlink == 2 and f.stat().st_ino == other.stat().st_ino
    assert _leftovers(tmp_path) == []


def test_symlink_written_through_to_its_target(tmp_path):
    real = tmp_path / "pkg" / "real.py"
    real.parent.mkdir()
    real.write_bytes(b"a = 1\n")
    os.chmod(real, 0o640)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    write_source(SourceText.read(link), "a = 2\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == b"a = 2\n" and real.stat().st_mode & 0o777 == 0o640
    assert _leftovers(tmp_path) == [] and _leftovers(real.parent) == []


KILLED = """
import os, signal, sys, tempfile
sys.path.insert(0, {repo!r})
from graphmend.core.sources import write_bytes_atomic
# as a user's shell starts mend: a test before this one may have left SIGINT ignored in the
# process that runs the suite, and an ignored disposition is inherited
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
real = tempfile.mkstemp
def mkstemp_then_killed(*a, **k):
    out = real(*a, **k)
    os.kill(os.getpid(), signal.{sig})  # inside the window: the temp file exists, not yet renamed
    return out
tempfile.mkstemp = mkstemp_then_killed
write_bytes_atomic({path!r}, b"new\\n")
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_signal_between_temp_file_and_rename_leaves_no_temp_file(tmp_path, sig):
    f = tmp_path / "out.json"
    f.write_bytes(b"old\n")
    r = subprocess.run([sys.executable, "-c", KILLED.format(repo=str(REPO), path=str(f), sig=sig)],
                       capture_output=True, timeout=60)
    # the signal still ends the program (SIGINT as KeyboardInterrupt), once the file is whole
    if sig == "SIGTERM":
        assert r.returncode == -signal.SIGTERM, r.stderr
    else:
        assert r.returncode != 0 and b"KeyboardInterrupt" in r.stderr, r.stderr
    assert _leftovers(tmp_path) == [], r.stderr
    assert f.read_bytes() in (b"old\n", b"new\n")


def _sweep(*args, cwd):
    return subprocess.run([sys.executable, "-m", "graphmend", "sweep", "transformers", "--only", "bert",
                           "--limit", "1", *args], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_sweep_targets_dir_not_empty_refused(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "hf_bert.py").write_text("# the user's own file\n")
    r = _sweep("--targets-dir", str(mine), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(mine) in lines[0] and "--force" in lines[0], r.stderr
    assert [p.name for p in mine.iterdir()] == ["hf_bert.py"]
    assert (mine / "hf_bert.py").read_text() == "# the user's own file\n"


def test_sweep_targets_dir_force_writes_its_targets_and_sweeps_only_them(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me\n")
    # another target in the folder: --force lets mend write there, not sweep what it did not write
    (mine / "other.py").write_text("def mend_target_other():\n    raise SystemExit('swept a foreign target')\n")
    out = tmp_path / "sweep.json"
    r = _sweep("--targets-dir", str(mine), "--force", "-f", "json", "-o", str(out), "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [row["model"] for row in rows] == ["bert"], rows
    assert sorted(p.name for p in mine.iterdir() if p.name != "__pycache__") == ["hf_bert.py", "notes.txt", "other.py"]
    assert (mine / "notes.txt").read_text() == "keep me\n"


AS_OTHER_USER = """
import os, sys
sys.path.insert(0, {repo!r})
from graphmend.core.sources import SourceError, SourceText, write_source
src = SourceText.read({path!r})
os.setgroups([4322])  # imported as root (the interpreter lives where others cannot read), then
os.setgid(4322)       # another user of the file's group
os.setuid(4323)
try:
    write_source(src, "a = 2\\n")
except SourceError as exc:
    print(exc.message)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: to own a file as one user and write it as another")
def test_group_writable_file_of_another_owner_refused_not_taken_over():
    # a user who may write the file (its group) but cannot give the new file its owner: the
    # rename would hand the file to the writer, so it is refused, named
    folder = Path(tempfile.mkdtemp(prefix="mend-owner-"))  # pytest's own is root's alone (0700)
    folder.chmod(0o777)
    try:
        _another_owner(folder)
    finally:
        shutil.rmtree(folder)


def _another_owner(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(b"a = 1\n")
    os.chown(f, 4321, 4322)
    os.chmod(f, 0o664)

    r = subprocess.run([sys.executable, "-c", AS_OTHER_USER.format(repo=str(REPO), path=str(f))],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cannot write: cannot keep its owner and group (4321:4322) as this user; not written"
    st = f.stat()
    assert f.read_bytes() == b"a = 1\n" and (st.st_uid, st.st_gid, st.st_mode & 0o777) == (4321, 4322, 0o664)
    assert _leftovers(tmp_path) == []
