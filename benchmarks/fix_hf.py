"""Measure ``mend fix`` on transformers models built from configs (corpus/hf_models.py)
and on the corpus: breaks before / after (re-traced with every verified fix applied),
outputs equal, branches never exercised, and why each remaining break stays.

    python benchmarks/fix_hf.py                      # the eight hf models of corpus/hf_models.py
    python benchmarks/fix_hf.py xlm flaubert led     # chosen hf targets (suffix of mend_target_hf_)
    python benchmarks/fix_hf.py --corpus             # every corpus/*.py file instead
    python benchmarks/fix_hf.py --json out.json --md out.md
    python benchmarks/fix_hf.py --render out.json --md out.md   # the table again, from saved JSON
    PYTHONPATH=build/tf4 python benchmarks/fix_hf.py --survey t5 canine   # survey_hf.py's builders

Each hf target is wrapped in a one-line module in a temporary folder, so that the model
code mend repairs lives outside the analysed tree (in site-packages): the overlay path.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["longformer", "bigbird", "reformer", "led", "switch_transformers", "xlm", "flaubert", "nllb_moe"]


def run_paths(paths, timeout: float, unsafe: bool = False):
    sys.path.insert(0, str(ROOT))
    from graphmend.core.config import load_config
    from graphmend.fixing import FixOptions, run_fix

    return run_fix(paths, load_config(paths), FixOptions(timeout=timeout, unsafe=unsafe))


def measure_hf(name: str, timeout: float, unsafe: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="mend-fixhf-") as tmp:
        (Path(tmp) / f"hf_{name}.py").write_text(
            f"from corpus.hf_models import mend_target_hf_{name} as _made\n\n\n"
            f"def mend_target_{name}():\n    return _made()\n", encoding="utf-8")
        start = time.perf_counter()
        run = run_paths([tmp], timeout, unsafe)
    return summarise(run, time.perf_counter() - start)


def measure_survey(model_type: str, timeout: float, unsafe: bool = False) -> dict:
    """A model as benchmarks/survey_hf.py builds it (any transformers version on the path)."""
    name = re.sub(r"\W", "_", model_type)
    with tempfile.TemporaryDirectory(prefix="mend-fixhf-") as tmp:
        (Path(tmp) / f"hf_{name}.py").write_text(
            f"import sys\nsys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
            f"from survey_hf import build as _build\n\n\n"
            f"def mend_target_{name}():\n    model, inputs = _build({model_type!r})\n"
            f"    return model, (), inputs\n", encoding="utf-8")
        start = time.perf_counter()
        run = run_paths([tmp], timeout, unsafe)
    return summarise(run, time.perf_counter() - start)


def summarise(run, seconds: float) -> dict:
    rep = run.report
    return {
        "targets": [dict(name=t.name, breaks_before=t.breaks_before, breaks_after=t.breaks_after,
                         graph_breaks_before=t.graph_breaks_before, graph_breaks_after=t.graph_breaks_after,
                         outputs_equal=t.outputs_equal, unexercised=t.unexercised_branches,
                         remaining=t.remaining, error=t.error) for t in rep.fix_targets],
        "fixes": {s: sum(1 for f in rep.fixes if f.status == s)
                  for s in ("verified", "partially verified", "rejected", "advice")},
        "verified": [f"{Path(f.file).name}:{f.line} {f.rule} {f.reason}" for f in rep.fixes if f.status == "verified"],
        # written only with --accept-partial: what the proof lacks
        "partial": [f"{Path(f.file).name}:{f.line} {f.rule}: " + "; ".join(f.skipped_checks or [])
                    for f in rep.fixes if f.status == "partially verified"],
        "rejected": [f"{Path(f.file).name}:{f.line} {f.rule} {f.reason}" for f in rep.fixes if f.status == "rejected"],
        "seconds": round(seconds, 1),
    }


def render_md(results: dict, meta: str) -> str:
    """The per-model table (formatting only)."""
    out = [meta, "", "| model | break sites before → after | Dynamo breaks before → after | outputs equal | "
           "verified fixes | partially verified (--accept-partial) | remaining sites |",
           "| --- | ---: | ---: | :---: | --- | --- | --- |"]
    tot = [0, 0, 0, 0]
    for name, r in results.items():
        if "targets" not in r:
            out.append(f"| {name} | error: {r.get('error', '?')[:120]} | | | | | |")
            continue
        for t in r["targets"]:
            g = (f"{t['graph_breaks_before']} → {t['graph_breaks_after']}"
                 if t.get("graph_breaks_before") is not None else "–")
            tot[0] += t["breaks_before"]
            tot[1] += t["breaks_after"]
            tot[2] += t.get("graph_breaks_before") or 0
            tot[3] += t.get("graph_breaks_after") or 0
            fixes = "<br>".join(v.split(" ", 2)[0] + " " + v.split(" ", 2)[1] for v in r["verified"]) or "–"
            partial = "<br>".join(v.split(": ", 1)[0] for v in r.get("partial", [])) or "–"
            left: dict[str, int] = {}
            for x in t["remaining"]:
                key = x.split(":", 1)[0] + ":" + x.split(":", 2)[1] if ":" in x else x
                left[key] = left.get(key, 0) + 1
            rem = "<br>".join(f"{k} ×{n}" if n > 1 else k for k, n in left.items()) or "–"
            eq = {True: "yes", False: "**NO**", None: "–"}[t["outputs_equal"]]
            out.append(f"| {name} | {t['breaks_before']} → {t['breaks_after']} | {g} | {eq} | {fixes} | {partial} | {rem} |")
    share = lambda a, b: f" ({(a - b) / a * 100:.0f} % removed)" if a else ""  # noqa: E731
    out.append(f"| **total** | {tot[0]} → {tot[1]}{share(tot[0], tot[1])} | {tot[2]} → {tot[3]}{share(tot[2], tot[3])} "
               "| | | | |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--corpus", action="store_true")
    ap.add_argument("--survey", action="store_true", help="names are model types built by survey_hf.py")
    ap.add_argument("--json")
    ap.add_argument("--md", help="also write the Markdown table here")
    ap.add_argument("--render", help="no run: render --md from this saved --json")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--unsafe-fixes", action="store_true", help="also the cost-changing fixes (GM501/GM502 dense dispatch)")
    a = ap.parse_args()
    results = {}
    import torch
    import transformers

    meta = f"transformers {transformers.__version__}, torch {torch.__version__}"
    if a.render:
        saved = json.loads(Path(a.render).read_text(encoding="utf-8"))
        Path(a.md).write_text(render_md(saved.get("results", saved), saved.get("meta", meta)), encoding="utf-8")
        return
    if a.corpus:
        files = [p for p in sorted((ROOT / "corpus").glob("*.py"))
                 if p.name not in ("__init__.py", "measure.py", "hf_models.py")]
        for f in files:
            results[f.name] = summarise(run_paths([str(f)], a.timeout), 0)
            print(f.name, json.dumps(results[f.name]["targets"]), flush=True)
    else:
        for n in a.names or DEFAULT:
            try:
                results[n] = (measure_survey(n, a.timeout, a.unsafe_fixes) if a.survey
                          else measure_hf(n, a.timeout, a.unsafe_fixes))
            except Exception as exc:  # one model failing never stops the rest
                results[n] = {"error": f"{type(exc).__name__}: {exc}"}
            print(n, json.dumps(results[n]), flush=True)
    before = sum(t["breaks_before"] for r in results.values() for t in r.get("targets", []))
    after = sum(t["breaks_after"] for r in results.values() for t in r.get("targets", []))
    g_before = sum(t["graph_breaks_before"] or 0 for r in results.values() for t in r.get("targets", []))
    g_after = sum(t["graph_breaks_after"] or 0 for r in results.values() for t in r.get("targets", []))
    changed = sum(1 for r in results.values() for t in r.get("targets", []) if t["outputs_equal"] is False)
    print(f"TOTAL break sites {before} -> {after} ({(before - after) / before * 100 if before else 0:.0f}% removed); "
          f"Dynamo's graph_break_count {g_before} -> {g_after} "
          f"({(g_before - g_after) / g_before * 100 if g_before else 0:.0f}% removed); "
          f"targets with changed outputs: {changed}")
    if a.json:
        Path(a.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2), encoding="utf-8")
    if a.md:
        Path(a.md).write_text(render_md(results, meta), encoding="utf-8")


if __name__ == "__main__":
    main()
