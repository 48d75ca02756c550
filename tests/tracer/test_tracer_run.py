"""``mend run SCRIPT ARGS``: the program runs as python would run it; breaks are reported."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

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
                           str(script), "3", "--format", "x"], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env=_env())
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


FORKS = '''
import os, sys, torch
def step(x):
    if x.sum() > 0:
        x = x + 1
    return x
torch.compile(step, backend="eager")(torch.ones(4))
pid = os.fork()
if pid == 0:
    print("the child ends its part of the program")  # and falls off the end, as the parent does
else:
    os.waitpid(pid, 0)
'''


def _env() -> dict:
    """This checkout's mend, whatever the folder the command runs in."""
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_mend_run_reports_once_when_the_program_forks(tmp_path):
    script = tmp_path / "forks.py"
    script.write_text(FORKS)
    proc = subprocess.run([sys.executable, "-m", "graphmend", "run", "-f", "json", str(script)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert "the child ends its part of the program" in proc.stderr
    data = json.loads(proc.stdout)  # one document: the child did not report
    assert data["command"] == "run" and len(data["targets"]) == 1


def test_mend_run_output_is_where_the_caller_meant_after_the_program_chdirs(tmp_path):
    script = tmp_path / "moves.py"
    script.write_text("import os\nos.makedirs('elsewhere', exist_ok=True)\nos.chdir('elsewhere')\n")
    proc = subprocess.run([sys.executable, "-m", "graphmend", "run", "-f", "json", "-o", "report.json", "moves.py"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "elsewhere" / "report.json").exists()
    assert json.loads((tmp_path / "report.json").read_text())["command"] == "run"
