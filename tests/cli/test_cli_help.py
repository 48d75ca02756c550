"""``mend <command> --help`` as a user sees it: click's placeholders (``PATHS...``,
``FLOAT``, ``[text|json]``), no typer type labels or raw escapes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from graphmend.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = sorted(typer.main.get_command(app).commands)


def _help(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "graphmend", *args, "--help"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_every_command_is_covered():
    assert {"analyze", "fix", "bench", "check", "run", "rules", "report", "corpus"} <= set(COMMANDS)


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_shows_no_raw_placeholders_or_escapes(command):
    text = _help(*([command] if command else []))
    assert "Usage:" in text
    for raw in ("<list[", "<int", "<float", "<str>", "<path>", "\\[", "\\\\["):
        assert raw not in text, (command, raw)
    assert not re.search(r"\{\w+\}", text), command  # typer's {paths} for a required argument
    assert not re.search(r"<[a-z]+(\|[a-z-]+)+>", text), command  # <text|json> choices


def test_arguments_and_options_read_like_click():
    analyze = _help("analyze")
    assert "analyze [OPTIONS] PATHS..." in analyze
    assert re.search(r"^  PATHS\.\.\.\s+Files or folders", analyze, re.M)
    assert "--timeout FLOAT" in analyze and "--select TEXT" in analyze and "-j, --jobs INTEGER" in analyze
    assert "-f, --format [text|json|md|html|sarif|github]" in analyze
    assert "[tool.mend] timeout" in analyze  # brackets in help text are kept
    check = _help("check")
    assert "check [OPTIONS] [FILES]..." in check and "or [tool.mend] baseline" in " ".join(check.split())
    assert "rules [OPTIONS] [CODE]" in _help("rules")
