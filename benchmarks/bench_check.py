"""``mend check`` on ten changed corpus files, static mode, as a pre-commit hook runs it.

Measures the wall time of the whole command (a fresh ``mend`` process: interpreter start-up,
imports, scan, compare, render), median of N runs, and proves torch is never imported
(``python -X importtime`` lists every module the process imported).

    python benchmarks/bench_check.py            # 5 runs
    python benchmarks/bench_check.py --runs 11 --json

Goal: under 1 s wall on the 2-core dev machine, start-up included.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"


def changed_files(n: int = 10) -> list[Path]:
    """The ten largest corpus modules (the worst case for a ten-file commit)."""
    files = sorted((p for p in CORPUS.glob("*.py") if p.name not in ("__init__.py", "measure.py")),
                   key=lambda p: (-p.stat().st_size, p.name))
    if len(files) < n:
        raise SystemExit(f"corpus/ holds {len(files)} model files; the benchmark needs {n}")
    return files[:n]


def mend() -> list[str]:
    exe = shutil.which("mend")
    return [exe] if exe else [sys.executable, "-m", "graphmend"]


def run_once(cmd: list[str], cwd: Path) -> tuple[float, int, float]:
    """Wall seconds, exit code, and the CPU seconds (user + sys) the process used: on a
    shared machine the CPU time shows the command's own cost when the wall time cannot."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, proc.returncode, cpu


def imported_modules(files: list[Path], baseline: Path, cwd: Path) -> set[str]:
    """Every module the check imported, from ``-X importtime`` (stderr)."""
    code = ("import sys; from graphmend.cli.app import main; "
            f"sys.argv = ['mend', 'check', '--baseline', {str(baseline)!r}, '-q', *{[str(f) for f in files]!r}]; main()")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=cwd, capture_output=True, text=True)
    mods = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            mods.add(line.rsplit("|", 1)[1].strip())
    return mods


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    files = changed_files()
    lines = sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)
    with tempfile.TemporaryDirectory() as tmp:
        baseline = Path(tmp) / "baseline.json"  # empty baseline: every finding is new (the most work)
        cmd = mend() + ["check", "--baseline", str(baseline), "-q", *map(str, files)]
        run_once(cmd, ROOT)  # warm the file cache; pre-commit runs on a warm disk too
        times, cpus, codes = [], [], set()
        for _ in range(args.runs):
            t, rc, cpu = run_once(cmd, ROOT)
            times.append(t)
            cpus.append(cpu)
            codes.add(rc)
        mods = imported_modules(files, baseline, ROOT)
        startup = [run_once(mend() + ["--version"], ROOT)[0] for _ in range(3)]
    torch_mods = sorted(m for m in mods if m == "torch" or m.startswith("torch."))
    result = {
        "files": [f.name for f in files], "lines": lines, "runs": args.runs,
        "median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3), "max_s": round(max(times), 3),
        "cpu_median_s": round(statistics.median(cpus), 3), "load_avg_1m": round(os.getloadavg()[0], 2),
        "mend_version_startup_median_s": round(statistics.median(startup), 3),
        "exit_codes": sorted(codes), "modules_imported": len(mods), "torch_imported": bool(torch_mods),
        "goal_s": 1.0, "goal_met": statistics.median(times) < 1.0 and not torch_mods,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"mend check, static, {len(files)} corpus files ({lines} lines), empty baseline")
        print(f"  wall time incl. start-up: median {result['median_s']:.3f} s "
              f"(min {result['min_s']:.3f}, max {result['max_s']:.3f}, {args.runs} runs); goal < 1 s")
        print(f"  CPU time (user+sys): median {result['cpu_median_s']:.3f} s; load average "
              f"{result['load_avg_1m']} on {os.cpu_count()} cores")
        print(f"  'mend --version' start-up alone: {result['mend_version_startup_median_s']:.3f} s")
        print(f"  exit codes: {result['exit_codes']}; modules imported: {len(mods)}; torch imported: "
              f"{'YES: ' + ', '.join(torch_mods[:5]) if torch_mods else 'no'}")
    sys.exit(0 if result["goal_met"] else 1)


if __name__ == "__main__":
    main()
