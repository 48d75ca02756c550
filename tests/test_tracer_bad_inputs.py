"""Every bad target: a result with ``error`` naming it; the run goes on."""
import pytest

from graphmend.config import Config
from graphmend.discovery import discover
from tracer.capture import capture_targets
from pathlib import Path

BAD = Path(__file__).resolve().parent / "fixtures" / "dynamic" / "bad"
GOOD = Path(__file__).resolve().parent / "fixtures" / "dynamic" / "models" / "small.py"


@pytest.fixture(scope="module")
def outcome():
    found = discover([str(BAD)], Config())
    specs = found.targets + [t for t in discover([str(GOOD)], Config()).targets if t.function == "mend_target_clean"]
    done = []
    results = capture_targets(specs, jobs=2, timeout=5, on_done=done.append)
    return found, {r.name.split("::")[-1]: r for r in results}, done, specs


def test_discovery_errors(outcome):
    found, *_ = outcome
    msgs = {Path(e.file).name: e.message for e in found.errors}
    assert "syntax error at line 1" in msgs["syntax_error.py"]
    assert "cannot decode" in msgs["latin1.py"] or "not valid utf-8" in msgs["latin1.py"]
    assert "required argument(s) x, y" in msgs["params.py"]


def test_each_failure_names_its_target(outcome):
    _, res, done, specs = outcome
    assert len(done) == len(specs)
    expect = {
        "mend_target_never": "RuntimeError: boom at import",
        "mend_target_noncallable": "must be callable",
        "mend_target_wrong_type": "a target must return",
        "mend_target_raises": "ValueError: cannot build the model",
        "mend_target_forward_raises": "KeyError",
        "mend_target_hangs": "timed out after",
        "mend_target_segfault": "SIGSEGV",
        "mend_target_killed": "SIGKILL",
    }
    for fn, text in expect.items():
        r = res[fn]
        assert r.error and text in r.error, (fn, r.error)
        assert fn in r.error
    clean = res["mend_target_clean"]
    assert clean.error is None and clean.graph_count == 1
