"""mend's cache (graphmend.core.cache) is private and only ever a hint: its folder is 0700 and
its entries 0600, a folder someone else could write is not used, an entry of another shape is
a miss, a failed write leaves nothing behind; a verdict is keyed by the exact texts it judged
and by every file the target read (imports, ``open``, ``runpy``, ``torch.load`` of recorded
tensors), and a plan read from the cache is derived again before ``--write`` writes it."""

from __future__ import annotations

import errno
import io
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path


from graphmend.core.cache import Cache

ROOT = Path(__file__).resolve().parents[2]

MODEL = textwrap.dedent("""
    import os
    import runpy

    import torch

    HERE = os.path.dirname(os.path.abspath(__file__))


    class M(torch.nn.Module):
        def __init__(self, scale, shift):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.scale, self.shift = scale, shift

        def forward(self, x):
            h = self.fc(x)
            if h.sum() > 0:
                h = h * self.scale
            else:
                h = h - self.shift
            return h


    def mend_target_m():
        torch.manual_seed(0)
        # settings read the ways a program reads them: none of them is an import
        scale = runpy.run_path(os.path.join(HERE, "settings.py"))["SCALE"]
        with open(os.path.join(HERE, "shift.txt")) as f:
            shift = float(f.read())
        x = torch.load(os.path.join(HERE, "x.pt"), weights_only=True)
        return M(scale, shift), (x,)
""")


def _project(tmp_path: Path) -> Path:
    import torch

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n\n[tool.mend]\n')
    (proj / "m.py").write_text(MODEL)
    (proj / "settings.py").write_text("SCALE = 2.0\n")
    (proj / "shift.txt").write_text("0.5\n")
    torch.manual_seed(1)
    torch.save(torch.randn(3, 4), proj / "x.pt")
    return proj


