"""`mend analyze --static-only` never imports torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "static" / "regions"

WRAPPER = """
import sys, runpy, json, atexit
atexit.register(lambda: sys.stderr.write('TORCH_LOADED=%s\\n' % ('torch' in sys.modules)))
sys.argv = ['mend'] + sys.argv[1:]
from graphmend.cli.app import main
main()
"""


def test_static_only_does_not_import_torch():
    out = subprocess.run([sys.executable, "-c", WRAPPER, "analyze", str(FIXTURE), "--static-only",
                          "--format", "json", "--jobs", "2", "-q"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr  # findings -> exit 1
    assert "TORCH_LOADED=False" in out.stderr
    report = json.loads(out.stdout)
    assert report["files_scanned"] == 4
    rules = {(Path(f["file"]).name, f["rule"], f["function"]) for f in report["findings"]}
    assert ("helpers.py", "GM101", "clamp_if_large") in rules
    assert all(f["status"] == "potential" and f["col"] >= 0 for f in report["findings"])
