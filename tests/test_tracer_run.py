"""``mend run SCRIPT ARGS``: the program runs as python would run it; breaks are reported."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = '''
import sys, torch
print("argv", sys.argv[1:], __name__)
def step(x):
    y = x * 2
    if y.sum() > 0:
        y = y + 1
    return y
f = torch.compile(step, backend="eager")
f(torch.ones(4))
sys.stderr.write("own-stderr\\n")
sys.exit(int(sys.argv[1]))
'''


def test_mend_run(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "graphmend", "run", "--format", "json", "--output", str(out),
                           str(script), "3", "--format", "x"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "argv ['3', '--format', 'x'] __main__" in proc.stdout
    assert "own-stderr" in proc.stderr
    data = json.loads(out.read_text())
    assert data["command"] == "run"
    (t,) = data["targets"]
    assert t["name"].startswith("step (") and t["graph_count"] >= 1
    (b,) = t["breaks"]
    assert (b["rule"], b["line"], b["function"]) == ("GM101", 6, "step")
    assert [f["function"] for f in b["stack"]] == ["<module>", "step"]
    assert b["compiled_function"] == t["name"]


def test_mend_run_missing_script(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "graphmend", "run", str(tmp_path / "nope.py")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "script does not exist" in proc.stderr and "Traceback" not in proc.stderr
