"""SARIF 2.1.0 for code scanning: one result per issue (a static finding and the dynamic
breaks at its place merged, ``Report.issues``), errors where a target hit it.

Locations under ``Report.root`` (the repository root) are relative URIs against the
``PROJECTROOT`` base id, so the log is the same on every checkout. ``partialFingerprints``
hash the rule, the relative path, the enclosing function, the whitespace-normalised source
line and, for the second and later identical lines, their occurrence index (never the line
number), so code scanning keeps tracking a break when code above it moves. ``ruleId`` is
the GM code; Dynamo's registry ids (GB0170) sit beside it in the rule's and the result's
``properties``. GitHub shows at most 5,000 results of a run and takes files up to 10 MB:
past either limit the most important results are kept (errors first) and the run's
``toolExecutionNotifications`` say what was left out (``sarif_with_notes`` returns the same
sentence for the command to print).
"""

from __future__ import annotations

import hashlib
from typing import Optional
from urllib.parse import quote

from graphmend import PROJECT_URL
from graphmend.core.model import CONFIRMED, DYNAMIC, VERIFIED, Report
from graphmend.core.serial import json_text
from reports.wording import is_under, issue_parts, rel, skipped_sentence
from rewrites.rules import get_rule
from rewrites.rules.base import GRAPH_BREAKS_INDEX

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = PROJECT_URL
ROOT_ID = "PROJECTROOT"
FINGERPRINT_KEY = "graphmend/v1"
# GitHub code scanning: results shown per run, and the largest SARIF upload it accepts.
MAX_RESULTS = 5000
MAX_BYTES = 10 * 1024 * 1024
_LEVEL_RANK = {"error": 0, "warning": 1, "note": 2, "none": 3}


def fingerprint(rule: str, path: str, function: Optional[str], source: Optional[str], occurrence: int = 0) -> str:
    """Stable across unrelated edits: no line number. ``occurrence`` tells identical lines of
    one function apart (0 for the first, which hashes as it always did)."""
    normalised = " ".join((source or "").split())
    key = "\0".join((rule, path, function or "", normalised)) + (f"\0{occurrence}" if occurrence else "")
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _uri(path: str) -> str:
    """A path percent-encoded as a URI: a name that is not UTF-8 by its own bytes (%FF)."""
    return quote(path.encode("utf-8", "surrogateescape"))


def _artifact(path: str, root: str) -> dict:
    if is_under(path, root):
        return {"uri": _uri(rel(path, root)), "uriBaseId": ROOT_ID}
    return {"uri": "file://" + _uri(path if path.startswith("/") else "/" + path.replace("\\", "/"))}


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


def _region(line: int, col: int, end_line: int, end_col: int) -> dict:
    return {"startLine": line, "startColumn": col + 1, "endLine": end_line, "endColumn": end_col + 1}


def _fix(f, root: str) -> dict:
    """A verified fix record as SARIF's ``fix``: its edits (``Fix.replacements``, made by the
    fix stage) on the file, each a deleted region and the text inserted there."""
    return {"description": {"text": f"mend fix ({f.status}): {f.reason}"},
            "artifactChanges": [{"artifactLocation": _artifact(f.file, root),
                                 "replacements": [{"deletedRegion": _region(x.line, x.col, x.end_line, x.end_col),
                                                   "insertedContent": {"text": x.text}}
                                                  for x in f.replacements]}]}


def _fix_properties(f) -> dict:
    return {"rule": f.rule, "status": f.status, "line": f.line,
            **({"end_line": f.end_line} if f.end_line is not None else {}),
            **({"checks": f.checks} if f.checks else {}),
            **({"skipped_checks": f.skipped_checks} if f.skipped_checks else {}),
            **({"partial": f.partial} if f.partial else {})}


