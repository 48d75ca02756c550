"""`mend rules` and `mend rules CODE`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graphmend.cli.app import app
from rewrites.rules import RULES

runner = CliRunner()


def test_rules_table_lists_every_code():
    out = runner.invoke(app, ["rules"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    for r in RULES:
        assert r.code in out.stdout


def test_rules_json():
    out = runner.invoke(app, ["rules", "--format", "json"])
    assert out.exit_code == 0
    data = json.loads(out.stdout)
    assert [d["code"] for d in data] == [r.code for r in RULES]
    assert all(d["links"] for d in data)


def test_one_rule_doc():
    out = runner.invoke(app, ["rules", "GM101", "--format", "md"])
    assert out.exit_code == 0
    assert "# GM101 tensor-condition-if" in out.stdout
    assert "Why Dynamo breaks here" in out.stdout and "gb0170" in out.stdout
    out = runner.invoke(app, ["rules", "gm301", "--format", "json"])
    assert json.loads(out.stdout)["name"] == "item-call"
    out = runner.invoke(app, ["rules", "GM301"], env={"COLUMNS": "120"})
    assert out.exit_code == 0 and "item-call" in out.stdout


def test_unknown_code_exit_2():
    out = runner.invoke(app, ["rules", "GM999"])
    assert out.exit_code == 2
    assert "unknown rule code 'GM999'" in out.output
    assert len(out.output.strip().splitlines()) == 1
