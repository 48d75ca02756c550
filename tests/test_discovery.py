
from graphmend.config import Config
from graphmend.discovery import discover, parse_target_ref


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