def _mend(cwd: Path, cache: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphmend", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT), "MEND_CACHE_DIR": str(cache)})


def _fix(proj: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    # the first call only: what the cache keys and holds is the question here, not recompiles
    return _mend(proj, cache, "fix", str(proj), "-f", "json", "--calls", "1", *extra)


def _reused(out: subprocess.CompletedProcess) -> int:
    line = next((l for l in out.stderr.splitlines() if "their verdicts were reused" in l), None)
    return int(line.split()[1]) if line else 0


def _statuses(out: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    return [(f["status"], f["reason"]) for f in json.loads(out.stdout)["fixes"]]


def _entries(cache: Path, kind: str) -> list[Path]:
    return sorted(p for p in cache.rglob("*.json") if p.parts[-3] == kind)


# -- the folder and its entries --------------------------------------------------------------

def test_the_cache_folder_and_its_entries_are_private(tmp_path):
    folder = tmp_path / "c"
    cache = Cache(folder)
    key = cache.key("plan", "x")
    cache.put("plan", key, {"new_source": "whole file"})
    entry = next(folder.rglob("*.json"))
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    for d in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    # a folder an earlier version made world-readable is made private when next written
    os.chmod(folder, 0o755)
    Cache(folder).put("plan", key, {"new_source": "whole file"})
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_folder_others_can_write_or_someone_elses_is_not_used(tmp_path):
    for mode in (0o770, 0o707, 0o777):
        folder = tmp_path / f"loose{mode:o}"
        folder.mkdir()
        os.chmod(folder, mode)
        cache = Cache(folder)
        assert not cache.enabled and str(folder) in cache.refused and "group or others" in cache.refused
        cache.put("verify", "ab" * 32, {"a": 1})
        assert list(folder.iterdir()) == []
    # a file where the folder should be
    (tmp_path / "file").write_text("")
    assert not Cache(tmp_path / "file").enabled
    if os.getuid() == 0:  # someone else's folder, and an entry someone else wrote in ours
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 12345, 12345)
        assert "not owned by you" in Cache(theirs).refused
        ours = Cache(tmp_path / "ours")
        key = ours.key("verify", "x")
        ours.put("verify", key, {"a": 1})
        entry = next((tmp_path / "ours").rglob("*.json"))
        assert ours.get("verify", key) == {"a": 1}
        os.chown(entry, 12345, 12345)
        assert ours.get("verify", key) is None
    # an entry others may write is not trusted either
    mine = Cache(tmp_path / "mine")
    key = mine.key("verify", "y")
    mine.put("verify", key, {"a": 1})
    os.chmod(next((tmp_path / "mine").rglob("*.json")), 0o666)
    assert mine.get("verify", key) is None


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    folder = tmp_path / "c"
    cache = Cache(folder)
    key = cache.key("verify", "x")
    real_open = io.open

    class Full:  # a file on a full disk: every write fails with ENOSPC
        def __init__(self, f):
            self.f = f

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def __getattr__(self, name):
            return getattr(self.f, name)

    def full_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return Full(f) if any(c in mode for c in "wax") else f

    monkeypatch.setattr(io, "open", full_open)
    for _ in range(3):
        cache.put("verify", key, {"a": 1})  # raises nothing
    monkeypatch.setattr(io, "open", real_open)
    assert [p for p in folder.rglob("*") if p.is_file()] == []
    assert cache.get("verify", key) is None


def test_an_entry_of_another_shape_is_a_miss(tmp_path):
    """Valid JSON of the wrong shape in every entry: the next fix runs as if cold."""
    proj, cache = _project(tmp_path), tmp_path / "cache"
    cold = _fix(proj, cache)
    assert cold.returncode == 1, cold.stderr
    entries = list(cache.rglob("*.json"))
    assert {p.parts[-3] for p in entries} == {"capture", "plan", "verify"}
    wrong = {"deps": {}, "results": 5, "new_source": 1, "applied": 1, "refused": 1, "error": None,
             "verdicts": 1, "fix_target": 1, "remaining": 1, "final": 1, "judged": 1}
    almost = {"deps": {}, "results": [{"bogus": 1}], "new_source": "x", "applied": [1], "refused": [],
              "error": None, "verdicts": [["pass"]], "fix_target": {}, "remaining": [], "final": None, "judged": {}}
    for shapes in (([], {}, wrong), (almost, wrong, almost)):
        for p in entries:
            p.write_text(json.dumps(shapes[("capture", "plan", "verify").index(p.parts[-3])]))
        again = _fix(proj, cache)
        assert again.returncode == 1, (shapes, again.stderr)
        assert "internal error" not in again.stderr and _reused(again) == 0
        assert _statuses(again) == _statuses(cold)


# -- what a verdict is keyed by -----------------------------------------------------------------

def test_a_changed_plan_in_the_cache_is_never_written(tmp_path):
    proj, cache = _project(tmp_path), tmp_path / "cache"
    assert _fix(proj, cache).returncode == 1
    plans = _entries(cache, "plan")
    assert plans
    for p in plans:  # what someone who could write the cache would do
        entry = json.loads(p.read_text())
        if entry["new_source"] != (proj / "m.py").read_text():
            entry["new_source"] += "\nINJECTED = __import__('os').getpid()\n"
            p.write_text(json.dumps(entry))
    before = (proj / "m.py").read_bytes()
    out = _fix(proj, cache, "--write")
    assert (proj / "m.py").read_bytes() == before
    assert "INJECTED" not in (proj / "m.py").read_text()
    assert _reused(out) == 0  # the verdict named other texts
    statuses = _statuses(out)
    assert [s for s, _ in statuses] == ["unverified"] and "cache entry was changed" in statuses[0][1], statuses
    # with the cache's plan the same as the one mend derives, it is written
    for p in plans:
        p.unlink()
    out = _fix(proj, cache, "--write")
    assert [s for s, _ in _statuses(out)] == ["verified"], out.stderr
    assert "torch.where" in (proj / "m.py").read_text() and "INJECTED" not in (proj / "m.py").read_text()


def test_a_verdict_holds_only_while_every_file_the_target_read_is_unchanged(tmp_path):
    import torch

    proj, cache = _project(tmp_path), tmp_path / "cache"
    assert _reused(_fix(proj, cache)) == 0
    assert _reused(_fix(proj, cache)) == 1
    # the capture lists them, the verdict too
    for kind in ("capture", "verify"):
        (entry,) = _entries(cache, kind)
        deps = json.loads(entry.read_text())["deps"]
        assert {os.path.basename(f) for f in deps} >= {"m.py", "settings.py", "shift.txt", "x.pt"}, (kind, deps)
    for change in (lambda: (proj / "settings.py").write_text("SCALE = 3.0\n"),  # runpy.run_path
                   lambda: (proj / "shift.txt").write_text("0.25\n"),  # open
                   lambda: torch.save(torch.ones(3, 4), proj / "x.pt")):  # torch.load
        change()
        out = _fix(proj, cache)
        assert out.returncode == 1 and _reused(out) == 0, out.stderr
    assert _reused(_fix(proj, cache)) == 1


PROGRAM = textwrap.dedent("""
    import torch

    from model import Gate

    with open("seed.txt") as f:
        torch.manual_seed(int(f.read()))
    m = Gate()
    torch.compile(m, backend="eager")(torch.randn(3, 4))
""")

GATE = textwrap.dedent("""
    import torch


    class Gate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.fc(x)
            if h.sum() > 0:
                h = h * 2
            return h
""")


def test_recording_new_inputs_invalidates_the_capture_and_verdict(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n\n[tool.mend]\n')
    (tmp_path / "model.py").write_text(GATE)
    (tmp_path / "prog.py").write_text(PROGRAM)
    cache = tmp_path / "cache"
    rec = tmp_path / "rec"

    def record(seed: str) -> None:
        (tmp_path / "seed.txt").write_text(seed)
        out = _mend(tmp_path, cache, "run", "--record", "rec", "-q", "prog.py")
        assert out.returncode in (0, 1), out.stderr

    record("0")
    targets = (rec / "mend_targets.py").read_bytes()
    first = _mend(tmp_path, cache, "fix", "--from-run", "rec", "-f", "json")
    assert first.returncode == 1 and _reused(first) == 0, first.stderr
    assert _reused(_mend(tmp_path, cache, "fix", "--from-run", "rec", "-f", "json")) == 1
    captures = {p: p.read_bytes() for p in _entries(cache, "capture")}
    record("1")  # the same program on other inputs: only the .pt files change
    assert (rec / "mend_targets.py").read_bytes() == targets
    again = _mend(tmp_path, cache, "fix", "--from-run", "rec", "-f", "json")
    assert again.returncode == 1 and _reused(again) == 0, again.stderr
    # captured again, not reused
    assert {p: p.read_bytes() for p in _entries(cache, "capture")} != captures


def test_fix_says_why_it_runs_without_a_loose_cache_folder(tmp_path):
    proj, cache = _project(tmp_path), tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    out = _fix(proj, cache)
    assert out.returncode == 1, out.stderr
    assert (f"mend: warning: cache folder {cache} is writable by group or others: running without the cache"
            in out.stderr)
    assert list(cache.iterdir()) == []
    assert [s for s, _ in _statuses(out)] == ["verified"]
