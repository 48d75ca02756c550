"""``mend analyze`` and ``mend fix`` take targets as ``FILE::FUNCTION``, the way ``mend
bench`` takes them and the listings name them: only the named targets run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app

MODELS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "dynamic" / "models" / "small.py"


@pytest.mark.parametrize("args, says", [
    ([f"{MODELS}::mend_target_item", str(MODELS)], "name its targets as FILE::FUNCTION too"),
    ([f"{MODELS}::not a name"], "a target is named FILE::FUNCTION"),
    ([f"{MODELS.with_name('absent.py')}::mend_target_item"], "path does not exist: "),
])
@pytest.mark.parametrize("command", ["analyze", "fix"])
def test_a_bad_target_path_is_one_line_naming_it(command, args, says):
    result = CliRunner().invoke(app, [command, *args])
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_analyze_runs_only_the_named_targets():
    pytest.importorskip("torch")
    result = CliRunner().invoke(app, ["analyze", "--dynamic-only", "-f", "json", f"{MODELS}::mend_target_item",
                                      f"{MODELS}::mend_target_print"])
    report = json.loads(result.stdout)
    assert sorted(t["name"].rpartition("::")[2] for t in report["targets"]) == ["mend_target_item",
                                                                                 "mend_target_print"]
    assert all(t["breaks"] for t in report["targets"])
