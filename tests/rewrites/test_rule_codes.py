"""Gates: a rule code or prefix that selects no rule (``GM1O1``, letter O) is a usage
error naming the code and where it came from, in every flag, in ``[tool.mend]`` and in
``# mend: ignore[...]`` comments: a typo must not quietly turn a gate off."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app
from graphmend.core.config import Config, ConfigError
from rewrites.rules import check_codes, is_rule_code
from rewrites.scan import parse_suppressions, scan_paths

MODEL = '''import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x):
        print(x)
        return torch.relu(x)
'''


def mend(cwd: Path, monkeypatch, *args: str):
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n\n[tool.mend]\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    return tmp_path


@pytest.mark.parametrize("code", ["GM", "GM1", "GM10", "GM101", "gm2", "GM9", "GM900"])
def test_codes_and_prefixes_that_select_a_rule(code):
    assert is_rule_code(code)
    check_codes([code], "--select")


@pytest.mark.parametrize("code", ["GM1O1", "GM999", "GM8", "XYZ", "GM101X", ""])
def test_codes_that_select_nothing(code):
    assert not is_rule_code(code)
    with pytest.raises(ConfigError, match=r"^--ignore: unknown rule code or prefix"):
        check_codes(["GM1", code], "--ignore")


def test_letter_for_digit_typo_gets_a_suggestion():
    with pytest.raises(ConfigError, match=r"'GM1O1' \(did you mean GM101\?\)"):
        check_codes(["GM1O1"], "--select")


def test_check_select_typo_is_a_usage_error_not_a_clean_gate(project, monkeypatch):
    clean = mend(project, monkeypatch, "check", "--select", "GM201")
    assert clean.exit_code == 1  # the print is a new break: the gate works with the right code
    r = mend(project, monkeypatch, "check", "--select", "GM2O1")
    assert r.exit_code == 2
    assert "--select: unknown rule code or prefix 'GM2O1'" in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [
    ("check", "--ignore", "GM2,GM1O1"),
    ("analyze", "--static-only", "pkg", "--select", "GM1O1"),
    ("analyze", "--static-only", "pkg", "--ignore", "GM1O1"),
])
def test_every_select_and_ignore_flag_is_checked(project, monkeypatch, argv):
    r = mend(project, monkeypatch, *argv)
    assert r.exit_code == 2, r.output
    flag = argv[argv.index("--select") if "--select" in argv else argv.index("--ignore")]
    assert f"{flag}: unknown rule code or prefix 'GM1O1'" in r.output


def test_fix_rule_takes_the_same_check(project, monkeypatch):
    # GM999 has the shape of a code but no rule: the old shape check let it through
    r = mend(project, monkeypatch, "fix", "pkg", "--rule", "GM999")
    assert r.exit_code == 2
    assert "--rule: unknown rule code or prefix 'GM999'" in r.output


@pytest.mark.parametrize("key", ["select", "ignore"])
@pytest.mark.parametrize("argv", [("check",), ("analyze", "--static-only", "pkg"), ("fix", "pkg"),
                                  ("bench", "pkg")])
def test_pyproject_codes_are_checked_naming_file_and_key(project, monkeypatch, key, argv):
    (project / "pyproject.toml").write_text(f'[tool.mend]\n{key} = ["GM2", "GM1O1"]\n')
    r = mend(project, monkeypatch, *argv)
    assert r.exit_code == 2, r.output
    assert f"pyproject.toml: [tool.mend] {key}: unknown rule code or prefix 'GM1O1'" in r.output


def test_suppression_comment_typo_names_file_and_line(project, monkeypatch):
    (project / "pkg" / "model.py").write_text(MODEL.replace("print(x)", "print(x)  # mend: ignore[GM2O1]"))
    for argv in (("check",), ("analyze", "--static-only", "pkg")):
        r = mend(project, monkeypatch, *argv)
        assert r.exit_code == 2, (argv, r.output)
        assert f"{Path('pkg', 'model.py')}:7: # mend: ignore[...]: unknown rule code or prefix 'GM2O1'" in r.output


def test_unclosed_suppression_does_not_silence_every_rule(tmp_path):
    # "ignore[GM201" used to read as a bare "ignore": every rule silenced on the line
    p = tmp_path / "m.py"
    p.write_text("import torch\n\n@torch.compile\ndef f(x):\n    print(x.item())  # mend: ignore[GM201\n")
    with pytest.raises(ConfigError, match=r"m\.py:5: unclosed '\['"):
        scan_paths([str(p)], Config())


def test_good_suppressions_still_work_and_docstrings_are_not_comments(tmp_path):
    p = tmp_path / "m.py"
    p.write_text('"""Write # mend: ignore[GM-XYZ] to ..."""\nimport torch\n\n@torch.compile\ndef f(x):\n'
                 '    print(x.item())  # mend: ignore[gm2, GM3]\n    s = "# mend: ignore[nope]"\n'
                 '    print(x)\n    return s\n')
    found = scan_paths([str(p)], Config())
    assert [(f.rule, f.line) for f in found.findings] == [("GM201", 8)]
    parsed = parse_suppressions(p.read_text())
    assert parsed.lines == {6: frozenset({"GM2", "GM3"})} and parsed.bad == []
