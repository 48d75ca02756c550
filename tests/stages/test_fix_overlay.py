"""The import overlay: patched source served for the target's module, a sibling and an
installed (stdlib) module, in a fresh process, with nothing written to disk."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from graphmend.verify.arms import ArmRecorder, instrument


def test_overlay_serves_patches_without_writing(tmp_path: Path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("def k():\n    return 1\n")
    (pkg / "main.py").write_text("from pkg.helper import k\n\ndef value():\n    return k() + 10\n")
    import colorsys

    stdlib_file = str(Path(colorsys.__file__).resolve())
    patches = {
        str(pkg / "helper.py"): "def k():\n    return 2\n",
        str(pkg / "main.py"): "from pkg.helper import k\n\ndef value():\n    return k() + 100\n",
        stdlib_file: Path(stdlib_file).read_text() + "\nMEND_PATCHED = True\n",
    }
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code = textwrap.dedent(f"""
        import json, sys, inspect
        sys.path.insert(0, {str(tmp_path)!r})
        from graphmend.core.overlay import install_overlay
        finder = install_overlay(json.loads(sys.argv[1]))
        import pkg.main, colorsys
        print(json.dumps([pkg.main.value(), getattr(colorsys, "MEND_PATCHED", False),
                          inspect.getsource(pkg.main.value).strip().splitlines()[-1].strip(),
                          sorted(finder.served)]))
    """)
    out = subprocess.run([sys.executable, "-c", code, json.dumps(patches)], capture_output=True, text=True,
                         cwd=str(Path(__file__).resolve().parents[2]), timeout=60)
    assert out.returncode == 0, out.stderr
    value, patched, src, served = json.loads(out.stdout.strip().splitlines()[-1])
    assert value == 102  # both the module and its sibling came from the overlay
    assert patched is True  # and the stdlib module
    assert src == "return k() + 100"  # inspect / linecache see the patched text
    assert served == ["colorsys", "pkg.helper", "pkg.main"]
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # no .pyc, nothing written
    assert (pkg / "main.py").read_text().endswith("k() + 10\n")


def test_arm_instrumentation_records_both_sides():
    src = "def f(x):\n    if x > 0:\n        return 1\n    return 2 if x < -5 else 3\n"
    out = instrument(src, [(2, 7, 2, 12), (4, 16, 4, 22)])
    assert "__mend_arm__('2:7', x > 0)" in out and "__mend_arm__('4:16', x < -5)" in out
    assert len(out.splitlines()) == len(src.splitlines())  # line numbers unchanged
    rec = ArmRecorder()
    ns = {"__mend_arm__": rec}
    exec(compile(out, "/tmp/instrumented.py", "exec"), ns)
    assert [ns["f"](v) for v in (1, -1, -10)] == [1, 3, 2]
    keys = ["/tmp/instrumented.py:2:7", "/tmp/instrumented.py:4:16"]
    assert rec.missing(keys) == []
    rec2 = ArmRecorder()
    ns["__mend_arm__"] = rec2
    ns["f"](1)
    assert rec2.missing(keys, reached_only=True) == ["/tmp/instrumented.py:2:7 never skipped"]
