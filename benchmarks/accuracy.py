"""Accuracy of the static scan on the corpus.

recall    = share of dynamic break sites (file:line) that a static rule flagged; breaks in
            installed packages a target calls (out_of_tree) are measured by scanning those files
precision = share of static findings inside executed regions that a dynamic break confirmed
clean     = static findings in the files/functions of targets the manifest marks clean

Two sources for the dynamic side:
  python benchmarks/accuracy.py                 # runs `mend analyze corpus --format json` (torch, minutes)
  python benchmarks/accuracy.py --report r.json # an existing analyze JSON report
  python benchmarks/accuracy.py --manifest      # corpus/manifest.toml sites (no torch, seconds)

"Executed regions" for precision: the functions (file + qualified name) in which some target
had a dynamic break, and for --manifest the functions holding a manifest site; a finding
elsewhere may be on a path no target ran and is left out of the precision figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _absolute(report: dict) -> dict:
    """The report's findings and breaks with absolute files (JSON writes those under its root relative)."""
    root = report.get("root") or ""
    for item in [*report.get("findings", []), *(b for t in report.get("targets", []) for b in t["breaks"])]:
        if item.get("file") and not os.path.isabs(item["file"]):
            item["file"] = os.path.join(root, item["file"])
    return report


def _static(*paths: Path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "graphmend", "analyze", *map(str, paths), "--static-only",
                          "--format", "json", "-q"], capture_output=True, text=True, cwd=ROOT)
    if out.returncode not in (0, 1):
        sys.exit(f"static scan failed: {out.stderr.strip()}")
    return _absolute(json.loads(out.stdout))["findings"]


def _manifest_sites(corpus: Path) -> tuple[list[tuple[str, int, str]], set[str]]:
    data = tomllib.loads((corpus / "manifest.toml").read_text())
    sites, clean_files, dirty = [], set(), set()
    for name, t in data.get("targets", {}).items():
        file = str((corpus / name.split("::")[0]).resolve())
        (clean_files if t.get("clean") else dirty).add(file)
        for s in t.get("sites", []):
            if s.get("dynamic", True):
                sites.append((file, int(s["line"]), s.get("rule", "")))
    return sites, clean_files - dirty  # files whose every target is clean


def measure(findings: list[dict], breaks: list[tuple[str, int, str, str]]) -> dict:
    """breaks: (file, line, rule, function)."""
    flagged = {(os.path.realpath(f["file"]), f["line"]) for f in findings}
    break_lines = {(os.path.realpath(b[0]), b[1]) for b in breaks}
    hit = sorted(b for b in break_lines if b in flagged)
    missed = sorted(b for b in break_lines if b not in flagged)
    executed = {(os.path.realpath(b[0]), b[3]) for b in breaks if b[3]}
    in_exec = [f for f in findings if (os.path.realpath(f["file"]), f["function"]) in executed]
    confirmed = [f for f in in_exec if (os.path.realpath(f["file"]), f["line"]) in break_lines]
    unconfirmed = [f for f in in_exec if (os.path.realpath(f["file"]), f["line"]) not in break_lines]
    # breaks Dynamo itself could map to a rule family (GM9xx: its own reasons, no static pattern)
    classified = {(os.path.realpath(b[0]), b[1]) for b in breaks if not b[2].startswith("GM9")}
    return {
        "breaks": len(break_lines), "flagged_breaks": len(hit),
        "recall": len(hit) / len(break_lines) if break_lines else None,
        "rule_classified_breaks": len(classified),
        "recall_rule_classified": (len([b for b in classified if b in flagged]) / len(classified)
                                   if classified else None),
        "findings_in_executed_regions": len(in_exec), "confirmed": len(confirmed),
        "precision": len(confirmed) / len(in_exec) if in_exec else None,
        "missed": [f"{Path(f).name}:{line}" for f, line in missed],
        "unconfirmed": [f"{Path(f['file']).name}:{f['line']} {f['rule']}" for f in unconfirmed],
    }


def _function_of(file: str, line: int) -> str:
    """The qualified function holding ``line`` (for manifest sites, which carry no function)."""
    import ast

    tree = ast.parse(Path(file).read_text())
    best = ""

    def visit(node, prefix):
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and child.lineno <= line <= child.end_lineno:
                name = f"{prefix}.{child.name}" if prefix else child.name
                if not isinstance(child, ast.ClassDef):
                    best = name  # deeper definitions overwrite: the innermost function wins
                visit(child, name)

    visit(tree, "")
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", default=str(ROOT / "corpus"))
    ap.add_argument("--report", help="an existing `mend analyze --format json` report")
    ap.add_argument("--manifest", action="store_true", help="use manifest.toml sites instead of running targets")
    ap.add_argument("--jobs", default="2")
    args = ap.parse_args(argv)
    corpus = Path(args.corpus).resolve()
    if args.manifest:
        findings = _static(corpus)
        sites, _ = _manifest_sites(corpus)
        breaks = [(f, line, rule, _function_of(f, line)) for f, line, rule in sites]
    else:
        if args.report:
            report = _absolute(json.loads(Path(args.report).read_text()))
        else:
            out = subprocess.run([sys.executable, "-m", "graphmend", "analyze", str(corpus), "--format", "json",
                                  "-q", "--jobs", args.jobs], capture_output=True, text=True, cwd=ROOT)
            if out.returncode not in (0, 1):
                sys.exit(f"mend analyze failed: {out.stderr.strip()[-2000:]}")
            report = _absolute(json.loads(out.stdout))
        findings = report["findings"]
        breaks = [(b["file"], b["line"], b["rule"], b.get("function") or "")
                  for t in report["targets"] for b in t["breaks"] if b.get("file") and b.get("line")]
        # Dynamo names the innermost function; make it the qualified name the scan uses
        breaks = [(f, line, rule, _function_of(f, line) if os.path.exists(f) else fn) for f, line, rule, fn in breaks]
    inside = [b for b in breaks if os.path.realpath(b[0]).startswith(str(corpus) + os.sep)]
    outside = [b for b in breaks if b not in inside]
    result = measure(findings, inside)
    if outside:
        # breaks in installed packages the targets call (transformers models): scan those files too
        files = sorted({os.path.realpath(b[0]) for b in outside if os.path.exists(b[0])})
        result["out_of_tree"] = measure(_static(*map(Path, files)), outside)
        result["out_of_tree"]["files"] = [Path(f).name for f in files]
        result["all"] = measure(findings + _static(*map(Path, files)), breaks)
    _, clean_files = _manifest_sites(corpus)
    result["clean_files"] = sorted(Path(f).name for f in clean_files)
    result["findings_in_clean_files"] = [f"{Path(f['file']).name}:{f['line']} {f['rule']}" for f in findings
                                         if os.path.realpath(f["file"]) in clean_files]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
