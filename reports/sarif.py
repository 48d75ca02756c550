"""SARIF 2.1.0 for code scanning: every dynamic break and every static finding is a result.

Locations under ``Report.root`` are relative URIs against the ``PROJECTROOT`` base id, so
the log is the same on every checkout. ``partialFingerprints`` hash the rule, the relative
path, the enclosing function and the whitespace-normalised source line (never the line
number), so code scanning keeps tracking a break when code above it moves.
"""

from __future__ import annotations

import hashlib
import json
from typing import Optional
from urllib.parse import quote

from graphmend.model import CONFIRMED, Report
from reports.paths import is_under, mode_note, rel, target_label
from reports.rules import PYTORCH_GRAPH_BREAKS_URI, rule_meta

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/graphmend/graphmend"
ROOT_ID = "PROJECTROOT"
FINGERPRINT_KEY = "graphmend/v1"


def fingerprint(rule: str, path: str, function: Optional[str], source: Optional[str]) -> str:
    normalised = " ".join((source or "").split())
    key = "\0".join((rule, path, function or "", normalised))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def _artifact(path: str, root: str) -> dict:
    if is_under(path, root):
        return {"uri": quote(rel(path, root)), "uriBaseId": ROOT_ID}
    return {"uri": "file://" + quote(path if path.startswith("/") else "/" + path.replace("\\", "/"))}


def _location(path: str, root: str, line: Optional[int], col: Optional[int], end_line: Optional[int],
              end_col: Optional[int], snippet: Optional[str]) -> dict:
    physical: dict = {"artifactLocation": _artifact(path, root)}
    if line is not None:
        region: dict = {"startLine": line}
        if col is not None:
            region["startColumn"] = col + 1  # the model's columns are 0-based, SARIF's 1-based
        if end_line is not None:
            region["endLine"] = end_line
        if end_col is not None and col is not None and (end_line in (None, line)) and end_col > col:
            region["endLine"] = line
            region["endColumn"] = end_col + 1
        if snippet:
            region["snippet"] = {"text": snippet.rstrip("\n")}
        physical["region"] = region
    return {"physicalLocation": physical}


def _rule(code: str, category: str) -> dict:
    meta = rule_meta(code, category)
    short = meta.summary or f"{code}: {meta.category or 'graph break'}"
    full = meta.description or short
    help_uri = meta.help_uri or PYTORCH_GRAPH_BREAKS_URI
    fix = f"Fix: {meta.fix}\n\n" if meta.fix else ""
    rule: dict = {"id": code}
    if meta.name:
        rule["name"] = meta.name
    rule.update({
        "shortDescription": {"text": short},
        "fullDescription": {"text": full},
        "help": {"text": f"{full}\n\n{fix}More: {help_uri}  (or run: mend rules {code})",
                 "markdown": f"{full}\n\n{fix}[Documentation]({help_uri}) · `mend rules {code}`"},
        "helpUri": help_uri,
        "properties": {"category": meta.category or category, "tags": ["torch.compile", "graph-break"]},
    })
    return rule


def render_sarif(r: Report) -> str:
    categories: dict[str, str] = {}
    for t in r.targets:
        for b in t.breaks:
            categories.setdefault(b.rule, b.category)
    for f in r.findings:
        categories.setdefault(f.rule, f.category)
    codes = sorted(categories)
    index = {code: i for i, code in enumerate(codes)}
    results: list[dict] = []

    for t in r.targets:
        for b in t.breaks:
            text = b.reason + (f"\n{b.explanation}" if b.explanation else "") + \
                "".join(f"\nHint: {h}" for h in b.hints) + f"\nTarget: {target_label(t.name, t.run_mode)}" + \
                (f" ({mode_note(b)})" if mode_note(b) else "")
            if b.file:
                loc = _location(b.file, r.root, b.line, b.col, None, b.end_col, b.source_line)
                path = rel(b.file, r.root)
            else:  # Dynamo gave no user frame: point at the target so the result still has a home
                text += "\n(Dynamo reported no user frame for this break.)"
                loc = _location(t.file, r.root, None, None, None, None, None)
                path = rel(t.file, r.root)
            result = {
                "ruleId": b.rule, "ruleIndex": index[b.rule], "level": "error", "message": {"text": text},
                "locations": [loc],
                "partialFingerprints": {FINGERPRINT_KEY: fingerprint(b.rule, path, b.function, b.source_line or b.reason)},
                "properties": {"source": "dynamic", "target": t.name, "run_mode": t.run_mode, "category": b.category,
                               "occurrences": b.occurrences, "counted": b.counted, "kind": b.kind,
                               **({"only_in_mode": b.only_in_mode} if b.only_in_mode else {}),
                               **({"phase": b.phase} if b.phase != "forward" else {}),
                               **({"gb_type": b.gb_type} if b.gb_type else {}),
                               **({"registry_id": b.registry_id} if b.registry_id else {})},
            }
            if b.stack:
                result["relatedLocations"] = [
                    {"id": i, "message": {"text": f"in {fr.function}"},
                     **_location(fr.file, r.root, fr.line, None, None, None, None)}
                    for i, fr in enumerate(b.stack)]
            results.append(result)

    for f in r.findings:
        text = f.message + (f"\nFix: {f.fix_hint}" if f.fix_hint else "")
        results.append({
            "ruleId": f.rule, "ruleIndex": index[f.rule],
            "level": "error" if f.status == CONFIRMED else "warning", "message": {"text": text},
            "locations": [_location(f.file, r.root, f.line, f.col, f.end_line, f.end_col, f.source_line)],
            "partialFingerprints": {FINGERPRINT_KEY: fingerprint(f.rule, rel(f.file, r.root), f.function, f.source_line)},
            "properties": {"source": "static", "status": f.status, "category": f.category},
        })

    notifications = [{
        "level": "error",
        "message": {"text": (f"{e.target}: " if e.target else "") + e.message},
        "locations": [_location(e.file, r.root, None, None, None, None, None)],
    } for e in r.errors]
    run: dict = {
        "tool": {"driver": {"name": "graphmend", "version": r.graphmend_version or "0",
                            "informationUri": INFORMATION_URI,
                            "rules": [_rule(code, categories[code]) for code in codes]}},
        "automationDetails": {"id": f"graphmend/{r.command}/"},
        "results": results,
        "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
        "properties": {"schema_version": r.schema_version, "torch_version": r.torch_version,
                       "python_version": r.python_version, "platform": r.platform,
                       "run_modes": r.run_modes, "nested_graph_breaks": r.nested_graph_breaks},
    }
    if r.root:
        root_uri = "file://" + quote(r.root.replace("\\", "/").rstrip("/") + "/")
        run["originalUriBaseIds"] = {ROOT_ID: {"uri": root_uri if root_uri.startswith("file:///") else
                                               "file:///" + root_uri[len("file://"):]}}
    log = {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
