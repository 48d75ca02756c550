"""SARIF 2.1.0 for code scanning: one result per issue (a static finding and the dynamic
breaks at its place merged, ``Report.issues``), errors where a target hit it.

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

from graphmend.model import CONFIRMED, DYNAMIC, Issue, Report
from reports.paths import is_under, location, mode_note, rel, skipped_sentence
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


def _message(i: Issue, r: Report) -> str:
    """One result's text: the static words, Dynamo's, the fix, what the break costs."""
    parts = [i.message]
    if i.reason and i.reason != i.message:
        parts.append(f"Dynamo: {i.reason}")
    if i.explanation:
        parts.append(i.explanation)
    parts += [f"Hint: {h}" for h in i.hints]
    if i.fix_hint:
        parts.append(f"Fix: {i.fix_hint}")
    parts += [f"This break made Dynamo skip a frame: {skipped_sentence(f, r.root)}." for f in i.skipped]
    if i.hidden_by is not None and i.hidden_by < len(r.issues):
        cause = r.issues[i.hidden_by]
        parts.append(f"Never traced: its frame ran in eager because of {cause.rule} at "
                     f"{location(cause.file, cause.line, r.root)}.")
    if i.targets:
        parts.append("Target" + ("s" if len(i.targets) > 1 else "") + ": " + ", ".join(i.targets)
                     + (f" ({mode_note(i)})" if mode_note(i) else ""))
    if i.fan_out > 1:
        parts.append(f"Fan-out: {i.fan_out} breaks from this one line.")
    return "\n".join(parts)


def render_sarif(r: Report) -> str:
    categories: dict[str, str] = {}
    for i in r.issues:
        categories.setdefault(i.rule, i.category)
    codes = sorted(categories)
    index = {code: n for n, code in enumerate(codes)}
    results: list[dict] = []

    for i in r.issues:
        text = _message(i, r)
        if i.file:
            loc = _location(i.file, r.root, i.line, i.col, i.end_line, i.end_col, i.source_line)
            path = rel(i.file, r.root)
        else:  # Dynamo gave no user frame: point at the target so the result still has a home
            text += "\n(Dynamo reported no user frame for this break.)"
            home = r.targets[i.breaks[0][0]].file if i.breaks and i.breaks[0][0] < len(r.targets) else ""
            loc = _location(home, r.root, None, None, None, None, None)
            path = rel(home, r.root)
        source = "static+dynamic" if i.findings and i.breaks else "dynamic" if i.breaks else "static"
        result = {
            "ruleId": i.rule, "ruleIndex": index[i.rule],
            "level": "error" if i.status in (CONFIRMED, DYNAMIC) else "warning", "message": {"text": text},
            "locations": [loc],
            "partialFingerprints": {FINGERPRINT_KEY: fingerprint(i.rule, path, i.function, i.source_line or i.reason)},
            "properties": {"source": source, "status": i.status, "category": i.category,
                           **({"targets": i.targets, "fan_out": i.fan_out, "counted": i.counted} if i.breaks else {}),
                           **({"also": i.also} if i.also else {}),
                           **({"fix": i.fix} if i.fix else {}),
                           **({"only_in_mode": i.only_in_mode} if i.only_in_mode else {}),
                           **({"phase": i.phase} if i.phase != "forward" else {}),
                           **({"gb_type": i.gb_type} if i.gb_type else {}),
                           **({"registry_id": i.registry_id} if i.registry_id else {})},
        }
        related = [{"message": {"text": f"in {fr.function}"},
                    **_location(fr.file, r.root, fr.line, None, None, None, None)} for fr in i.stack]
        related += [{"message": {"text": skipped_sentence(f, r.root)},
                     **_location(f.file, r.root, f.loop_line or f.line, None, None, None, None)} for f in i.skipped]
        if i.hidden_by is not None and i.hidden_by < len(r.issues) and r.issues[i.hidden_by].file:
            cause = r.issues[i.hidden_by]
            related.append({"message": {"text": f"the break whose frame skip kept Dynamo from this line ({cause.rule})"},
                            **_location(cause.file, r.root, cause.line, cause.col, None, None, None)})
        if related:
            result["relatedLocations"] = [{"id": n, **x} for n, x in enumerate(related)]
        results.append(result)

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
                       "python_version": r.python_version, "platform": r.platform},
    }
    if r.root:
        root_uri = "file://" + quote(r.root.replace("\\", "/").rstrip("/") + "/")
        run["originalUriBaseIds"] = {ROOT_ID: {"uri": root_uri if root_uri.startswith("file:///") else
                                               "file:///" + root_uri[len("file://"):]}}
    log = {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
