"""Hostile or malformed input through the CLI, the config, the static scan and the reports:
file and folder names no import can spell, names that are not UTF-8, control characters in
source lines, config values of the wrong type, paths that point out of the project."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app

runner = CliRunner()

COMPILED_PRINT = "import torch\n\n\n@torch.compile\ndef f(x):\n    print(x)\n    return x\n"


def _mend(*args: str):
    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("name", ["train-gpt.py", "model.v2.py", "my model.py"])
def test_a_compiled_region_in_a_file_no_import_can_name_is_found(tmp_path, name):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (tmp_path / name).write_text(COMPILED_PRINT)
    (tmp_path / "train_gpt.py").write_text(COMPILED_PRINT.replace("print(x)", "x = x + 1"))  # no break
    for target in (tmp_path / name, tmp_path):
        out = _mend("check", "-f", "json", target)
        assert out.exit_code == 1, out.output
        (finding,) = json.loads(out.stdout)["findings"]
        assert (finding["rule"], Path(finding["file"]).name, finding["line"]) == ("GM201", name, 6)


def test_a_repository_config_cannot_send_the_baseline_out_of_it(tmp_path, monkeypatch):
    repo = tmp_path / "a" / "b" / "repo"
    repo.mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[tool.mend]\nbaseline = "../../x.json"\n')
    (repo / "m.py").write_text(COMPILED_PRINT)
    monkeypatch.chdir(repo)
    out = _mend("check", "--update-baseline", "m.py")
    assert out.exit_code == 2 and not (tmp_path / "x.json").exists()
    assert "[tool.mend] baseline '../../x.json' is outside the project folder" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    # a path typed on the command line is the user's choice
    (repo / "pyproject.toml").write_text("[tool.mend]\n")
    out = _mend("check", "-q", "--update-baseline", "--baseline", "../../x.json", "m.py")
    assert out.exit_code == 0, out.output
    assert "GM201" in (tmp_path / "a" / "x.json").read_text()
