"""``--executor ray``: the same report as the local pool, a Ray worker killed mid-task is that
target's error and the run goes on, a one-line hint without Ray, and no Ray on static paths.

One local Ray instance (two CPUs) serves the module, started here as ``ray.init`` would be by
``mend`` itself; the runs are in-process (CliRunner), so its Ray workers, and the torch each has
imported, serve every test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
# a slice of the corpus: two files, each one job of three targets, breaks of five rules (GM101-GM303)
CORPUS_SLICE = ["corpus/norms.py", "corpus/rotary.py"]


def _env() -> dict[str, str]:
    return {**os.environ, "MEND_NO_CACHE": "1",
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")  # the dev extra installs it
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", _env()["PYTHONPATH"])  # the instance's workers import graphmend from here
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _timeless(report: str) -> str:
    """The JSON with every duration zeroed: what may differ between two runs of the same targets."""
    return re.sub(r'"(\w+_s)": [-0-9.e]+', r'"\1": 0', report)


def _analyze(*args: str):
    res = CliRunner().invoke(app, ["analyze", *args, "--dynamic-only", "-j", "2", "-f", "json", "-q"])
    return res


def test_corpus_slice_same_report_on_ray_as_local(ray_cluster, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MEND_NO_CACHE", "1")
    local = _analyze(*CORPUS_SLICE)
    on_ray = _analyze(*CORPUS_SLICE, "--executor", "ray")
    assert local.exit_code == on_ray.exit_code == 1, (local.output, on_ray.output)  # the corpus has breaks
    assert on_ray.stderr == ""  # -q: nothing of Ray's on stderr either
    assert ray_cluster.is_initialized()  # the run used the instance it found, and left it up
    data = json.loads(on_ray.stdout)
    assert len(data["targets"]) == 6 and not any(t["error"] for t in data["targets"])
    assert sum(t["graph_break_count"] for t in data["targets"]) > 0
    assert _timeless(on_ray.stdout) == _timeless(local.stdout)


KILLER = '''
import os, signal, time

def mend_target_kills_its_ray_worker():
    # up the process tree to the Ray worker running this job's task ("ray::..." is its title)
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        parent = int(data[data.rindex(b")") + 2:].split()[1])
        with open(f"/proc/{parent}/cmdline", "rb") as fh:
            if fh.read().startswith(b"ray::"):
                with open(MARK, "w") as out:
                    out.write(str(os.getpid()))
                os.kill(parent, signal.SIGKILL)
                time.sleep(120)  # left alone, this would outlive the run
        pid = parent
    raise RuntimeError("no Ray worker above this process")
'''

FINE = '''
import torch

def f(x):
    return x * 2 + 1

def mend_target_fine():
    return f, (torch.ones(4),)
'''


def test_killed_ray_worker_is_that_targets_error(ray_cluster, tmp_path, monkeypatch):
    mark = tmp_path / "killer.pid"
    # the killer shares its file, and so its job, with a target that finishes first: that one's
    # report dies with the Ray worker, and it is run again on its own
    (tmp_path / "killer.py").write_text(f"MARK = {str(mark)!r}\n" + FINE.replace("mend_target_fine", "mend_target_a")
                                        + KILLER)
    (tmp_path / "fine.py").write_text(FINE)
    monkeypatch.setenv("MEND_NO_CACHE", "1")
    run = _analyze(str(tmp_path), "--timeout", "100", "--executor", "ray")
    assert run.exit_code == 1, run.output  # a target that errored is a finding
    targets = {t["function"]: t for t in json.loads(run.stdout)["targets"]}
    for fine in ("mend_target_fine", "mend_target_a"):
        assert targets[fine]["error"] is None and targets[fine]["graph_count"] == 1, targets[fine]
    error = targets["mend_target_kills_its_ray_worker"]["error"]
    assert error and "ray task failed" in error and "\n" not in error
    # the job's worker noticed its Ray worker was gone and ended itself (nobody would time it out)
    pid = int(mark.read_text())
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_without_ray_a_one_line_install_hint(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, find_spec says None
    (tmp_path / "m.py").write_text(FINE)
    for args in (["analyze", str(tmp_path), "--dynamic-only"], ["check", "--dynamic", str(tmp_path / "m.py")]):
        res = CliRunner().invoke(app, [*args, "--executor", "ray"])
        assert res.exit_code == 2, res.output
        (line,) = res.output.strip().splitlines()
        assert 'pip install "graphmend[ray]"' in line and "--executor ray" in line


@pytest.mark.parametrize("args,needle", [
    (["check", "corpus/norms.py", "--executor", "ray"], "need --dynamic"),
    (["analyze", "corpus/norms.py", "--static-only", "--executor", "ray"], "--static-only"),
    (["analyze", "corpus/norms.py", "--ray-address", "127.0.0.1:1"], "give --executor ray"),
])
def test_executor_flag_misuse(args, needle):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and needle in res.output and "Traceback" not in res.output


WRAPPER = """
import sys, atexit
atexit.register(lambda: sys.stderr.write('RAY_LOADED=%s\\n' % ('ray' in sys.modules)))
sys.argv = ['mend'] + sys.argv[1:]
from graphmend.cli.app import main
main()
"""


def test_help_and_static_check_never_import_ray():
    for args in (["--help"], ["analyze", "--help"], ["check", "corpus/norms.py", "-q"]):
        out = subprocess.run([sys.executable, "-c", WRAPPER, *args], cwd=ROOT, env=_env(), capture_output=True,
                             text=True, timeout=120)
        assert "RAY_LOADED=False" in out.stderr, (args, out.stderr)


def test_config_and_environment_choose_the_executor(tmp_path, monkeypatch):
    from graphmend.cli.common import Executor, executor_choice
    from graphmend.core.config import ConfigError, load_config

    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nexecutor = "ray"\nray_address = "10.0.0.1:6379"\n')
    config = load_config([tmp_path])
    assert (config.executor, config.ray_address) == ("ray", "10.0.0.1:6379")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert executor_choice(config, None, None) == ("ray", "10.0.0.1:6379")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.2:6379")  # the environment over the file, the flag over both
    assert executor_choice(config, None, None) == ("ray", "10.0.0.2:6379")
    assert executor_choice(config, None, "10.0.0.3:6379") == ("ray", "10.0.0.3:6379")
    assert executor_choice(config, Executor.local, None) == ("local", None)
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nexecutor = "dask"\n')
    with pytest.raises(ConfigError, match=r"\[tool.mend\] executor"):
        load_config([tmp_path])


def test_unreachable_cluster_is_one_line_at_once():
    # a subprocess: in this one, the module's Ray instance would be used whatever the address
    out = subprocess.run([sys.executable, "-m", "graphmend", "analyze", "corpus/norms.py", "--dynamic-only", "-q",
                          "--executor", "ray", "--ray-address", "127.0.0.1:1"], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == "mend: error: cannot reach the Ray cluster at 127.0.0.1:1: Connection refused"


def test_the_executor_is_the_blocks_only():
    from graphmend.core import jobs

    seen = []

    class Recorder:
        def run(self, job):
            seen.append(job.label)
            return jobs.JobOutcome({"ok": True}, None)

    job = jobs.Job("no.such.module", {}, "t")
    with jobs.use_executor(Recorder()):
        assert jobs.run_job(job).result == {"ok": True}
    assert seen == ["t"] and jobs._executor is None  # restored: later runs are local again
    assert "no.such.module" in jobs.run_job(jobs.Job("no.such.module", {}, "t", timeout=30)).error


def test_a_sweep_on_ray_counts_what_a_local_sweep_counts(ray_cluster, monkeypatch):
    """mend sweep runs its generated targets through the same jobs: on Ray, the same rows."""
    pytest.importorskip("transformers")
    monkeypatch.setenv("MEND_NO_CACHE", "1")

    def rows(*extra: str) -> list[dict]:
        res = CliRunner().invoke(app, ["sweep", "transformers", "--only", "xlm", "-j", "2", "-f", "json", "-q",
                                       *extra])
        assert res.exit_code == 0, res.output
        return [{k: v for k, v in r.items() if k not in ("duration_s", "target")}
                for r in json.loads(res.stdout)["rows"]]

    local, on_ray = rows(), rows("--executor", "ray")
    assert local == on_ray and local[0]["breaks"] > 0  # xlm breaks (GM401), on both
