"""Is any mended program slower than its original? ``mend fix --bench`` over many targets,
as a user runs it, and one table of what its cost gate measured (the cost sweep).

    python benchmarks/cost_sweep.py corpus --split corpus/hf_models.py \\
        --survey mixtral qwen2_moe t5 --modes default,reduce-overhead --device cuda \\
        --parallel 3 --jobs 4 --prefill 12 --out build/sweep --deadline 540

A unit is one file (each corpus file), or one target (``--split FILE`` gives each target of
FILE a file of its own, ``--survey TYPE`` a model survey_hf.py builds). Each unit is one
``python -m graphmend fix UNIT --bench ...`` whose JSON report lands in ``--out``; a unit
whose report is there already is not run again, so a sweep cut short by ``--deadline`` (no
unit starts after that many seconds) goes on where it stopped. ``--parallel`` units run at
once: each times its arms one after another, so at most that many arms share the machine,
and a unit's two arms may meet different loads (on the H200: the privacy filter's
default mode, 2.28x slower beside another lane, 0.73x when arm_profile.py timed it alone);
take verdicts from --parallel 1.
Then every report's cost checks are tabulated (``OUT/summary.md``, ``OUT/summary.json``).
Nothing here is a test: no number is asserted.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def units(paths: list[str], split: list[str], survey: list[str], work: Path) -> list[Path]:
    """The files to run mend fix on, one per unit, in a stable order."""
    out: list[Path] = []
    split_files = {Path(s).resolve() for s in split}
    for p in map(Path, paths):
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        out += [f.resolve() for f in files if f.resolve() not in split_files and _targets(f)]
    # split files first: their units are the transformers models, the costliest to time
    head: list[Path] = []
    for f in sorted(split_files):
        module = os.path.relpath(f, ROOT).removesuffix(".py").replace(os.sep, ".")
        for fn in _targets(f):
            wrapper = work / f"{f.stem}__{fn.removeprefix('mend_target_')}.py"
            wrapper.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom {module} import {fn} as _t\n\n\n"
                               f"def {fn}():\n    return _t()\n", encoding="utf-8")
            head.append(wrapper)
    if survey:
        from survey_hf import write_targets

        head += write_targets(work, survey)
    return head + out


def _targets(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("mend_target")
            and not n.name.endswith("_reference")]


def run_unit(unit: Path, a, out: Path, env: dict[str, str]) -> dict:
    report = out / f"{unit.stem}.json"
    if report.exists():
        return {"unit": unit.stem, "skipped": "already run"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "graphmend", "fix", str(unit), "--bench", "--bench-modes", a.modes,
                           "--bench-device", a.device, "--jobs", str(a.jobs), "-f", "json", "-q", *a.train],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = round(time.perf_counter() - start, 1)
    if proc.stdout.strip().startswith("{"):
        report.write_text(proc.stdout, encoding="utf-8")
    else:
        (out / f"{unit.stem}.err").write_text(proc.stderr[-4000:], encoding="utf-8")
    return {"unit": unit.stem, "rc": proc.returncode, "seconds": seconds}


def summarize(out: Path) -> tuple[list[dict], str]:
    rows = []
    for path in sorted(out.glob("*.json")):
        if path.name == "summary.json":
            continue
        report = json.loads(path.read_text(encoding="utf-8"))
        fixes = report.get("fixes", [])
        for t in report.get("fix_targets", []):
            for c in t.get("costs", []):
                rows.append({**c, "unit": path.stem, "breaks": f"{t['breaks_before']} -> {t['breaks_after']}",
                             "regresses": sum(f["status"] == "regresses" for f in fixes)})
    slower = [r for r in rows if r["verdict"] == "slower"]
    untold = [r for r in rows if r["verdict"] == "untold"]
    lines = [f"{len({r['target'] for r in rows})} targets with verified fixes timed, {len(rows)} (target, mode) "
             f"checks: {len(slower)} slower, {len(untold)} untold, {len(rows) - len(slower) - len(untold)} not slower",
             "", "| target | mode | breaks | graphs | original ms | mended ms | mended / original | verdict |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | --- |"]

    def f(x, fmt="{:.3f}"):
        return "–" if x is None else fmt.format(x)

    for r in sorted(rows, key=lambda r: (r["target"], r["mode"])):
        lines.append(f"| {r['target']} | {r['mode']} | {r['breaks']} | {f(r['graphs_original'], '{}')} -> "
                     f"{f(r['graphs_mended'], '{}')} | {f(r['original_ms'])} | {f(r['mended_ms'])} | "
                     f"{f(r['ratio'])} | {r['verdict']}{' (' + r['why'] + ')' if r['why'] else ''} |")
    return rows, "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["corpus"])
    ap.add_argument("--split", nargs="+", default=[], metavar="FILE", help="one unit per target of these files")
    ap.add_argument("--survey", nargs="+", default=[], metavar="MODEL_TYPE")
    ap.add_argument("--modes", default="default,reduce-overhead")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="mend fix --jobs of each unit")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=None, help="seconds after which no unit starts")
    ap.add_argument("--prefill", type=int, default=0, metavar="JOBS",
                    help="first one mend fix (no bench) over every unit with this many jobs: the units then reuse "
                         "its captures and verdicts from the cache, and their arms are timed while little else runs")
    ap.add_argument("--write-units", action="store_true",
                    help="only write the unit files under OUT/units (for a plain `mend fix` over them)")
    ap.add_argument("--only", nargs="+", default=[], metavar="TEXT",
                    help="run only the units whose name ends with one of these (e.g. qwen2_moe)")
    ap.add_argument("--train", action="store_const", const=["--train"], default=[],
                    help="mend fix --train: the breaks a training step hits, each timed call a training step")
    a = ap.parse_args(argv)
    out = Path(a.out)
    work = out / "units"
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    env.setdefault("MEND_CACHE_DIR", str(out / "cache"))
    todo = [u for u in units(a.paths, a.split, a.survey, work) if not a.only or u.stem.endswith(tuple(a.only))]
    if a.write_units:
        print("\n".join(str(u) for u in todo))
        return 0
    start = time.perf_counter()
    fresh = [u for u in todo if not (out / f"{u.stem}.json").exists()]
    if a.prefill and fresh:
        subprocess.run([sys.executable, "-m", "graphmend", "fix", *map(str, fresh), "--jobs", str(a.prefill), "-q",
                        "-f", "json", "-o", str(work / "prefill.json"), *a.train], cwd=ROOT, env=env, capture_output=True)
        print(json.dumps({"prefill_s": round(time.perf_counter() - start, 1)}), flush=True)

    def one(unit: Path) -> dict:
        if a.deadline is not None and time.perf_counter() - start > a.deadline:
            return {"unit": unit.stem, "skipped": "deadline"}
        result = run_unit(unit, a, out, env)
        print(json.dumps(result), flush=True)
        return result

    with ThreadPoolExecutor(max_workers=max(1, a.parallel)) as pool:
        runs = list(pool.map(one, todo))
    rows, table = summarize(out)
    (out / "summary.md").write_text(table, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps({"runs": runs, "checks": rows}, indent=2) + "\n", encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
