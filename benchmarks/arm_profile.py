"""Where does a compiled arm's time go? The original and the mended program of one target
(mend fix's verified patches, served by mend's import overlay as the bench does), each in a
process of its own: compiled in one mode, warmed up, timed, then ``torch.profiler`` over
steady-state calls. For a mended program the cost gate calls slower: where its time goes::

    python benchmarks/arm_profile.py tests/targets/moe_gpu.py::mend_target_hf_qwen2_moe \\
        --device cuda --mode reduce-overhead --out build/profile.json

``--verify-on`` takes the patches from a tiny config of the same model and times a real-size
one with them (the patches rewrite the model's source, whatever its size)::

    python benchmarks/arm_profile.py tests/targets/moe_gpu.py::mend_target_hf_mixtral_base \\
        --verify-on tests/targets/moe_gpu.py::mend_target_hf_mixtral --device cuda \\
        --mode default,reduce-overhead --out build/mixtral-base.json

Each arm's record, per mode: the median call (ms, a call as the cost gate times it: the
modules in ``.eval()`` under ``torch.no_grad()``; ``--grad`` keeps grad mode on, as a caller
that forgets ``no_grad`` runs), graphs compiled, and the profiler's rows with the most self CPU
time and the most device time. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _arm(payload: dict) -> dict:
    if payload["patches"]:
        from graphmend.core.overlay import install_overlay

        install_overlay(payload["patches"])
    import torch
    from torch.profiler import ProfilerActivity, profile

    from graphmend.bench import measure
    from graphmend.bench.stats import median
    from graphmend.core.modes import EVAL, run_mode
    from graphmend.core.targets import load_target
    from graphmend.verify.inputs import convert, prepare_callable

    device, mode = payload["device"], payload["mode"]
    torch.manual_seed(0)
    loaded = load_target(payload["spec"])
    fn = prepare_callable(loaded.fn, device, None)
    args, kwargs = convert(loaded.args, device, None), convert(loaded.kwargs, device, None)
    with run_mode(fn, EVAL), (torch.enable_grad() if payload["grad"] else contextlib.nullcontext()):
        torch._dynamo.reset()
        backend, graphs = measure.counting_inductor(mode)
        compiled = torch.compile(fn, backend=backend) if not isinstance(backend, str) else \
            torch.compile(fn, mode=None if mode == "default" else mode)
        for _ in range(payload["warmup"]):
            compiled(*args, **kwargs)
        measure.synchronize(device)
        times = []
        for _ in range(payload["runs"]):
            t0 = time.perf_counter()
            compiled(*args, **kwargs)
            measure.synchronize(device)
            times.append((time.perf_counter() - t0) * 1000.0)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        with profile(activities=activities) as prof:
            for _ in range(10):
                compiled(*args, **kwargs)
            measure.synchronize(device)
    rows = prof.key_averages()

    def top(key: str) -> list[dict]:
        ranked = sorted(rows, key=lambda r: getattr(r, key, 0) or 0, reverse=True)[:15]
        return [{"name": r.key, "calls": round(r.count / 10, 1), "self_cpu_us": round(r.self_cpu_time_total / 10, 1),
                 "device_us": round((getattr(r, "self_device_time_total", None)
                                     or getattr(r, "self_cuda_time_total", 0) or 0) / 10, 1)} for r in ranked]

    from torch._dynamo.utils import counters

    # whether reduce-overhead captured anything: Inductor's own skip count, and graph replays
    # per call (a top-15 listing can leave cudaGraphLaunch out)
    launches = sum(r.count for r in rows if r.key == "cudaGraphLaunch") / 10
    return {"median_ms": round(median(times), 4),
            "graphs": len(graphs) if not isinstance(backend, str) else measure.unique_graphs(),
            "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
            "cuda_graph_launches_per_call": launches,
            "top_cpu": top("self_cpu_time_total"), "top_device": top("self_device_time_total") if device == "cuda" else []}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", help="FILE::mend_target_x")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--mode", default="default", help="torch.compile modes, comma-separated")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--grad", action="store_true", help="time with grad mode on (the gate: no_grad)")
    ap.add_argument("--verify-on", metavar="FILE::mend_target_y",
                    help="take the patches mend fix verifies on this target (a tiny config of the same model) "
                         "and time TARGET with them: a real-size config whose own verification would take long")
    ap.add_argument("--out")
    ap.add_argument("--log-dir", help="keep each arm's stderr here as MODE-ARM.log (with TORCH_LOGS set: why a "
                                      "graph ran without CUDA graphs, how it was partitioned)")
    ap.add_argument("--_arm", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._arm:
        payload = json.loads(Path(args._arm).read_text())
        Path(args._arm).write_text(json.dumps(_arm(payload)))
        return 0
    sys.path.insert(0, str(ROOT))
    from graphmend.fixing import verified_patches

    def unit_of(target: str, unit: Path) -> str:
        # a file holding only this target: mend fix's verdicts for it alone
        file, _, function = target.partition("::")
        file = str(Path(file).resolve())
        unit.write_text(f"import sys\nsys.path.insert(0, {str(Path(file).parent)!r})\n"
                        f"sys.path.insert(0, {str(ROOT)!r})\nfrom {Path(file).stem} import {function} as _t\n\n\n"
                        f"def {function}():\n    return _t()\n", encoding="utf-8")
        return function

    with tempfile.TemporaryDirectory() as tmp:
        unit = verify = Path(tmp) / "unit.py"
        function = unit_of(args.target, unit)
        if args.verify_on:
            verify = Path(tmp) / "verify.py"
            unit_of(args.verify_on, verify)
        patches = verified_patches([str(verify)])
        result = {"target": args.target, "verified_on": args.verify_on or args.target, "device": args.device,
                  "grad": args.grad, "patched": sorted(patches), "modes": {}}
        for mode in args.mode.split(","):
            arms = result["modes"][mode] = {}
            for arm, given in (("original", {}), ("mended", patches)):
                job = Path(tmp) / f"{arm}.json"
                spec = {"name": f"{unit}::{function}", "function": function, "file": str(unit)}
                job.write_text(json.dumps({"patches": given, "spec": spec, "device": args.device, "mode": mode,
                                           "runs": args.runs, "warmup": args.warmup, "grad": args.grad}))
                run = subprocess.run([sys.executable, __file__, args.target, "--_arm", str(job)], cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
                                         str(ROOT), os.environ.get("PYTHONPATH")]))},
                                     capture_output=True, text=True)
                arms[arm] = json.loads(job.read_text()) if run.returncode == 0 else {"error": run.stderr[-3000:]}
                if args.log_dir:
                    Path(args.log_dir).mkdir(parents=True, exist_ok=True)
                    (Path(args.log_dir) / f"{mode}-{arm}.log").write_text(run.stderr, encoding="utf-8")
                # Inductor says why it ran a graph without CUDA graphs (with TORCH_LOGS=perf_hints)
                skips = sorted({ln.strip() for ln in run.stderr.splitlines() if "skipping cudagraphs" in ln})
                if skips:
                    arms[arm]["cudagraph_skip_reasons"] = skips[:10]
            if args.out:  # after each mode: a run cut short keeps what it measured
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
