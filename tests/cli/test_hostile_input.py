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


# -- what reaches the terminal ----------------------------------------------------------

OSC_TITLE = "\x1b]0;pwned\x07"  # sets the window title
OSC_LINK = "\x1b]8;;https://example.invalid\x07"  # opens a hyperlink
CLEAR = "\x1b[2J\x9b2J"  # clears the screen (7-bit and C1 CSI)
RLO = "\u202e"  # right-to-left override: shows a line's end first
HOSTILE = OSC_TITLE + OSC_LINK + CLEAR + RLO + "\u2066\x7f"  # (a \r would end the source line)


def _no_raw_controls(text: str) -> None:
    for ch in "\x1b\x07\x9b\u202e\u2066\x7f\r":
        assert ch not in text, (ch, text)


def test_control_characters_from_the_source_are_shown_never_obeyed(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.mend]\n")
    name = f"evil{OSC_TITLE}.py"
    (tmp_path / name).write_text(f"import torch\n\n\n@torch.compile\ndef f(x):\n    print('{HOSTILE}')\n    return x\n")
    monkeypatch.chdir(tmp_path)
    for fmt in ("text", "md", "html", "github"):
        out = _mend("check", "-f", fmt, name)
        assert out.exit_code == 1, out.output
        _no_raw_controls(out.stdout)
        _no_raw_controls(out.stderr)
        assert "\\x1b]0;pwned\\x07" in out.stdout  # shown as escapes, in the file name and the source line
    text = _mend("check", name).stdout
    assert "evil\\x1b]0;pwned\\x07.py:6:5" in text and "\\u202e" in text and "\\x9b2J" in text
    # the carets underline the call as shown: an escape is as wide under the line as in it
    out = _mend("analyze", "-q", name)
    lines = out.stdout.splitlines()
    shown = next(i for i, line in enumerate(lines) if "| " in line and "print(" in line)
    start = lines[shown].index("print(")
    assert lines[shown + 1].index("^") == start
    assert lines[shown + 1].rstrip().endswith("^") and len(lines[shown + 1].rstrip()) == len(lines[shown].rstrip())
    # a usage error naming a hostile path, and the colour form (rich's own ANSI codes only)
    out = _mend("check", f"missing{CLEAR}.py")
    assert out.exit_code == 2 and "missing\\x1b[2J\\x9b2J.py" in out.stderr
    _no_raw_controls(out.stderr)
    from graphmend.core.model import FileError, new_report
    from reports import render

    report = new_report("check", root=str(tmp_path))
    report.errors.append(FileError(file=str(tmp_path / name), message=HOSTILE + "\r"))
    coloured = render(report, "text", color=True)
    assert "\x1b]" not in coloured and RLO not in coloured and "\\u202e" in coloured


# -- names that are not UTF-8 --------------------------------------------------------------

@pytest.fixture
def non_utf8_project(tmp_path, monkeypatch):
    import os
    import sys

    if not sys.platform.startswith("linux"):
        pytest.fail("this test needs a Linux file system (any bytes in a name)")
    folder = os.fsencode(tmp_path) + b"/d\xff"
    os.mkdir(folder)
    with open(folder + b"/m.py", "w") as f:
        f.write(COMPILED_PRINT)
    (tmp_path / "pyproject.toml").write_text("[tool.mend]\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_sarif_names_a_non_utf8_path_by_its_percent_encoded_bytes(non_utf8_project):
    out = _mend("check", "-q", "-f", "sarif", "-o", "out.sarif", ".")
    assert out.exit_code == 1, out.output
    log = json.loads((non_utf8_project / "out.sarif").read_text(encoding="utf-8"))
    (result,) = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "d%FF/m.py"


@pytest.mark.parametrize("fmt", ["html", "md", "text", "github"])
def test_human_formats_show_a_non_utf8_path_with_its_byte_escaped(non_utf8_project, fmt):
    out = _mend("check", "-q", "-f", fmt, "-o", f"out.{fmt}", ".")
    assert out.exit_code == 1, out.output
    assert "d\\xff/m.py" in (non_utf8_project / f"out.{fmt}").read_text(encoding="utf-8")
    # and a saved JSON report re-renders (the JSON keeps the name as it is)
    assert _mend("analyze", "-q", "-f", "json", "-o", "r.json", ".").exit_code == 1
    out = _mend("report", "-f", fmt, "-o", f"again.{fmt}", "r.json")
    assert out.exit_code == 0, out.output
    assert "d\\xff/m.py" in (non_utf8_project / f"again.{fmt}").read_text(encoding="utf-8")


def test_update_baseline_keeps_a_non_utf8_path_and_reads_it_back(non_utf8_project):
    out = _mend("check", "-q", "--update-baseline", ".")
    assert out.exit_code == 0, out.output
    data = json.loads((non_utf8_project / ".mend-baseline.json").read_text(encoding="utf-8"))
    assert {e["file"] for e in data["entries"]} == {"d\udcff/m.py"}
    out = _mend("check", "-q", "-f", "json", ".")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["check"]["known"] == 1


# -- files this Python cannot parse -------------------------------------------------------

def _errors(tmp_path, name: str, text: str) -> list[str]:
    (tmp_path / name).write_text(text)
    out = _mend("check", "-q", "-f", "json", "-b", tmp_path / "none.json", tmp_path / name)
    return [e["message"] for e in json.loads(out.stdout)["errors"]]


def test_a_nul_byte_is_named_with_its_place(tmp_path):
    assert _errors(tmp_path, "nul.py", 'x = 1\ny = "a\0b"\n') == ["contains a NUL byte (line 2, column 7); file skipped"]


@pytest.mark.parametrize("text,line", [("type Vector = list[float]\n", 1),
                                       ("def first[T](xs: list[T]) -> T:\n    return xs[0]\n", 1),
                                       ("class Box[T]:\n    pass\n", 1),
                                       ("x = 1\nname = f'{'-'.join(['a', 'b'])}'\n", 2),
                                       ('lines = f"{"\\n".join(["a"])}"\n', 1)])
def test_syntax_of_a_newer_python_is_named_as_such(tmp_path, text, line):
    import sys

    errors = _errors(tmp_path, "new.py", text)
    if sys.version_info >= (3, 12):
        assert errors == []  # this Python reads it
    else:
        (message,) = errors
        assert message.startswith(f"uses syntax newer than this Python ({sys.version_info.major}."
                                  f"{sys.version_info.minor}) at line {line}: ")
        assert "Python 3.12" in message and message.endswith("; file skipped")


@pytest.mark.parametrize("text", ["def f(:\n    pass\n", "f() = 1\n", "x = f'{'\n", "f(x for x in y, 1)\n"])
def test_a_plain_syntax_error_is_not_called_newer_syntax(tmp_path, text):
    (message,) = _errors(tmp_path, "bad.py", text)
    assert message.startswith("syntax error at line 1: ") and "newer" not in message
