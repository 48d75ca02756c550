"""Files in all their forms, suppressions, select/ignore/exclude, parallel scanning."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphmend.core.config import Config, load_config
from rewrites.scan import scan_paths, suppressions

BODY = "import torch\n\n@torch.compile\ndef f(x: torch.Tensor):\n    print(x)\n    return x.item()\n"


def _scan(paths, **cfg):
    return scan_paths([str(p) for p in paths], Config(**cfg))


def test_suppressions(tmp_path):
    p = tmp_path / "s.py"
    p.write_text("import torch\n\n@torch.compile\ndef f(x: torch.Tensor):\n"
                 "    print(x)  # mend: ignore[GM201]\n"
                 "    print(x.item())  # mend: ignore[GM201,GM301]\n"
                 "    print(x.tolist())  # mend: ignore\n"
                 "    print(  # mend: ignore[GM2]\n        x.sum(),\n    )\n"
                 "    return x.item()  # mend: ignore[GM201]\n")
    found = _scan([p])
    assert [(f.rule, f.line) for f in found.findings] == [("GM301", 11)]
    assert suppressions("a = 1  #mend:ignore[gm101, GM2]\n") == {1: frozenset({"GM101", "GM2"})}


def test_select_ignore_and_pyproject(tmp_path):
    p = tmp_path / "pkg" / "m.py"
    p.parent.mkdir()
    p.write_text(BODY)
    assert {f.rule for f in _scan([p]).findings} == {"GM201", "GM301"}
    assert {f.rule for f in _scan([p], select=("GM3",)).findings} == {"GM301"}
    assert {f.rule for f in _scan([p], ignore=("GM201",)).findings} == {"GM301"}
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nignore = ["GM3"]\nexclude = ["skip_*.py"]\n')
    (p.parent / "skip_me.py").write_text(BODY)
    cfg = load_config([tmp_path])
    found = scan_paths([str(tmp_path)], cfg)
    assert found.files_scanned == 1
    assert {f.rule for f in found.findings} == {"GM201"}


def test_broken_and_odd_files(tmp_path):
    (tmp_path / "bad.py").write_text("def f(:\n    pass\n")
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + BODY.encode())
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\n" + BODY.replace("print(x)", "print('\xe9', x)").encode("latin-1"))
    (tmp_path / "undecodable.py").write_bytes(b"x = '\xff\xfe'\n")
    (tmp_path / "long.py").write_text("import torch\n\n@torch.compile\ndef f(x):\n    y = [" + "1, " * 20000 + "]\n    print(y)\n")
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    found = _scan([tmp_path])
    assert found.files_scanned == 7
    errors = {Path(e.file).name: e.message for e in found.errors}
    assert set(errors) == {"bad.py", "undecodable.py", "nul.py"}
    assert "syntax error at line 1" in errors["bad.py"] and "skipped" in errors["bad.py"]
    by_file = {}
    for f in found.findings:
        by_file.setdefault(Path(f.file).name, set()).add(f.rule)
    assert by_file == {"bom.py": {"GM201", "GM301"}, "latin.py": {"GM201", "GM301"}, "long.py": {"GM201"}}
    latin = next(f for f in found.findings if f.file.endswith("latin.py") and f.rule == "GM201")
    assert "é" in latin.source_line


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    root = tmp_path_factory.mktemp("many")
    for i in range(40):
        (root / f"m{i:02d}.py").write_text(BODY if i % 3 else "def g():\n    return 1\n")
    (root / "broken.py").write_text("class :\n")
    return root


def test_jobs_same_result(many):
    one = scan_paths([str(many)], Config(), jobs=1)
    two = scan_paths([str(many)], Config(), jobs=2)
    assert one.findings == two.findings and one.errors == two.errors
    assert one.files_scanned == two.files_scanned == 41
    assert len(one.findings) == 2 * 26 and len(one.errors) == 1
