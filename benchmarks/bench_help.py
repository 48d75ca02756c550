"""Wall time of ``mend --help`` (goal < 0.3 s), and a check that torch is not imported on it.

    python benchmarks/bench_help.py [--runs N]
"""
import argparse
import statistics
import subprocess
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    n = ap.parse_args().runs
    cmd = [sys.executable, "-m", "graphmend", "--help"]
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    bare = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t)
    probe = subprocess.run([sys.executable, "-X", "importtime", "-m", "graphmend", "--help"],
                           capture_output=True, text=True)
    mods = [l.split("|")[-1].strip() for l in probe.stderr.splitlines() if "|" in l]
    heavy = sorted(((int(l.split("|")[1]), l.split("|")[-1].strip()) for l in probe.stderr.splitlines()
                    if "|" in l and l.split("|")[1].strip().isdigit()), reverse=True)[:8]
    print(f"mend --help: median {statistics.median(times):.3f} s, min {min(times):.3f} s over {n} runs (goal < 0.3 s)")
    print(f"python -c pass: median {statistics.median(bare):.3f} s")
    print(f"torch imported on the --help path: {'torch' in mods}")
    print("largest cumulative imports (us):", ", ".join(f"{m} {us}" for us, m in heavy))


if __name__ == "__main__":
    main()