def _rule(code: str, category: str) -> dict:
    r = get_rule(code)  # None for a code this mend does not know (a report another version wrote)
    short = r.summary if r else f"{code}: {category or 'graph break'}"
    full = r.description if r else short
    help_uri = r.help_uri if r else GRAPH_BREAKS_INDEX
    fix = f"Fix: {r.fix}\n\n" if r else ""
    doc = r.doc_uri if r and r.doc_uri != help_uri else ""
    rule: dict = {"id": code}
    if r:
        rule["name"] = r.name
    rule.update({
        "shortDescription": {"text": short},
        "fullDescription": {"text": full},
        "help": {"text": f"{full}\n\n{fix}More: {help_uri}" + (f"\nRule: {doc}" if doc else "")
                 + f"  (or run: mend rules {code})",
                 "markdown": f"{full}\n\n{fix}[Documentation]({help_uri})" + (f" · [Rule]({doc})" if doc else "")
                 + f" · `mend rules {code}`"},
        "helpUri": help_uri,
        "properties": {"category": r.category if r else category, "tags": ["torch.compile", "graph-break"],
                       **({"gb_ids": list(r.gb_ids)} if r and r.gb_ids else {})},
    })
    return rule


def _fingerprint_all(keyed: list[tuple[dict, tuple, Optional[int]]]) -> None:
    """Set each result's fingerprint; identical (rule, path, function, text) at different lines
    get occurrence indexes in line order, and one line keeps one index, so a static finding and
    the dynamic break at its site stay one alert."""
    lines: dict[tuple, list] = {}
    for _, key, line in keyed:
        seen = lines.setdefault(key, [])
        if line not in seen:
            seen.append(line)
    for key, seen in lines.items():
        seen.sort(key=lambda ln: (ln is None, ln or 0))
    for result, key, line in keyed:
        result["partialFingerprints"] = {FINGERPRINT_KEY: fingerprint(*key, occurrence=lines[key].index(line))}


def _size(doc: dict) -> int:
    return len(_dump(doc).encode("utf-8"))


def _dump(doc: dict) -> str:
    return json_text(doc) + "\n"


def _within_limits(log: dict, results: list[dict]) -> tuple[list[dict], Optional[str]]:
    """The results GitHub keeps and shows: at most MAX_RESULTS, the whole log within MAX_BYTES;
    past that the errors first, then warnings, each in report order. Returns them in report
    order, and a sentence saying what was left out (None when nothing was)."""
    order = sorted(range(len(results)), key=lambda i: (_LEVEL_RANK.get(results[i].get("level", "warning"), 1), i))
    keep = order[:MAX_RESULTS]
    why = f"GitHub code scanning shows at most {MAX_RESULTS:,} results per run" if len(keep) < len(results) else ""
    run = log["runs"][0]

    def fits(n: int) -> bool:
        run["results"] = [results[i] for i in sorted(keep[:n])]
        return _size(log) <= MAX_BYTES - 1024  # room for the notification

    if not fits(len(keep)):
        lo, hi = 0, len(keep)  # the largest n that fits: fits(lo) holds, fits(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        keep = keep[:lo]
        why = f"GitHub code scanning accepts SARIF files up to {MAX_BYTES / (1024 * 1024):g} MB"
    run["results"] = []
    if len(keep) == len(results):
        return results, None
    dropped = len(results) - len(keep)
    errors_kept = sum(1 for i in keep if results[i].get("level") == "error")
    return [results[i] for i in sorted(keep)], (
        f"{dropped:,} of {len(results):,} results left out of the SARIF log: {why}; "
        f"kept {len(keep):,}, errors first ({errors_kept:,} errors). The JSON report (--format json) has them all.")


def render_sarif(r: Report) -> str:
    return sarif_with_notes(r)[0]


