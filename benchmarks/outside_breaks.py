"""Breaks ``mend fix`` removes from programs written in the style of code outside this repo
(tests/fixtures/outside_programs/: detection post-processing, a diffusion sampler loop, beam
search, a plain transformer block), measured as Dynamo logs them.

    python benchmarks/outside_breaks.py           # tests/fixtures/outside_programs/, this checkout's mend
    python benchmarks/outside_breaks.py --programs DIR --json out.json
    # the same programs under another checkout's mend (e.g. an export of the base commit):
    python /tmp/base/benchmarks/outside_breaks.py --programs tests/fixtures/outside_programs

The programs are copied to a temporary folder; ``mend fix`` runs there, its verified
patches are written, and it runs again until no verified patch is left (a fix can let
Dynamo reach breaks a skipped frame hid: a break in a loop makes Dynamo skip the whole
function). Per target: Dynamo's logged breaks (every distinct break and skipped frame the
capture records), ``explain``'s graph_break_count, and skipped frames, before the first
round and after the last one (a fresh capture of the mended program).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 4


def _counts(t) -> dict:
    return {"logged": len(t.breaks), "graph_break_count": t.graph_break_count,
            "frames_skipped": sum(1 for b in t.breaks if b.kind == "frame_skipped")}


def measure(programs: Path, timeout: float) -> dict:
    sys.path.insert(0, str(ROOT))
    from graphmend.core.config import load_config
    from graphmend.fixing import FixOptions, run_fix

    out: dict = {"targets": {}, "rounds": 0}
    with tempfile.TemporaryDirectory(prefix="mend-outside-") as tmp:
        work = Path(tmp) / "outside"
        shutil.copytree(programs, work, ignore=shutil.ignore_patterns("__pycache__"))
        first = last = None
        for rnd in range(ROUNDS):
            run = run_fix([work], load_config([work]), FixOptions(timeout=timeout, cache=False))
            last = run
            first = first or run
            out["rounds"] = rnd + 1
            if not run.patches:
                break
            for path, text in run.patches.items():
                Path(path).write_text(text, encoding="utf-8")
        before = {t.name: t for t in first.report.targets}
        after = {t.name: t for t in last.report.targets}
        for name, t in before.items():
            a = after.get(name)
            left = [f"{b.rule} {Path(b.file or '').name}:{b.line} ({b.kind}): {b.reason}" for b in a.breaks] if a else []
            out["targets"][name] = {"before": _counts(t), "after": _counts(a) if a else None, "remaining": left}
        out["refused"] = sorted({f"{Path(f.file).name}:{f.line} {f.rule} {f.status}: {f.reason}"
                                 for r in (first, last) for f in r.report.fixes if f.status != "verified"})
    tb = sum(v["before"]["logged"] for v in out["targets"].values())
    ta = sum(v["after"]["logged"] for v in out["targets"].values() if v["after"])
    out["total"] = {"before": tb, "after": ta, "removed": tb - ta}
    return out


def render(res: dict) -> str:
    lines = ["| target | logged breaks before | after | graph_break_count before | after | skipped frames before | after |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, v in sorted(res["targets"].items()):
        b, a = v["before"], v["after"] or {"logged": "?", "graph_break_count": "?", "frames_skipped": "?"}
        lines.append(f"| {name} | {b['logged']} | {a['logged']} | {b['graph_break_count']} | {a['graph_break_count']} "
                     f"| {b['frames_skipped']} | {a['frames_skipped']} |")
    t = res["total"]
    lines.append(f"\ntotal: {t['before']} logged breaks before, {t['after']} after ({t['removed']} removed, "
                 f"{res['rounds']} rounds of mend fix)")
    for name, v in sorted(res["targets"].items()):
        for r in v["remaining"]:
            lines.append(f"  left in {name}: {r}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=Path, default=ROOT / "tests" / "fixtures" / "outside_programs")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    res = measure(args.programs.resolve(), args.timeout)
    if args.json:
        args.json.write_text(json.dumps(res, indent=2), encoding="utf-8")
    print(render(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
