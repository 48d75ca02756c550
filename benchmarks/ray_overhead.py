"""What ``--executor ray`` costs next to the local pool: ``mend analyze FILES --dynamic-only -j N``
timed both ways, Ray's start-up apart from the per-job overhead.

    python benchmarks/ray_overhead.py corpus/norms.py corpus/rotary.py ... [-j 2] [--repeat 2]

Three runs per repeat, each a fresh ``mend`` process: local; ray on a cluster already up
(a process holding ``ray.init(num_cpus=N)``, as ``ray start --head --num-cpus N`` would, then
``--ray-address``: connecting, the cluster's Ray workers and the tasks); ray on a local instance ``mend`` starts and stops itself. Ray's
start-up is timed on its own (``ray.init(address="local")`` then ``ray.shutdown()``), and
the reports are compared with their durations zeroed: they must be the same.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    # RAY_AUTH_MODE=token: a new Ray instance makes a token (~/.ray/auth_token) that a driver
    # joining it with --ray-address must present (Ray 2.5x)
    return {**os.environ, "MEND_NO_CACHE": "1", "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token"),
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


HEAD = ("import ray, sys; ray.init(address='local', num_cpus={cpus}, include_dashboard=False, log_to_driver=False); "
        "print(ray.get_runtime_context().gcs_address, flush=True); sys.stdin.read(); ray.shutdown()")


def timed(argv: list[str]) -> tuple[float, str]:
    start = time.monotonic()
    out = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True)
    wall = time.monotonic() - start
    if out.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()[-500:]}")
    return wall, out.stdout


def timeless(report: str) -> str:
    return re.sub(r'"(\w+_s)": [-0-9.e]+', r'"\1": 0', report)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    mend = [sys.executable, "-m", "graphmend", "analyze", *args.files, "--dynamic-only", "-j", str(args.j),
            "-f", "json", "-q"]
    init = [sys.executable, "-c", "import ray, time; t = time.monotonic(); "
            f"ray.init(address='local', num_cpus={args.j}, include_dashboard=False, log_to_driver=False); "
            "print(time.monotonic() - t); ray.shutdown()"]
    for r in range(args.repeat):
        # the cluster: a process of its own holding a Ray instance (what `ray start --head` runs),
        # ended by closing its stdin, so that nothing but what this started is stopped
        started = time.monotonic()
        head = subprocess.Popen([sys.executable, "-c", HEAD.format(cpus=args.j)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
        address = head.stdout.readline().strip()
        head_s = time.monotonic() - started
        if not address:
            sys.exit("the Ray head did not start")
        try:
            local_s, local_out = timed(mend)
            cluster_s, cluster_out = timed([*mend, "--executor", "ray", "--ray-address", address])
        finally:
            head.stdin.close()
            head.wait()
        own_s, own_out = timed([*mend, "--executor", "ray"])
        init_out = subprocess.run(init, capture_output=True, text=True, env=_env(), cwd=ROOT)
        init_s = float(init_out.stdout.strip().splitlines()[-1])
        report = json.loads(local_out)
        n_targets = len(report["targets"])
        n_jobs = len({t["file"] for t in report["targets"]})
        same = timeless(local_out) == timeless(cluster_out) == timeless(own_out)
        print(json.dumps({"repeat": r + 1, "targets": n_targets, "jobs": n_jobs, "same_report": same,
                          "local_s": round(local_s, 1), "ray_cluster_s": round(cluster_s, 1),
                          "ray_own_instance_s": round(own_s, 1), "ray_head_up_s": round(head_s, 1),
                          "ray_init_local_s": round(init_s, 1),
                          "ratio_cluster": round(cluster_s / local_s, 2),
                          "ratio_own_minus_init": round((own_s - init_s) / local_s, 2),
                          "overhead_per_target_s": round((own_s - init_s - local_s) / n_targets, 2)}),
              flush=True)


if __name__ == "__main__":
    main()
