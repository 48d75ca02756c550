
import os
from pathlib import Path

import pytest

from graphmend.core.config import Config
from graphmend.core.discovery import discover, parse_target_ref


def test_discovery(tmp_path):
    (tmp_path / "a.py").write_text("def mend_target_x():\n    pass\n\ndef mend_target_y(n=1):\n    pass\n"
                                   "def other():\n    pass\nclass C:\n    def mend_target_m(self):\n        pass\n")
    (tmp_path / "b.py").write_text("raise SystemExit('never imported')\n")  # no target: never parsed or run
    (tmp_path / "c.py").write_text("async def mend_target_a():\n    pass\ndef mend_target_req(x, *, k):\n    pass\n")
    (tmp_path / "bad.py").write_text("def mend_target_z(:\n")
    d = discover([tmp_path], Config())
    assert [t.name for t in d.targets] == ["a.py::mend_target_x", "a.py::mend_target_y"]
    msgs = " | ".join(e.message for e in d.errors)
    assert "async" in msgs and "required argument(s) x, k" in msgs and "syntax error" in msgs
    assert len(d.files) == 4


def test_config_targets(tmp_path):
    (tmp_path / "m.py").write_text("def build():\n    pass\n")
    cfg = Config(root=tmp_path, targets=("m.py:build", "pkg.mod:fn", "nope.py:fn", "bad ref"))
    d = discover([tmp_path], cfg)
    names = [t.name for t in d.targets]
    assert names == ["m.py::build", "pkg.mod::fn"]
    assert len(d.errors) == 2
    spec, err = parse_target_ref("pkg.mod:fn", tmp_path)
    assert spec.module == "pkg.mod" and err is None


def _odd_tree(tmp_path):
    """A folder with one good target file and every kind of name that must not be read."""
    proj, outside = tmp_path / "proj", tmp_path / "outside"
    proj.mkdir()
    outside.mkdir()
    (proj / "good.py").write_text("def mend_target_good():\n    pass\n")
    (outside / "ext.py").write_text("def mend_target_ext():\n    pass\n")
    (proj / "inside.py").symlink_to(proj / "good.py")  # within the folder: the same file, once
    (proj / "link_out.py").symlink_to(outside / "ext.py")
    (proj / "dangle.py").symlink_to(proj / "nowhere.py")
    (proj / "loop_a.py").symlink_to(proj / "loop_b.py")
    (proj / "loop_b.py").symlink_to(proj / "loop_a.py")
    os.mkfifo(proj / "pipe.py")
    return proj


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symlinks")
def test_odd_files_are_per_file_errors(tmp_path):
    proj = _odd_tree(tmp_path)
    d = discover([proj], Config())  # never opens the FIFO: this would block forever
    assert [t.name for t in d.targets] == ["good.py::mend_target_good"]
    why = {Path(e.file).name: e.message for e in d.errors}
    assert why == {
        "dangle.py": f"dangling symlink (-> {proj / 'nowhere.py'}); file skipped",
        "link_out.py": f"symlink points outside the analysed folder (-> {tmp_path / 'outside' / 'ext.py'}); file skipped",
        "loop_a.py": "symlink loop; file skipped",
        "loop_b.py": "symlink loop; file skipped",
        "pipe.py": "not a regular file (a FIFO); file skipped",
    }
    assert all(Path(e.file).parent == proj for e in d.errors)  # the name as found, not its target
    # the static scan says the same, in the same words: a run reports each file once
    from rewrites.scan import scan_paths

    scan = scan_paths([proj], Config())
    assert {(e.file, e.message) for e in scan.errors} == {(e.file, e.message) for e in d.errors}


def test_deeply_nested_file_is_a_per_file_error(tmp_path):
    # 100000 terms: past every supported Python parser's limit (3.12.3 and 3.13 parse 4000)
    (tmp_path / "deep.py").write_text("x = " + " + ".join(["1"] * 100000) + "\n\ndef mend_target_deep():\n    pass\n")
    (tmp_path / "ok.py").write_text("def mend_target_ok():\n    pass\n")
    d = discover([tmp_path], Config())
    assert [t.name for t in d.targets] == ["ok.py::mend_target_ok"]
    assert [(Path(e.file).name, e.message) for e in d.errors] == [
        ("deep.py", "expression nested too deeply to parse (RecursionError); file skipped")]
    from rewrites.scan import scan_paths

    assert [(e.file, e.message) for e in scan_paths([tmp_path], Config()).errors] == \
        [(e.file, e.message) for e in d.errors]


def test_errors_name_the_file_once_whatever_the_path_form(tmp_path, monkeypatch):
    (tmp_path / "bad.py").write_text("def mend_target_z(:\n")
    monkeypatch.chdir(tmp_path.parent)
    from rewrites.scan import scan_paths

    rel = tmp_path.name
    assert [e.file for e in discover([rel], Config()).errors] == [e.file for e in scan_paths([rel], Config()).errors] \
        == [str(tmp_path / "bad.py")]
