"""mend fix's cache (graphmend.core.cache): a second run with nothing changed reuses every
capture, plan and verdict and gives the same answer; a change to one file re-runs only the
targets that ran it; --no-cache and a broken cache fall back to running everything; the
user's tree is never written."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HELPER = "def scale(t):\n    return t * 2\n"
MODEL = textwrap.dedent("""
    import torch
    from helper import scale


    class {name}(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = scale(self.fc(x))  # helper.py: a file every target runs
            if h.sum() > 0:
                h = h * 2
            else:
                h = h - 1
            return h


    def mend_target_{stem}():
        torch.manual_seed(0)
        return {name}(), (torch.randn(3, 4),)
""")


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n\n[tool.mend]\n')
    (proj / "helper.py").write_text(HELPER)
    (proj / "a.py").write_text(MODEL.format(name="A", stem="a"))
    (proj / "b.py").write_text(MODEL.format(name="B", stem="b"))
    (proj / "c.py").write_text(MODEL.format(name="C", stem="c").replace("from helper import scale\n",
                                                                        "scale = lambda t: t * 2\n"))
    return proj


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def _fix(proj: Path, cache: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphmend", "fix", str(proj), "--jobs", "2", "-f", "json", *extra],
                          capture_output=True, text=True, cwd=proj, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "MEND_CACHE_DIR": str(cache), **(env or {})})


def _verdicts(out: subprocess.CompletedProcess) -> list:
    doc = json.loads(out.stdout)
    return sorted((os.path.basename(f["file"]), f["line"], f["rule"], f["status"], f["reason"]) for f in doc["fixes"])


def _reused(out: subprocess.CompletedProcess) -> int:
    line = next((l for l in out.stderr.splitlines() if "their verdicts were reused" in l), None)
    return int(line.split()[1]) if line else 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One project fixed cold, again unchanged, after editing b.py, after editing the helper
    a.py and b.py import, and with --no-cache; the tree's bytes after each."""
    tmp = tmp_path_factory.mktemp("fix-cache")
    proj, cache = _project(tmp), tmp / "cache"
    before = _tree(proj)
    # a dynamic analyze first, as a user runs it: it keeps its captures (and nothing else)
    out = {"analyze": subprocess.run([sys.executable, "-m", "graphmend", "analyze", str(proj), "-q", "-f", "json"],
                                     capture_output=True, text=True, cwd=proj, timeout=900,
                                     env={**os.environ, "PYTHONPATH": str(ROOT), "MEND_CACHE_DIR": str(cache)})}
    out["analyzed"] = {p: p.stat().st_mtime_ns for p in cache.rglob("*.json")}
    out["cold"] = _fix(proj, cache)
    out["captures_after_cold"] = {p: p.stat().st_mtime_ns for p in cache.rglob("*.json") if p.parts[-3] == "capture"}
    out["tree_after"] = _tree(proj)
    out["warm"] = _fix(proj, cache)
    (proj / "b.py").write_text((proj / "b.py").read_text() + "\n# edited\n")
    out["b_edited"] = _fix(proj, cache)
    (proj / "helper.py").write_text(HELPER + "\n# edited\n")
    out["helper_edited"] = _fix(proj, cache)
    out["no_cache"] = _fix(proj, cache, "--no-cache")
    out["before"], out["cache"] = before, cache
    return out


def test_a_second_run_with_nothing_changed_reuses_every_verdict(runs):
    cold, warm = runs["cold"], runs["warm"]
    assert cold.returncode == 1, cold.stderr  # verified fixes left unapplied (no --write)
    assert _reused(cold) == 0
    assert [v[3] for v in _verdicts(cold)] == ["verified"] * 3
    assert warm.returncode == 1 and _reused(warm) == 3, warm.stderr
    assert _verdicts(warm) == _verdicts(cold)
    # the same report but for timings
    strip = lambda d: {k: v for k, v in d.items() if k not in ("targets", "created", "duration_s", "fix_targets")}
    assert strip(json.loads(warm.stdout)) == strip(json.loads(cold.stdout))


def test_fix_starts_from_the_captures_analyze_kept(runs):
    assert runs["analyze"].returncode == 1, runs["analyze"].stderr  # the three branches break
    # analyze keeps its captures, and the plans behind its "candidate fix" column
    assert {p.parts[-3] for p in runs["analyzed"]} == {"capture", "plan"}
    analyzed = {p: t for p, t in runs["analyzed"].items() if p.parts[-3] == "capture"}
    assert len(analyzed) == 3
    # the cold fix read them (nothing re-captured, so nothing re-written) and verified afresh
    assert runs["captures_after_cold"] == analyzed
    assert _reused(runs["cold"]) == 0


def test_a_changed_file_reverifies_only_the_targets_that_ran_it(runs):
    # b.py: only B; helper.py: A and B import it, C does not
    assert _reused(runs["b_edited"]) == 2, runs["b_edited"].stderr
    assert _reused(runs["helper_edited"]) == 1, runs["helper_edited"].stderr
    assert _verdicts(runs["b_edited"]) == _verdicts(runs["cold"]) == _verdicts(runs["helper_edited"])


def test_no_cache_runs_everything_and_the_tree_is_never_written(runs):
    assert runs["no_cache"].returncode == 1 and _reused(runs["no_cache"]) == 0
    assert _verdicts(runs["no_cache"]) == _verdicts(runs["cold"])
    assert runs["tree_after"] == runs["before"]  # no --write: the project is as it was
    kept = [p for p in runs["cache"].rglob("*.json")]
    assert {p.parts[-3] for p in kept} == {"capture", "plan", "verify"}


def test_a_broken_cache_is_a_miss_not_an_error(tmp_path):
    from graphmend.core.cache import Cache

    cache = Cache(tmp_path / "c")
    key = cache.key("verify", "x")
    cache.put("verify", key, {"a": 1})
    assert cache.get("verify", key) == {"a": 1}
    next((tmp_path / "c").rglob("*.json")).write_text("{not json")
    assert cache.get("verify", key) is None
    # an entry whose recorded file changed is not served
    f = tmp_path / "dep.py"
    f.write_text("x = 1\n")
    deps = cache.put_valid("capture", key, {"results": []}, [str(f)])
    assert deps and Cache(tmp_path / "c").get_valid("capture", key) is not None
    f.write_text("x = 2\n")
    assert Cache(tmp_path / "c").get_valid("capture", key) is None
    # a folder that cannot be written keeps nothing and raises nothing
    ro = Cache(Path("/proc/graphmend-cache"))
    ro.put("verify", key, {"a": 1})
    assert ro.get("verify", key) is None
    assert not Cache(None).enabled and Cache(None).get("verify", key) is None


def test_transient_failures_are_not_kept():
    from graphmend.core.model import FixTarget
    from graphmend.fix_outcomes import Outcome
    from graphmend.fixing import _keepable

    ft = FixTarget(name="t", breaks_before=1, breaks_after=1)
    s = object()
    assert _keepable(ft, Outcome([s], {id(s): ("rejected", "behaviour changed: eval: output differs")}))
    assert _keepable(ft, Outcome([s], {id(s): ("rejected", "verification failed: patched run: t: raised ValueError: x")}))
    assert not _keepable(ft, Outcome([s], {id(s): ("rejected", "verification failed: patched run: t: timed out after 5 s "
                                                               "(raise it with --timeout)")}))
    assert not _keepable(FixTarget(name="t", breaks_before=1, breaks_after=1,
                                   error="t: worker killed by SIGKILL (out of memory?)"), Outcome([], {}))
