from graphmend.core.model import (SCHEMA_VERSION, Break, FileError, Finding, Frame, Recompile, Report, Said, TargetResult,
                             new_report)
import json
import pytest


def _report():
    r = new_report("analyze", root="/r", torch_version="2.13.0")
    b = Break(rule="GM101", category="control-flow", reason="Data-dependent branching", explanation="e", hints=["h"],
              gb_type="Data-dependent branching", registry_id="GB0170", file="/r/m.py", line=3, col=4,
              source_line="if x:", function="f", occurrences=2, stack=[Frame("/r/m.py", 3, "f")], counted=False,
              kind="frame_skipped", compiled_function="f (/r/m.py)")
    r.targets.append(TargetResult(name="m.py::t", file="/r/m.py", function="t", graph_count=2, graph_break_count=1,
                                  ops_per_graph=[3, 1], recompiles=[Recompile("f", "rank", "/r/m.py", 1)], breaks=[b]))
    r.findings.append(Finding(rule="GM201", file="/r/m.py", line=5, col=0, message="print"))
    r.errors.append(FileError(file="/r/x.py", message="syntax error"))
    return r


def test_round_trip():
    r = _report()
    assert Report.from_json(r.to_json()) == r
    assert isinstance(Report.from_json(r.to_json()).targets[0].breaks[0].stack[0], Frame)


def test_schema_version_checked():
    d = _report().to_dict()
    d["schema_version"] = "99.0"
    with pytest.raises(ValueError, match="schema_version"):
        Report.from_dict(d)
    d["schema_version"] = SCHEMA_VERSION
    d["future_key"] = 1  # newer minor versions may add keys
    assert Report.from_dict(d).root == "/r"


def test_a_1x_report_is_read_with_each_issue_said_whole():
    # 1.x kept an issue's evidence flat on the issue; 2.0 holds it whole in `said`
    old = {"schema_version": "1.1", "issues": [
        {"rule": "GM101", "category": "control-flow", "status": "dynamic", "message": "m", "reason": "Data-dependent",
         "explanation": "why", "hints": ["h"], "gb_type": "Data-dependent branching", "registry_id": "GB0170",
         "stack": [{"file": "/a.py", "line": 3, "function": "f"}], "library": [], "targets": ["a.py::t"]}]}
    (issue,) = Report.from_dict(old).issues
    assert issue.said == Said(reason="Data-dependent", explanation="why", hints=["h"], gb_type="Data-dependent branching",
                              registry_id="GB0170", stack=[Frame(file="/a.py", line=3, function="f")])
    read = Report.from_dict(old).to_dict()
    assert issue.targets == ["a.py::t"] and read["schema_version"] == SCHEMA_VERSION and "reason" not in read["issues"][0]


def test_required_keys():
    d = json.loads(_report().to_json())
    assert {"schema_version", "graphmend_version", "torch_version", "python_version", "platform", "targets"} <= set(d)
