"""Does ``mend sweep`` give each architecture the counts ``mend analyze`` gives it?

Runs ``mend analyze TARGETS/hf_<model>.py --dynamic-only`` for each model named (in the
sweep's run modes, one subprocess each, as a user would) and compares graphs, counted
breaks, listed breaks and skipped frames with the sweep JSON's rows.

    python benchmarks/sweep_check.py sweep.json \\
        /tmp/sweep-targets xlm flaubert big_bird bert ctrl

Exit 1 when any differs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from graphmend.core.sources import read_report_text  # noqa: E402


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    sweep, targets, models = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    data = json.loads(read_report_text(sweep))
    rows = {(r["model"], r["run_mode"]): r for r in data["rows"]}
    modes = ",".join(data["run_modes"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    bad = 0
    print("| model | mode | sweep (graphs, counted, listed, skipped) | mend analyze | same |\n|---|---|---|---|---|")
    for model in models:
        target = next((r["target"] for (m, _), r in rows.items() if m == model and r["target"]), "")
        file = targets / target.split("::")[0]
        out = subprocess.run([sys.executable, "-m", "graphmend", "analyze", str(file), "--dynamic-only", "--modes", modes,
                              "-f", "json", "-q"], capture_output=True, text=True, env=env)
        got = {t["run_mode"]: (t["graph_count"], t["graph_break_count"], len(t["breaks"]), t["frames_skipped"])
               for t in json.loads(out.stdout)["targets"]}
        for mode in data["run_modes"]:
            r = rows[model, mode]
            want = (r["graph_count"], r["graph_break_count"], r["breaks"], r["frames_skipped"])
            same = got.get(mode) == want
            bad += not same
            print(f"| {model} | {mode} | {want} | {got.get(mode)} | {'yes' if same else 'NO'} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
