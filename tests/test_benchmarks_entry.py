"""``python -m benchmarks``: the evaluation harness's one entry point lists every script and
runs one by name with its arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_it_lists_every_script_with_its_summary():
    out = _run()
    assert out.returncode == 0, out.stderr
    listed = {line.split()[0] for line in out.stdout.splitlines()[2:] if line.strip()}
    assert listed == {p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")}
    assert "golden_compare" in out.stdout and "Agreement of" in out.stdout


def test_it_runs_a_script_by_name_with_its_arguments(tmp_path):
    golden = tmp_path / "golden.json"
    golden.write_text(json.dumps({"models": [{"name": "A", "eval": {"status": "full_graph"}}]}))
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"rows": [{"model": "A", "run_mode": "eval", "status": "one graph"}]}))
    out = _run("golden_compare", "compare", "--golden", str(golden), "--sweep", str(sweep), "--out",
               str(tmp_path / "res"))
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "res.json").read_text())["agree"] == 1


def test_an_unknown_script_is_a_one_line_error():
    out = _run("no_such_script")
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: no benchmark script 'no_such_script' (python -m benchmarks lists them)")
