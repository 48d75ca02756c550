"""Bad input for analyze, check, fix and the workers: each is one file's or one target's
error, in one line, and the run goes on for the rest.

Symlinks out of the folder, dangling or looping, and FIFOs named ``*.py``; a file nested
too deeply to parse; targets in files whose names hold a dot; a target's forked children;
memory limits; the timeout a user set. The worker-level cases are in test_jobs.py, the
discovery-level ones in test_discovery.py.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symlinks")

COMPILED_PRINT = "import torch\n\n\n@torch.compile\ndef f(x):\n    print(x)\n    return x\n"
# 100000 terms: past every supported Python parser's limit (3.12.3 and 3.13 parse 4000)
DEEP = "x = " + " + ".join(["1"] * 100000) + "\n\n\ndef mend_target_deep():\n    return print, (x,)\n"
BRANCH = textwrap.dedent("""\
    import torch


    class M(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x - 1


    def mend_target_v2():
        torch.manual_seed(0)
        return M(), (torch.randn(4),)
""")


def _mend(*args, cwd=None, timeout=300):
    """A real process: a FIFO read by mistake blocks forever, and the timeout turns that into
    a failure instead of a hung test run."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "graphmend", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def _odd_project(tmp_path):
    proj, outside = tmp_path / "proj", tmp_path / "outside"
    proj.mkdir()
    outside.mkdir()
    (proj / "good.py").write_text(COMPILED_PRINT)
    (outside / "ext.py").write_text(COMPILED_PRINT)
    (proj / "link_out.py").symlink_to(outside / "ext.py")
    (proj / "dangle.py").symlink_to("nowhere.py")
    (proj / "loop_a.py").symlink_to("loop_b.py")
    (proj / "loop_b.py").symlink_to("loop_a.py")
    os.mkfifo(proj / "pipe.py")
    return proj


ODD_LINES = ("dangle.py: dangling symlink (-> nowhere.py); file skipped",
             "link_out.py: symlink points outside the analysed folder",
             "loop_a.py: symlink loop; file skipped",
             "loop_b.py: symlink loop; file skipped",
             "pipe.py: not a regular file (a FIFO); file skipped")


@needs_fifo
def test_analyze_static_goes_on_past_odd_files(tmp_path):
    proj = _odd_project(tmp_path)
    res = _mend("analyze", str(proj), "--static-only", timeout=120)
    assert "internal error" not in res.stderr and res.returncode == 1, res.stderr
    for line in ODD_LINES:
        assert res.stdout.count(line) == 1, (line, res.stdout)
    assert "GM201" in res.stdout and "good.py:6" in res.stdout  # the good file still gets its findings
    assert "ext.py" not in res.stdout.replace("outside/ext.py", "")  # the link's target is not scanned


@needs_fifo
def test_check_names_odd_files_given_directly(tmp_path):
    """What pre-commit does: pass each staged name, a broken symlink or a FIFO among them."""
    proj = _odd_project(tmp_path)
    (proj / "pyproject.toml").write_text("[tool.mend]\n")
    names = ["good.py", "dangle.py", "loop_a.py", "pipe.py"]
    res = _mend("check", *names, "--format", "json", cwd=proj, timeout=120)
    assert res.returncode == 1, res.stderr  # per-file errors, not a usage error
    report = json.loads(res.stdout)
    assert {(Path(e["file"]).name, e["message"]) for e in report["errors"]} == {
        ("dangle.py", "dangling symlink (-> nowhere.py); file skipped"),
        ("loop_a.py", "symlink loop; file skipped"),
        ("pipe.py", "not a regular file (a FIFO); file skipped")}
    assert [f["rule"] for f in report["findings"]] == ["GM201"]
    # the whole tree, as `mend check` with no names walks it
    res = _mend("check", "--format", "json", cwd=proj, timeout=120)
    assert res.returncode == 1 and len(json.loads(res.stdout)["errors"]) == 5, res.stderr


@pytest.mark.parametrize("command", ["analyze", "fix", "check", "bench"])
@pytest.mark.parametrize("value,needle", [("4X", "is not a size"), ("4", "did you mean 4G?"), ("-2G", "is not a size")])
def test_bad_memory_limit_is_a_usage_error(tmp_path, command, value, needle):
    (tmp_path / "m.py").write_text("x = 1\n")
    args = [command, str(tmp_path / "m.py")] if command != "check" else [command, "--dynamic"]
    res = runner.invoke(app, [*args, f"--memory-limit={value}"])
    assert res.exit_code == 2, res.output
    lines = [l for l in res.output.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("mend: error: --memory-limit:") and needle in lines[0]


# -- dynamic: one analyze run over every kind of bad target ------------------------------

@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed")
    (root / "deep.py").write_text(DEEP)
    (root / "model.v2.py").write_text(BRANCH)
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("def scale(x):\n    return x * 3\n")
    (pkg / "attn.fixed.py").write_text(textwrap.dedent("""\
        import torch

        from .helper import scale


        def mend_target_attn():
            return (lambda x: scale(x) + 1), (torch.ones(3),)
    """))
    (root / "memory.py").write_text(textwrap.dedent("""\
        import torch


        def mend_target_big():
            block = torch.ones(6 << 30, dtype=torch.uint8)  # 6 GiB under a 2 GiB limit
            return (lambda x: x + 1), (block[:4].float(),)


        def mend_target_small():
            return (lambda x: x + 1), (torch.ones(2),)
    """))
    (root / "hang.py").write_text("import time\n\n\ndef mend_target_hang():\n    time.sleep(600)\n")
    out = root / "report.json"
    # 2 GiB: on a 16-core CUDA host torch alone passed 1 GiB calling the small target
    res = runner.invoke(app, ["analyze", str(root), "--dynamic-only", "--format", "json", "-o", str(out),
                              "--timeout", "10", "--memory-limit", "2G", "--jobs", "2", "-q"])
    report = json.loads(out.read_text()) if out.exists() else None
    return res, report


def _target(report, name):
    return next(t for t in report["targets"] if t["name"] == name)


def test_mixed_run_completes(mixed):
    res, report = mixed
    assert res.exit_code == 1 and report is not None, res.output
    assert {t["name"] for t in report["targets"]} == {
        "model.v2.py::mend_target_v2", "pkg/attn.fixed.py::mend_target_attn", "memory.py::mend_target_big",
        "memory.py::mend_target_small", "hang.py::mend_target_hang"}


def test_deeply_nested_file_is_one_error_and_the_rest_runs(mixed):
    _, report = mixed
    deep = [e for e in report["errors"] if Path(e["file"]).name == "deep.py"]
    assert [e["message"] for e in deep] == ["expression nested too deeply to parse (RecursionError); file skipped"]
    assert _target(report, "memory.py::mend_target_small")["error"] is None


def test_dotted_file_names_load(mixed):
    _, report = mixed
    v2 = _target(report, "model.v2.py::mend_target_v2")
    assert v2["error"] is None and v2["graph_break_count"] == 1
    assert Path(v2["breaks"][0]["file"]).name == "model.v2.py"
    attn = _target(report, "pkg/attn.fixed.py::mend_target_attn")  # a relative import inside a package
    assert attn["error"] is None and attn["graph_count"] == 1


def test_memory_limit_names_the_target_and_the_limit(mixed):
    _, report = mixed
    big = _target(report, "memory.py::mend_target_big")
    assert big["error"] == "out of memory (limit 2 GiB) while calling mend_target_big()"
    assert _target(report, "memory.py::mend_target_small")["graph_count"] == 1  # same file, same worker


def test_timeout_is_the_one_set(mixed):
    _, report = mixed
    err = _target(report, "hang.py::mend_target_hang")["error"]
    assert err.startswith("timed out after 10 s (raise it with --timeout)"), err
    assert "start-up before that took" in err and "50 s" not in err


def test_check_dynamic_goes_on_past_a_deep_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.mend]\n")
    (tmp_path / "deep.py").write_text(DEEP)
    (tmp_path / "model.v2.py").write_text(BRANCH)
    res = _mend("check", "--dynamic", "--format", "json", "--memory-limit", "2G", cwd=tmp_path)
    assert res.returncode == 1 and "internal error" not in res.stderr, res.stderr
    report = json.loads(res.stdout)
    assert [Path(e["file"]).name for e in report["errors"]] == ["deep.py"]
    assert [t["name"] for t in report["targets"]] == ["model.v2.py::mend_target_v2"]
    assert report["targets"][0]["error"] is None and report["check"]["new"]


def test_fix_works_on_a_dotted_file_and_goes_on_past_a_deep_one(tmp_path):
    (tmp_path / "deep.py").write_text(DEEP)
    (tmp_path / "model.v2.py").write_text(BRANCH)
    res = _mend("fix", str(tmp_path), "--format", "json", "-q")
    assert "internal error" not in res.stderr, res.stderr
    report = json.loads(res.stdout)
    fixes = [f for f in report["fixes"] if Path(f["file"]).name == "model.v2.py"]
    assert [(f["rule"], f["status"]) for f in fixes] == [("GM101", "verified")], fixes
    assert "torch.where(x.sum() > 0, x * 2, x - 1)" in fixes[0]["diff"]
    assert [Path(e["file"]).name for e in report["errors"]] == ["deep.py"]
    assert res.returncode == 1, res.stderr  # a verified fix left unwritten (no --write) is a finding
    assert (tmp_path / "model.v2.py").read_text() == BRANCH


def test_rewriting_a_file_too_deep_for_libcst_is_a_per_file_error():
    """Python parses and runs 600 terms; libcst recurses once per term and cannot."""
    from rewrites.fixes import TOO_DEEP, fix_source

    src = "x = " + " + ".join(["1"] * 600) + "\n\n\ndef f(t):\n    if t.sum() > 0:\n        return t\n    return -t\n"
    result = fix_source(src)
    assert result.error == TOO_DEEP and result.new_source == src


def test_overlay_serves_a_dotted_file_in_a_package(tmp_path, monkeypatch):
    """fix and verify import the patched text through the overlay: a file loaded under an
    alias module name must be served too, relative imports working."""
    import linecache

    from graphmend.core import overlay
    from graphmend.core.overlay import install_overlay
    from graphmend.core.targets import import_target_module

    # a worker never takes the overlay down (it exits); this test's process goes on
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(linecache, "cache", dict(linecache.cache))
    monkeypatch.setattr(overlay, "_installed", None)

    pkg = tmp_path / "ovl_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("VALUE = 'helper'\n")
    f = pkg / "attn.fixed.py"
    f.write_text("from .helper import VALUE\nSIDE = 'disk'\n")
    install_overlay({str(f): "from .helper import VALUE\nSIDE = 'patched'\n"})
    try:
        mod = import_target_module(str(f), None, "attn")
        assert (mod.SIDE, mod.VALUE, mod.__file__) == ("patched", "helper", str(f))
        assert mod.__name__.startswith("ovl_pkg.")
    finally:
        for name in [n for n in sys.modules if n.startswith("ovl_pkg")]:
            del sys.modules[name]
        sys.path[:] = [p for p in sys.path if p != str(tmp_path)]
