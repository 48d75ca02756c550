"""``mend run``: ``--record DIR`` (targets from the program's own calls, replayed by analyze,
fix --from-run and bench), its exit code (``--fail-on-breaks``) and where its report goes
(a machine format on stdout, the program's stdout moved to stderr).

A small user repo: ``model.py`` with a module whose blocks branch on a tensor and a function
that prints, ``train.py`` compiling both and running them. One recording is shared by the
module's replay tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

MODEL = '''\
import copy

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            y = y * 2
        return y


class TinyModel(nn.Module):
    def __init__(self, dim=8, depth=2, *, scale=1.0):
        super().__init__()
        block = Block(dim)
        self.blocks = nn.ModuleList([copy.deepcopy(block) for _ in range(depth)])
        self.scale = scale

    def forward(self, x, mask=None):
        for blk in self.blocks:
            x = blk(x)
        if mask is not None:
            x = x * mask
        return x * self.scale


def step(x, k: int = 2):
    out = x.relu()
    print("step")
    return out * k
'''

TRAIN = '''\
import sys

import torch

from model import TinyModel, step


def main():
    torch.manual_seed(0)
    model = TinyModel(8, depth=2, scale=0.5).eval()
    cmodel = torch.compile(model, backend="eager")
    cstep = torch.compile(step, backend="eager")

    def local(x):
        return x + 1

    clocal = torch.compile(local, backend="eager")
    with torch.no_grad():
        x = torch.randn(4, 8)
        torch.save(x, "x_program.pt")
        print("PROGRAM-RAN", cmodel(x, mask=torch.ones(4, 8, dtype=torch.bool)).shape)
        cmodel(x)
        cstep(torch.arange(6.0), k=3)
        clocal(x)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _mend(*args, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "graphmend", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


def _repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.py").write_text(MODEL)
    (root / "train.py").write_text(TRAIN)
    return root


def _break_set(report: dict) -> set:
    return {(b["rule"], Path(b["file"]).name, b["line"], b["kind"]) for t in report["targets"] for b in t["breaks"]}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    repo = _repo(tmp_path_factory.mktemp("user") / "repo")
    proc = _mend("run", "--record", "rec", "-f", "json", "-o", "run.json", "train.py", cwd=repo)
    return repo, proc


def test_record_writes_a_targets_module_and_weights_only_tensors(recorded):
    repo, proc = recorded
    assert proc.returncode == 0, proc.stderr
    assert "PROGRAM-RAN torch.Size([4, 8])" in proc.stdout
    rec = repo / "rec"
    text = (rec / "mend_targets.py").read_text()
    compile(text, "mend_targets.py", "exec")
    # one readable target per compiled function: the module rebuilt from its class with the
    # constructor's arguments (the deepcopied blocks need none of their own), the function imported
    assert "def mend_target_tiny_model():" in text and "def mend_target_step():" in text
    assert "tiny_model = TinyModel(dim=8, depth=2, scale=0.5)" in text
    assert 'tiny_model.load_state_dict(tensors["state.tiny_model"])' in text
    assert "tiny_model.train(False)" in text
    assert 'return tiny_model, (x,), {"mask": mask}' in text
    assert 'return uncompiled(step), (x,), {"k": 3}' in text
    # through the stable replay module, never mend's internals
    assert "from graphmend.replay import load_tensors, uncompiled" in text and "graphmend.core" not in text
    # what could not be replayed is said, in one line on stderr and in the file
    assert ("mend: --record: not recorded: main.<locals>.local (train.py:14): local is defined inside a function"
            in proc.stderr)
    assert "# - main.<locals>.local (train.py:14): local is defined inside a function" in text
    assert "mend: recorded 2 compiled function(s) in rec/mend_targets.py" in proc.stderr
    manifest = json.loads((rec / "mend_record.json").read_text())
    assert [t["function"] for t in manifest["targets"]] == ["mend_target_tiny_model", "mend_target_step"]
    assert manifest["source_root"] == ".." and manifest["not_recorded"][0]["what"].startswith("main.<locals>.local")
    # the tensors load with weights_only=True, and are the program's: the first call's inputs
    check = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import torch
        t = torch.load("rec/tiny_model.pt", weights_only=True)
        assert sorted(t) == ["mask", "state.tiny_model", "x"], sorted(t)
        assert t["mask"].dtype is torch.bool and t["x"].shape == (4, 8)
        assert torch.equal(t["x"], torch.load("x_program.pt"))
        assert sorted(t["state.tiny_model"]) == [f"blocks.{i}.lin.{p}" for i in (0, 1) for p in ("bias", "weight")]
        s = torch.load("rec/step.pt", weights_only=True)
        assert torch.equal(s["x"], torch.arange(6.0))
        print("ok")
    """)], capture_output=True, text=True, cwd=repo, timeout=120)
    assert check.stdout.strip() == "ok", check.stderr


