"""Recall and precision of the static scan against the breaks Dynamo logs, on code written
outside this repo's corpus.

    python benchmarks/scan_recall.py                    # tests/fixtures/scan_recall/*.py (minutes)
    python benchmarks/scan_recall.py --report r.json    # an existing `mend analyze --format json` report
    python benchmarks/scan_recall.py --hf xlm ctrl      # also transformers models built from configs
    python benchmarks/scan_recall.py --hf xlm --save-reports DIR   # keep the dynamic reports ...
    python benchmarks/scan_recall.py --report DIR/programs.json --hf-report DIR/hf.json  # ... re-score
    python benchmarks/scan_recall.py --json out.json    # the figures as JSON as well

Ground truth is mend's own dynamic capture (`mend analyze PATH --format json`): every break
the log shows, counted breaks and skipped frames alike, at its innermost user line. The scan
is `mend analyze PATH --static-only` over the same files (for --hf: the transformers modeling
files the breaks are in).

recall     = break lines (file:line) the scan flags / break lines Dynamo logged
precision  = findings on a logged break line / findings Dynamo can judge. A finding cannot be
             judged when Dynamo gave up on its frame at an earlier line of the same function
             (a break in a loop makes it skip the whole frame, which then runs eagerly, so
             nothing later in it is traced or logged); `precision_strict` counts those as false.
negatives  = findings in functions none of whose lines Dynamo logged a break at, for the
             benchmark programs (each of their functions runs under some target): must be 0.

For --hf, precision is over the functions Dynamo broke in (a modeling file holds many code
paths a tiny config never takes), as benchmarks/accuracy.py measures the corpus; the negatives
are `clean_models`: the findings in the modeling file of each model that compiles without a
break (candidates only: the file holds paths the tiny config does not take).

A finding in an arm the tiny config never runs (LayerDrop in eval mode, a seed left unset) is
neither confirmed nor refuted by that run. `--hf-reach MODEL:key=value,...` runs MODEL again with
those config values, in eval and train mode, so that Dynamo traces those arms; its breaks join
the ground truth in `reached` (the figures without them stay as they were):

    python benchmarks/scan_recall.py --hf flaubert led reformer \
        --hf-reach flaubert:layerdrop=0.5 led:encoder_layerdrop=0.5,decoder_layerdrop=0.5 reformer:hash_seed=0
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "fixtures" / "scan_recall"


def _mend(*args: str, env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, "-m", "graphmend", "analyze", *args, "--format", "json", "-q"],
                         capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})})
    if out.returncode not in (0, 1):
        sys.exit(f"scan_recall: mend analyze {' '.join(args)} failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def functions(path: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function of the file, outermost first."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}" if prefix else child.name
                if not isinstance(child, ast.ClassDef):
                    out.append((child.lineno, child.end_lineno, name))
                visit(child, name)

    visit(ast.parse(Path(path).read_text()), "")
    return out


def function_at(funcs: list[tuple[int, int, str]], line: int) -> str:
    best = ""
    for lo, hi, name in funcs:  # the innermost function holding the line wins
        if lo <= line <= hi:
            best = name
    return best


def breaks_of(report: dict) -> list[dict]:
    return [{"file": os.path.realpath(b["file"]), "line": b["line"], "rule": b["rule"], "kind": b["kind"],
             "reason": b["reason"], "target": t["name"]}
            for t in report["targets"] for b in t["breaks"] if b.get("file") and b.get("line")]


def measure(findings: list[dict], breaks: list[dict], executed_only: bool = False) -> dict:
    funcs = {}

    def fn(file: str, line: int) -> str:
        if file not in funcs:
            funcs[file] = functions(file) if os.path.exists(file) else []
        return function_at(funcs[file], line)

    findings = [{**f, "file": os.path.realpath(f["file"])} for f in findings]
    lines = {(b["file"], b["line"]) for b in breaks}
    flagged = {(f["file"], f["line"]) for f in findings}
    skipped_at: dict[tuple[str, str], int] = {}  # (file, function) -> first line Dynamo skipped the frame at
    broke_in = set()
    for b in breaks:
        key = (b["file"], fn(b["file"], b["line"]))
        broke_in.add(key)
        if b["kind"] == "frame_skipped":
            skipped_at[key] = min(skipped_at.get(key, b["line"]), b["line"])
    judged, unjudged, confirmed, false = [], [], [], []
    negatives = []
    for f in findings:
        key = (f["file"], fn(f["file"], f["line"]))
        if executed_only and key not in broke_in:
            continue
        site = (f["file"], f["line"])
        if site in lines:
            confirmed.append(f)
        elif key in skipped_at and skipped_at[key] < f["line"]:
            unjudged.append(f)
        else:
            false.append(f)
        if key not in broke_in:
            negatives.append(f)
    judged = confirmed + false
    missed = sorted(site for site in lines if site not in flagged)
    show = (lambda f: f"{Path(f['file']).name}:{f['line']} {f['rule']}")
    return {
        "break_lines": len(lines), "flagged": len(lines) - len(missed),
        "recall": round((len(lines) - len(missed)) / len(lines), 3) if lines else None,
        "findings": len(confirmed) + len(false) + len(unjudged), "confirmed": len(confirmed),
        "unjudged": len(unjudged),
        "precision": round(len(confirmed) / len(judged), 3) if judged else None,
        "precision_strict": round(len(confirmed) / (len(judged) + len(unjudged)), 3) if judged or unjudged else None,
        "missed": [f"{Path(f).name}:{line} {next(b['rule'] + ' ' + b['reason'] for b in breaks if (b['file'], b['line']) == (f, line))}"
                   for f, line in missed],
        "false": [show(f) for f in false],
        "unjudged_findings": [show(f) for f in unjudged],
        "negatives": [show(f) for f in negatives],
    }


def _save(report: dict, save: str | None, name: str) -> None:
    if save:
        Path(save).mkdir(parents=True, exist_ok=True)
        (Path(save) / name).write_text(json.dumps(report))


def programs(report_path: str | None, jobs: str, save: str | None = None) -> dict:
    report = json.loads(Path(report_path).read_text()) if report_path else _mend(str(PROGRAMS), "--jobs", jobs)
    _save(report, save, "programs.json")
    static = _mend(str(PROGRAMS), "--static-only")
    errors = [t["name"] + ": " + t["error"] for t in report["targets"] if t.get("error")]
    inside = [b for b in breaks_of(report) if b["file"].startswith(str(PROGRAMS) + os.sep)]
    out = measure(static["findings"], inside)
    out["targets"] = len(report["targets"])
    out["target_errors"] = errors
    out["files"] = sorted({Path(t["file"]).name for t in report["targets"]})
    return out


HF_TARGETS = '''
import sys
sys.path.insert(0, {bench!r})
from survey_hf import build


def _target(model_type, **config):
    if config:  # the survey's config with these values on top (--hf-reach)
        from survey_hf import SPECS
        from graphmend.sweep.hf import build as sweep_build

        extra, opts = SPECS[model_type]
        model, inputs = sweep_build(model_type, None, ({{**extra, **config}}, opts))
    else:
        model, inputs = build(model_type)
    return model, (), inputs
'''


def reach_spec(text: str) -> tuple[str, dict]:
    """``MODEL:key=value,...`` -> (model, {key: value}); values are Python literals."""
    model, _, rest = text.partition(":")
    config = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"scan_recall: --hf-reach {text!r}: {item!r} is not key=value")
        config[key.strip()] = ast.literal_eval(value.strip())
    if not model or not config:
        raise SystemExit(f"scan_recall: --hf-reach {text!r}: expected MODEL:key=value,...")
    return model, config


def _hf_report(specs: list[tuple[str, dict]], jobs: str, *modes: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src = HF_TARGETS.format(bench=str(ROOT / "benchmarks"))
        for i, (m, config) in enumerate(specs):
            name = m.replace("-", "_") + (f"__reach{i}" if config else "")
            src += f"\n\ndef mend_target_{name}():\n    return _target({m!r}, **{config!r})\n"
        (Path(tmp) / "hf_targets.py").write_text(src)
        return _mend(tmp, "--jobs", jobs, *modes)


def hf(models: list[str], jobs: str, report_path: str | None = None, save: str | None = None,
       reach: list[str] = (), reach_report: str | None = None) -> dict:
    """transformers models from configs (random weights, benchmarks/survey_hf.py's builder):
    their breaks land in the installed modeling files, which are then scanned."""
    if report_path:
        report = json.loads(Path(report_path).read_text())
    else:
        report = _hf_report([(m, {}) for m in models], jobs)
        _save(report, save, "hf.json")
    reached = None
    if reach_report:
        reached = json.loads(Path(reach_report).read_text())
    elif reach:
        reached = _hf_report([reach_spec(r) for r in reach], jobs, "--modes", "eval,train")
        _save(reached, save, "hf-reach.json")
    breaks = [b for b in breaks_of(report) if "/transformers/" in b["file"]]
    more = [b for b in breaks_of(reached) if "/transformers/" in b["file"]] if reached else []
    files = sorted({b["file"] for b in breaks + more})
    per_model = {t["name"].split("mend_target_")[-1]: {"error": t.get("error"), "graph_breaks": t["graph_break_count"],
                                                      "break_lines": len({(b["file"], b["line"]) for b in t["breaks"]})}
                 for t in report["targets"]}
    findings = _mend(*files, "--static-only")["findings"] if files else []
    out = measure(findings, breaks, executed_only=True)
    out["models"] = per_model
    if reached:
        # the same findings against the breaks of both runs: the arms the tiny configs skip, traced
        out["reached"] = {**measure(findings, breaks + more, executed_only=True),
                          "runs": [t["name"].split("mend_target_")[-1] for t in reached["targets"]],
                          "errors": [f"{t['name']}: {t['error']}" for t in reached["targets"] if t.get("error")]}
    # the negatives: a model that compiles without a break, and the findings in its modeling file
    # (a file of many code paths, so a finding there is only a candidate false positive)
    import transformers

    models_dir = Path(transformers.__file__).parent / "models"
    clean = {}
    for name, m in per_model.items():
        path = models_dir / name / f"modeling_{name}.py"
        if not m["error"] and m["break_lines"] == 0 and path.exists():
            clean[name] = [f"{Path(f['file']).name}:{f['line']} {f['rule']}"
                           for f in _mend(str(path), "--static-only")["findings"]]
    out["clean_models"] = clean
    out["files"] = [Path(f).name for f in files]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", help="an existing `mend analyze tests/fixtures/scan_recall --format json` report")
    ap.add_argument("--hf", nargs="*", default=None, metavar="MODEL_TYPE",
                    help="also transformers model types (survey_hf names: xlm ctrl longformer ...)")
    ap.add_argument("--hf-report", help="an existing report of the --hf targets (from --save-reports)")
    ap.add_argument("--hf-reach", nargs="*", default=[], metavar="MODEL:KEY=VALUE,...",
                    help="run MODEL again with these config values, eval and train, to trace the arms "
                         "the tiny config skips")
    ap.add_argument("--hf-reach-report", help="an existing report of the --hf-reach runs (hf-reach.json)")
    ap.add_argument("--save-reports", metavar="DIR", help="keep the dynamic reports (programs.json, hf.json)")
    ap.add_argument("--no-programs", action="store_true", help="only the --hf models")
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args(argv)
    result = {}
    if not args.no_programs:
        result["programs"] = programs(args.report, args.jobs, args.save_reports)
    if args.hf or args.hf_report:
        result["transformers"] = hf(args.hf or [], args.jobs, args.hf_report, args.save_reports,
                                    args.hf_reach, args.hf_reach_report)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
