"""The README's two real patches are what the planner writes today: each ``diff`` block's
added and removed lines, planned from the installed library's own file at the line Dynamo
breaks on (torchaudio's Conformer, transformers' Flaubert). The planner alone: no torch
runs here; verification of these sites is what ``mend fix`` does (the README names the command)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from rewrites.fixes import fix_source

ROOT = Path(__file__).resolve().parents[1]


def _blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("#### Two patches as mend writes them", 1)[1].split("\n### ", 1)[0]
    return re.findall(r"```diff\n(.*?)```", section, re.S)


def _file(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        pytest.skip(f"{module} is not installed")
    return Path(spec.origin)


@pytest.mark.parametrize("index, module, line, name", [
    (0, "torchaudio.models.conformer", 11, "conformer"),
    (1, "transformers.models.flaubert.modeling_flaubert", 825, "modeling_flaubert"),
])
def test_readme_patch_is_what_the_planner_writes(index, module, line, name):
    block = _blocks()[index]
    source = _file(module).read_text(encoding="utf-8")
    r = fix_source(source, lines={line}, module=name)
    assert r.changed, r.refused
    before, after = source.splitlines(), r.new_source.splitlines()
    for diff_line in block.splitlines():
        # (counted: a file may hold the line elsewhere too, Flaubert's assert in two classes)
        text = diff_line[1:]
        if diff_line.startswith("+"):
            assert after.count(text) > before.count(text), f"the README shows a line the planner does not write: {text}"
        elif diff_line.startswith("-"):
            assert before.count(text) > after.count(text), f"the README removes a line the planner keeps: {text}"