def test_analyze_on_the_recording_finds_the_breaks_mend_run_found(recorded):
    repo, proc = recorded
    assert proc.returncode == 0, proc.stderr
    ran = json.loads((repo / "run.json").read_text())
    analyzed = _mend("analyze", "rec", "-f", "json", cwd=repo)
    assert analyzed.returncode == 1, analyzed.stderr  # breaks are findings
    report = json.loads(analyzed.stdout)
    assert [t["name"] for t in report["targets"]] == ["mend_targets.py::mend_target_tiny_model",
                                                      "mend_targets.py::mend_target_step"]
    assert all(t["error"] is None for t in report["targets"]), report["targets"]
    expected = _break_set(ran)
    assert ("GM101", "model.py", 14, "graph_break") in expected and ("GM201", "model.py", 36, "graph_break") in expected
    assert _break_set(report) == expected


def test_fix_from_run_verifies_on_the_recorded_inputs(recorded):
    repo, proc = recorded
    assert proc.returncode == 0, proc.stderr
    before = (repo / "model.py").read_bytes()
    fixed = _mend("fix", "--from-run", "rec", "--rule", "GM1", "-f", "json", cwd=repo)
    report = json.loads(fixed.stdout)
    assert [t["name"] for t in report["targets"]] == ["rec/mend_targets.py::mend_target_tiny_model",
                                                      "rec/mend_targets.py::mend_target_step"]
    (fix,) = [f for f in report["fixes"] if f["rule"] == "GM101"]
    assert (Path(fix["file"]).name, fix["line"], fix["status"]) == ("model.py", 14, "verified"), fix
    (target,) = [t for t in report["fix_targets"] if t["name"].endswith("mend_target_tiny_model")]
    assert (target["breaks_before"], target["breaks_after"], target["outputs_equal"]) == (2, 0, True)
    assert fixed.returncode == 1  # a verified fix not written is a finding
    assert (repo / "model.py").read_bytes() == before  # nothing written without --write
    # the program's folder is the one fixed: the fix is a diff of model.py, applicable there
    diff = _mend("fix", "--from-run", "rec", "--rule", "GM1", "--quiet", cwd=repo)
    assert diff.stdout.startswith("--- a/model.py\n+++ b/model.py\n"), diff.stdout[:200]


def test_bench_runs_a_recorded_target(recorded):
    repo, proc = recorded
    assert proc.returncode == 0, proc.stderr
    bench = _mend("bench", "rec/mend_targets.py::mend_target_step", "--arms", "eager", "--runs", "1",
                  "--warmup", "0", "-f", "json", cwd=repo)
    assert bench.returncode == 0, bench.stderr
    (row,) = json.loads(bench.stdout)["bench"]
    assert row["arm"] == "eager" and row["error"] in (None, ""), row


LAYERS = '''\
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Config:
    dim: int = 8
    act: str = "relu"


class Gated(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(config.dim, config.dim)

    def forward(self, x, ids):
        if (ids > 5).any():
            x = x + 1
        return self.proj(x)


class Method(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(8))

    @torch.compile(backend="eager")
    def forward(self, x):
        if x.mean() > 0:
            return x * self.w
        return x


class Opaque(nn.Module):
    def __init__(self, thing):
        super().__init__()
        self.thing = thing

    def forward(self, x):
        return x.sin()
'''

PROGRAM2 = '''\
import torch

from layers import Config, Gated, Method, Opaque

if __name__ == "__main__":
    g = Gated(Config(dim=8))
    g.compile(backend="eager")
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    ids = torch.randint(3, 10, (64, 8))
    g(x, ids)
    m = Method()
    m(torch.randn(3, 8))
    o = torch.compile(Opaque(object()), backend="eager")
    o(x)
'''


