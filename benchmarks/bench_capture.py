"""Capture overhead per target vs bare ``torch._dynamo.explain``, both in one process
(goal <= 1.15x); worker subprocess start-up measured separately.

    python benchmarks/bench_capture.py [PATH ...]   (default: corpus/ and the tracer fixtures)
"""
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    import torch

    from graphmend.core.config import Config
    from graphmend.core.discovery import discover
    from graphmend.core.targets import load_target
    from tracer.worker import capture_loaded

    paths = sys.argv[1:] or [str(ROOT / "corpus"), str(ROOT / "tests/fixtures/dynamic/models")]
    specs = [s for p in paths if Path(p).exists() for s in discover([p], Config()).targets]
    rows = []
    for spec in specs:
        t = load_target(spec.__dict__)
        ex, cap = [], []
        for _ in range(3):  # interleaved, best of 3: the machine is shared
            torch._dynamo.reset()
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch._dynamo.explain(t.fn)(*t.args, **t.kwargs)
            ex.append(time.perf_counter() - start)
            start = time.perf_counter()
            capture_loaded(spec.name, spec.file or "", spec.function, t.fn, t.args, t.kwargs)
            cap.append(time.perf_counter() - start)
        rows.append((spec.name, min(ex), min(cap)))
        print(f"{spec.name:55s} explain {min(ex)*1000:8.1f} ms  capture {min(cap)*1000:8.1f} ms  x{min(cap)/min(ex):.2f}")
    total_ex = sum(r[1] for r in rows)
    total_cap = sum(r[2] for r in rows)
    print(f"\n{len(rows)} targets: explain {total_ex:.2f} s, capture {total_cap:.2f} s, "
          f"overall x{total_cap/total_ex:.2f}, median per target x{statistics.median(r[2]/r[1] for r in rows):.2f} (goal <= 1.15)")
    starts = []
    for _ in range(3):
        s = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch, torch._dynamo, tracer.worker"], cwd=ROOT, check=True)
        starts.append(time.perf_counter() - s)
    print(f"worker start-up (python + import torch + torch._dynamo + tracer): median {statistics.median(starts):.2f} s "
          "per worker (paid once per file of targets)")


if __name__ == "__main__":
    main()