def sarif_with_notes(r: Report) -> tuple[str, list[str]]:
    """The SARIF log, and what it had to leave out to stay within GitHub's limits (for stderr)."""
    categories: dict[str, str] = {}
    for i in r.issues:
        categories.setdefault(i.rule, i.category)
    codes = sorted(categories)
    index = {code: n for n, code in enumerate(codes)}
    results: list[dict] = []
    keyed: list[tuple[dict, tuple, Optional[int]]] = []  # (result, fingerprint key, line)

    for i in r.issues:
        text = "\n".join(issue_parts(i, r.root, r.issues, fixes=r.fixes))
        fixes = [r.fixes[k] for k in i.fixes if k < len(r.fixes)]
        if i.file:
            loc = _location(i.file, r.root, i.line, i.col, i.end_line, i.end_col, i.source_line)
            path = rel(i.file, r.root)
        else:  # Dynamo gave no user frame: point at the target so the result still has a home
            text += "\n(Dynamo reported no user frame for this break.)"
            first = (i.breaks or i.lowering or [[len(r.targets)]])[0][0]
            home = r.targets[first].file if first < len(r.targets) else ""
            loc = _location(home, r.root, None, None, None, None, None)
            path = rel(home, r.root)
        source = ("static+dynamic" if i.findings and i.breaks else
                  "dynamic" if i.breaks or i.lowering or i.recompiles else "static")
        result = {
            "ruleId": i.rule, "ruleIndex": index[i.rule],
            "level": "error" if i.status in (CONFIRMED, DYNAMIC) else "warning", "message": {"text": text},
            "locations": [loc],
            "partialFingerprints": {},  # filled by _fingerprint_all, which sees every result
            "properties": {"source": source, "status": i.status, "category": i.category,
                           **({"targets": i.targets, "fan_out": i.fan_out, "counted": i.counted} if i.breaks else {}),
                           **({"targets": i.targets, "op": i.op} if i.lowering else {}),
                           **({"also": i.also} if i.also else {}),
                           **({"fix": i.fix} if i.fix else {}),
                           **({"only_in_mode": i.only_in_mode} if i.only_in_mode else {}),
                           **({"phase": i.phase} if i.phase != "forward" else {}),
                           **({"gb_type": i.said.gb_type} if i.said.gb_type else {}),
                           **({"registry_id": i.said.registry_id} if i.said.registry_id else {}),
                           **({"fixes": [_fix_properties(f) for f in fixes]} if fixes else {})},
        }
        # only a verified fix is offered for applying: a SARIF viewer's one-click fix knows no
        # "partially verified", and would bypass the --accept-partial gate
        offered = [_fix(f, r.root) for f in fixes if f.status == VERIFIED and f.replacements]
        if offered:
            result["fixes"] = offered
        related = [{"message": {"text": f"in {fr.function}"},
                    **_location(fr.file, r.root, fr.line, None, None, None, None)} for fr in i.said.stack]
        related += [{"message": {"text": skipped_sentence(f, r.root)},
                     **_location(f.file, r.root, f.loop_line or f.line, None, None, None, None)} for f in i.skipped]
        if i.hidden_by is not None and i.hidden_by < len(r.issues) and r.issues[i.hidden_by].file:
            cause = r.issues[i.hidden_by]
            related.append({"message": {"text": f"the break whose frame skip kept Dynamo from this line ({cause.rule})"},
                            **_location(cause.file, r.root, cause.line, cause.col, None, None, None)})
        if related:
            result["relatedLocations"] = [{"id": n, **x} for n, x in enumerate(related)]
        results.append(result)
        keyed.append((result, (i.rule, path, i.function, i.source_line or i.said.reason), i.line if i.file else None))
    _fingerprint_all(keyed)

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
        "results": [],
        "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
        "properties": {"schema_version": r.schema_version, "torch_version": r.torch_version,
                       "python_version": r.python_version, "platform": r.platform,
                       "run_modes": r.run_modes, "nested_graph_breaks": r.nested_graph_breaks},
    }
    if r.root:
        root_uri = "file://" + _uri(r.root.replace("\\", "/").rstrip("/") + "/")
        run["originalUriBaseIds"] = {ROOT_ID: {"uri": root_uri if root_uri.startswith("file:///") else
                                               "file:///" + root_uri[len("file://"):]}}
    log = {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    run["results"], dropped = _within_limits(log, results)
    if dropped is None:
        return _dump(log), []
    notifications.append({"level": "warning", "message": {"text": dropped},
                          "descriptor": {"id": "graphmend/results-truncated"}})
    return _dump(log), [dropped]
