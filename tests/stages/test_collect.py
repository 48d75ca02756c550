"""graphmend.collect: the one scan + discover + capture that analyze, fix and check start from.

None of these runs a target: discovery is by parsing, and the targets asked for are none, so
nothing is captured (the capture itself is the tracer's, tested there and end to end).
"""

from __future__ import annotations

import sys

from graphmend.collect import CollectOptions, collect
from graphmend.core.config import Config


def _tree(tmp_path):
    (tmp_path / "model.py").write_text("def mend_target_a():\n    pass\n\ndef mend_target_b():\n    pass\n"
                                       "def forward(t):\n    print(t)\n", encoding="utf-8")
    (tmp_path / "broken.py").write_text("def f(:\n", encoding="utf-8")
    (tmp_path / "needs_args.py").write_text("def mend_target_x(n):\n    pass\n", encoding="utf-8")
    return tmp_path


def test_a_file_error_is_said_once_and_a_targets_own_error_kept(tmp_path):
    root = _tree(tmp_path)
    got = collect([root], Config(all_functions=True), CollectOptions(only=("nothing_here",)))
    syntax = [e for e in got.errors if e.file.endswith("broken.py")]
    assert len(syntax) == 1 and "syntax error" in syntax[0].message  # the scan's; discovery's left out
    (own,) = [e for e in got.errors if e.target]
    assert "needs_args.py" in own.file and "required argument(s) n" in own.message
    assert got.errors.index(syntax[0]) < got.errors.index(own)  # the scan's errors first
    assert [f.rule for f in got.findings] == ["GM201"]
    assert got.discovered and got.files_scanned == 3 and len(got.files) == 3
    assert got.specs == [] and got.targets == [] and got.nested_graph_breaks is None


def test_only_keeps_the_named_functions(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    captured = []

    def capture_targets(specs, **kwargs):  # stands in for the worker, which would import torch
        captured.append(([s.function for s in specs], kwargs))
        return []

    import tracer.capture

    monkeypatch.setattr(tracer.capture, "capture_targets", capture_targets)
    config = Config(modes=("train",), compiled_autograd=True, timeout=7.0)
    got = collect([root], config, CollectOptions(static=False, only=("mend_target_b",), jobs=3))
    assert [s.function for s in got.specs] == ["mend_target_b"]
    ((functions, kwargs),) = captured
    assert functions == ["mend_target_b"]
    # the capture runs as the config says
    assert (kwargs["modes"], kwargs["compiled_autograd"], kwargs["timeout"], kwargs["jobs"]) == (("train",), True, 7.0, 3)
    assert got.findings == [] and got.files_scanned == 3  # no scan: discovery's count


def test_a_static_collect_loads_no_tracer(tmp_path):
    import subprocess

    code = ("import sys\nfrom graphmend.collect import CollectOptions, collect\nfrom graphmend.core.config import Config\n"
            f"got = collect([{str(_tree(tmp_path))!r}], Config(all_functions=True), CollectOptions(dynamic=False))\n"
            "assert not got.discovered and len(got.findings) == 1, got\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tracer', 'torch', 'libcst')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
