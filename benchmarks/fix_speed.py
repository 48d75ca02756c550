"""How long ``mend fix`` takes against a dynamic ``mend analyze`` of the same file, and how
long a second ``mend fix`` takes with nothing changed (ratios, in one run).

Three fixes are timed: after the analyze (whose captures it starts from, as a user's
``mend analyze`` then ``mend fix`` does), cold (a cache of its own: it captures everything
again), and the second, unchanged one.

    python benchmarks/fix_speed.py                       # corpus/hf_models.py, --jobs 2
    python benchmarks/fix_speed.py corpus/attention.py --jobs 8 --json out.json
    python benchmarks/fix_speed.py corpus/hf_models.py --survey mixtral t5 --jobs 8   # + models survey_hf.py builds

Each command runs as a user runs it (``python -m graphmend ...``), with a cache folder of
its own so that the first ``mend fix`` starts cold; the ratios are of wall-clock seconds
measured in this one run, on this machine. Nothing here is a test: no number is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def timed(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "graphmend", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    return time.perf_counter() - start, proc.returncode, proc.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["corpus/hf_models.py"])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--report", help="write the first fix's JSON report here (breaks before / after per target)")
    ap.add_argument("--survey", nargs="+", default=[], metavar="MODEL_TYPE",
                    help="also these transformers model types, as benchmarks/survey_hf.py builds them (one target each)")
    a = ap.parse_args(argv)
    jobs = ["--jobs", str(a.jobs)]
    with tempfile.TemporaryDirectory(prefix="mend-fix-speed-") as tmp:
        if a.survey:
            from survey_hf import write_targets

            folder = Path(tmp) / "survey"
            folder.mkdir()
            write_targets(folder, a.survey)
            a.paths = [*a.paths, str(folder)]
        env = {**os.environ, "MEND_CACHE_DIR": str(Path(tmp) / "cache"), "PYTHONPATH": str(ROOT)}
        analyze_s, analyze_rc, _ = timed(["analyze", *a.paths, *jobs, "-q", "-f", "json", "-o",
                                          str(Path(tmp) / "analyze.json")], env)
        first_s, first_rc, first_out = timed(["fix", *a.paths, *jobs, "-q", "-f", "json"], env)
        second_s, second_rc, second_out = timed(["fix", *a.paths, *jobs, "-q", "-f", "json"], env)
        cold_s, cold_rc, cold_out = timed(["fix", *a.paths, *jobs, "-q", "-f", "json"],
                                          {**env, "MEND_CACHE_DIR": str(Path(tmp) / "cold-cache")})
    same = _verdicts(first_out) == _verdicts(second_out) == _verdicts(cold_out)
    if a.report:
        Path(a.report).write_text(first_out, encoding="utf-8")
    out = {"paths": a.paths, "survey": a.survey, "jobs": a.jobs, "cpus": os.cpu_count(), "machine": platform.node(),
           "analyze_s": round(analyze_s, 1), "fix_first_s": round(first_s, 1), "fix_second_s": round(second_s, 1),
           "fix_cold_s": round(cold_s, 1),
           "fix_over_analyze": round(first_s / analyze_s, 2), "second_over_first": round(second_s / first_s, 3),
           "cold_over_analyze": round(cold_s / analyze_s, 2),
           "exit_codes": [analyze_rc, first_rc, second_rc, cold_rc], "same_verdicts": same}
    what = " ".join(p for p in a.paths if "mend-fix-speed-" not in p) + (f" + {len(a.survey)} surveyed" if a.survey else "")
    print(f"{what} (--jobs {a.jobs}, {os.cpu_count()} CPUs): analyze {analyze_s:.1f} s, "
          f"fix {first_s:.1f} s ({out['fix_over_analyze']}x analyze), second fix {second_s:.1f} s "
          f"({out['second_over_first']}x the first), cold fix {cold_s:.1f} s ({out['cold_over_analyze']}x analyze); "
          f"verdicts {'the same' if same else 'DIFFER'}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0 if same else 1


def _verdicts(text: str) -> list:
    """What a fix run decided, per fix: the part a cache must give back unchanged."""
    try:
        fixes = json.loads(text).get("fixes", [])
    except ValueError:
        return [text]
    return sorted((f.get("file"), f.get("line"), f.get("rule"), f.get("status"), f.get("reason")) for f in fixes)


if __name__ == "__main__":
    sys.exit(main())