def test_record_regenerates_large_inputs_and_rebuilds_configs_and_methods(tmp_path):
    (tmp_path / "layers.py").write_text(LAYERS)
    (tmp_path / "prog.py").write_text(PROGRAM2)
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "mend_record.json").write_text(json.dumps({"version": 1, "targets": [{"file": "old.pt"}]}))
    (rec / "old.pt").write_bytes(b"stale")
    proc = _mend("run", "--record", "rec", "--record-max-bytes", "3K", "prog.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (rec / "mend_targets.py").read_text()
    # module.compile() on a module built from a dataclass config; the 4 KiB int ids (over the
    # budget, the largest) regenerated within their recorded range, the 2 KiB x kept
    assert "gated = Gated(config=Config(dim=8, act=\"relu\"))" in text
    assert "ids = regenerate((64, 8), torch.int64, seed=1, low=3, high=9)" in text
    assert "# ids: (64, 8) int64 (4096 bytes) regenerated from a seed: over --record-max-bytes" in text
    assert 'x = tensors["x"]' in text
    # @torch.compile on forward in the class body: bound to the rebuilt module, uncompiled
    assert "return uncompiled(Method.forward).__get__(method), (x,), {}" in text
    # a constructor argument mend cannot spell: not recorded, with the reason
    assert ("mend: --record: not recorded: Opaque.forward (layers.py:41): Opaque() argument thing is a "
            "builtins.object, which mend cannot write out as code") in proc.stderr
    # the earlier recording's files are replaced, not left behind
    assert not (rec / "old.pt").exists()
    # the targets replay in a fresh interpreter: what a worker does
    replay = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        sys.path.insert(0, "rec")
        import torch, mend_targets as m
        fn, args, kwargs = m.mend_target_gated()
        x, ids = args
        assert ids.dtype is torch.int64 and ids.shape == (64, 8) and 3 <= int(ids.min()) and int(ids.max()) <= 9
        torch.manual_seed(0)
        assert torch.equal(x, torch.randn(64, 8))
        fn(*args)
        fn, args, kwargs = m.mend_target_method_forward()
        assert fn.__self__.__class__.__name__ == "Method" and not hasattr(fn, "_torchdynamo_orig_callable")
        fn(*args)
        print("ok")
    """)], capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert replay.stdout.strip() == "ok", replay.stderr


@pytest.mark.parametrize("case", ["file", "under_a_file", "foreign", "size"])
def test_record_bad_folder_is_one_line_and_the_program_does_not_run(tmp_path, case):
    _repo(tmp_path)
    (tmp_path / "notes.txt").write_text("mine\n")
    folder, extra, expected = {
        "file": ("notes.txt", [], "mend: error: --record notes.txt: is a file, not a folder"),
        "under_a_file": ("notes.txt/rec", [], "mend: error: --record notes.txt/rec: cannot create it: "),
        "foreign": (".", [], "mend: error: --record .: is not empty and holds no mend recording (mend_record.json)"),
        "size": ("rec", ["--record-max-bytes", "lots"], "mend: error: --record-max-bytes: 'lots' is not a size"),
    }[case]
    proc = _mend("run", "--record", folder, *extra, "train.py", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(expected) and proc.stderr.count("\n") == 1, proc.stderr
    assert "PROGRAM-RAN" not in proc.stdout and "Traceback" not in proc.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine\n" and not (tmp_path / "mend_targets.py").exists()


def test_fix_from_run_without_a_recording_is_a_usage_error(tmp_path):
    _repo(tmp_path)
    (tmp_path / "empty").mkdir()
    for folder, expected in (("empty", "mend: error: --from-run empty: holds no mend recording"),
                             ("missing", "mend: error: --from-run missing: does not exist"),
                             ("model.py", "mend: error: --from-run model.py: not a folder")):
        proc = _mend("fix", "--from-run", folder, cwd=tmp_path, timeout=120)
        assert proc.returncode == 2 and proc.stderr.startswith(expected), proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


EXITS = '''\
import sys, torch
def step(x):
    if BREAK and x.sum() > 0:
        x = x + 1
    return x * 2
torch.compile(step, backend="eager")(torch.ones(4))
print("PROGRAM-STDOUT")
sys.exit(CODE)
'''


# breaks alone do not fail a run: test_run_machine_format_... and the text run below it exit 0
@pytest.mark.parametrize("breaks,code,flags,expected", [
    (True, 0, ["--fail-on-breaks"], 1),    # unless asked
    (False, 0, ["--fail-on-breaks"], 0),   # a clean program passes the gate
    (True, 3, ["--fail-on-breaks"], 3),    # a failed program's own code wins
])
def test_run_exit_code(tmp_path, breaks, code, flags, expected):
    (tmp_path / "prog.py").write_text(EXITS.replace("BREAK", str(breaks)).replace("CODE", str(code)))
    proc = _mend("run", "-q", *flags, "prog.py", cwd=tmp_path, timeout=300)
    assert proc.returncode == expected, proc.stderr
    assert "PROGRAM-STDOUT" in proc.stdout


def test_run_machine_format_goes_to_stdout_and_the_program_stdout_to_stderr(tmp_path):
    (tmp_path / "prog.py").write_text(EXITS.replace("BREAK", "True").replace("CODE", "0")
                                      + "\n# and a child process writing to fd 1\n")
    (tmp_path / "prog.py").write_text((tmp_path / "prog.py").read_text().replace(
        'print("PROGRAM-STDOUT")',
        'print("PROGRAM-STDOUT")\nimport subprocess\nsubprocess.run([sys.executable, "-c", "print(\'CHILD-STDOUT\')"])'))
    proc = _mend("run", "--format", "json", "prog.py", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # nothing but the report on stdout
    assert report["command"] == "run" and _break_set(report) == {("GM101", "prog.py", 3, "graph_break")}
    assert "PROGRAM-STDOUT" in proc.stderr and "CHILD-STDOUT" in proc.stderr
    # the text report keeps to stderr, the program's stdout stays its own
    text = _mend("run", "prog.py", cwd=tmp_path, timeout=300)
    assert text.returncode == 0, text.stderr  # a run that broke, without --fail-on-breaks
    assert "PROGRAM-STDOUT" in text.stdout and "GM101" in text.stderr and "GM101" not in text.stdout


# -- in-process: the pieces the recording is made of ----------------------------------------

def test_constructor_call_reads_the_class_call_arguments():
    torch = pytest.importorskip("torch")
    from graphmend.core.recording import Construction, constructor_call

    seen = {}
    original = torch.nn.Module.__init__

    def init(module, *a, **k):
        original(module, *a, **k)
        seen[type(module).__name__] = constructor_call(module, sys._getframe(1))

    class Base(torch.nn.Module):
        def __init__(self, dim, /, *extra, scale=1.0, **options):
            super().__init__()

    class Child(Base):
        def __init__(self, dim, depth=2, **kw):
            depth_seen = depth  # noqa: F841  (a local, not an argument)
            super().__init__(dim, depth, scale=3.0)

    torch.nn.Module.__init__ = init
    try:
        Base(4, 5, 6, scale=2.0, bias=False)
        Child(8, act="gelu")
    finally:
        torch.nn.Module.__init__ = original
    assert seen["Base"] == Construction(args=(4, 5, 6), kwargs={"scale": 2.0, "bias": False})
    # the outermost __init__ is the class's own: its arguments, not the ones it passes up
    assert seen["Child"] == Construction(args=(), kwargs={"dim": 8, "depth": 2, "act": "gelu"})


def test_regenerate_keeps_shape_dtype_and_range_and_is_seeded():
    torch = pytest.importorskip("torch")
    from graphmend.core.recording import regenerate

    ids = regenerate((3, 5), torch.int32, seed=4, low=2, high=4)
    assert ids.dtype is torch.int32 and ids.shape == (3, 5) and set(ids.unique().tolist()) <= {2, 3, 4}
    assert torch.equal(ids, regenerate((3, 5), torch.int32, seed=4, low=2, high=4))
    mask = regenerate((1000,), torch.bool, seed=1, p=0.0)
    assert mask.dtype is torch.bool and not mask.any()
    x = regenerate((4000,), torch.float16, seed=2, mean=5.0, std=0.5)
    assert x.dtype is torch.float16 and abs(float(x.float().mean()) - 5.0) < 0.1


PROGRAM_SMALL = '''\
import torch


def step(x):
    print("step")
    return x + 1


if __name__ == "__main__":
    torch.compile(step, backend="eager")(torch.ones(3))
'''


@pytest.mark.parametrize("folder", ['a"""; import os; os.system("touch PWNED") #', "rec\\N{x}\\n", "line\nbreak"])
def test_record_folder_names_stay_text_in_the_targets_module(tmp_path, folder):
    """The folder's name is written into mend_targets.py (its docstring, the commands it
    names): quotes, backslashes and newlines in it stay text, never code or a SyntaxError."""
    (tmp_path / "prog.py").write_text(PROGRAM_SMALL)
    proc = _mend("run", "--record", folder, "prog.py", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / folder / "mend_targets.py").read_text()
    code = compile(text, "mend_targets.py", "exec")
    replay = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import mend_targets as m
        fn, args, kwargs = m.mend_target_step()
        print(repr(m.__doc__))
    """), folder], capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                            timeout=120)
    assert replay.returncode == 0, replay.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / folder / "PWNED").exists()
    # the docstring says the folder as it is (wrapped at spaces)
    assert " ".join(f"mend run --record {folder} prog.py".split()) in " ".join(eval(replay.stdout).split())
    assert code.co_names.count("os") == 0
