"""The compiled check's probe (graphmend/verify/worker.py, ``probe_compiled``): the original
under the check's compile must show what it shows in eager, else the check cannot tell. The
probe costs two more compiles of the original, so it runs only once a patched program's
compiled run differs from the original's eager one, and once per target however many
attempts ask."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import graphmend.verify.run as verify_run  # noqa: E402
from graphmend.core.discovery import TargetSpec  # noqa: E402
from graphmend.core.model import TargetResult  # noqa: E402
from graphmend.verify.modes import CHECK_NAMES, COMPILED, COMPILED_DIFFERS, COMPILED_EVAL  # noqa: E402

pytestmark = pytest.mark.slow

SRC = '''import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
{body}        return torch.tanh(h)


def mend_target():
    torch.manual_seed(0)
    return Head(), (torch.randn(2, 4),)
'''
SAME = ""
DIFFERS = "        if torch.compiler.is_compiling():  # compiled, it scales\n            h = h * 2\n"
EVAL_ONLY = "        if self.training:\n            raise RuntimeError('inference only')\n"


@pytest.fixture
def probes(monkeypatch):
    """The modes of the verification workers started, in order."""
    started: list[str] = []
    real = verify_run.run_job

    def counting(job, *a, **k):
        started.append(job.payload["mode"])
        return real(job, *a, **k)

    monkeypatch.setattr(verify_run, "run_job", counting)
    return started


def _verify(tmp_path, original_body: str, patched_bodies: list[str], tail: str = ""):
    """Each patched program (``tail``: module-level code after it) verified against the original."""
    path = tmp_path / "head.py"
    path.write_text(SRC.format(body=original_body), encoding="utf-8")
    spec = TargetSpec(name="head.py::mend_target", function="mend_target", file=str(path))
    original = verify_run.run_original(spec, {}, str(tmp_path), timeout=120)
    assert original.error is None, original.error
    before = TargetResult(name=spec.name, file=str(path), function="mend_target", graph_count=1)
    return [verify_run.verify_target(original, {str(path): SRC.format(body=b) + tail + "# patched\n"}, before,
                                     {}, timeout=120) for b in patched_bodies]


def test_a_patched_program_that_agrees_compiled_never_runs_the_probe(tmp_path, probes):
    (v,) = _verify(tmp_path, SAME, [SAME])
    assert v.error is None and not v.mismatches, (v.error, v.mismatches)
    assert CHECK_NAMES[COMPILED] in v.checks and CHECK_NAMES[COMPILED] not in v.skipped
    assert probes == ["original", "patched"]


def test_a_patched_program_that_differs_compiled_is_a_difference_the_probe_confirms(tmp_path, probes):
    (v,) = _verify(tmp_path, SAME, [DIFFERS])
    assert v.mismatches and v.mismatches[0].startswith(f"{CHECK_NAMES[COMPILED]} on input example"), v.mismatches
    assert CHECK_NAMES[COMPILED] in v.checks
    assert probes == ["original", "patched", "probe"]


OTHERWISE = "        if torch.compiler.is_compiling():  # compiled, it scales otherwise\n            h = h * 3\n"


def test_an_original_that_differs_compiled_is_the_reference_its_patch_compiled_must_agree_with(tmp_path, probes):
    """The original compiled differs from its eager self (the compiler's own rounding, say):
    eager cannot be the compiled check's reference, the original compiled is. A patched program
    whose compiled calls show what the original's show passes the check; one whose compiled calls
    differ from both leaves it skipped (nothing can tell)."""
    same, other, again = _verify(tmp_path, DIFFERS, [DIFFERS, OTHERWISE, DIFFERS])
    name = CHECK_NAMES[COMPILED]
    for v in (same, again):
        assert v.error is None and not v.mismatches, v.mismatches
        assert name in v.checks and name not in v.skipped, (v.checks, v.skipped)
        assert any(r.startswith(f"{name}: {COMPILED_DIFFERS} on input example: ") and
                   r.endswith("the patched program compiled shows what the original compiled shows")
                   for r in v.rounding), v.rounding
    assert other.error is None and not other.mismatches, other.mismatches
    assert name not in other.checks
    assert other.skipped[name].startswith(f"{COMPILED_DIFFERS} on input example: "), other.skipped
    assert probes == ["original", "patched", "probe", "patched", "probe", "patched", "probe"]


def test_where_train_mode_cannot_run_the_compiled_program_is_compared_in_eval(tmp_path, probes):
    # an inference-only module: train mode raises, and so train+grad and the compiled train
    # run are skipped; a rewrite that changes what the compiled program computes is still caught
    same, differs = _verify(tmp_path, EVAL_ONLY, [EVAL_ONLY, EVAL_ONLY + DIFFERS])
    name = CHECK_NAMES[COMPILED_EVAL]
    assert same.error is None and not same.mismatches, (same.error, same.mismatches)
    assert name in same.checks and CHECK_NAMES[COMPILED] not in same.checks
    assert differs.mismatches and differs.mismatches[0].startswith(f"{name} on input example"), differs.mismatches
    assert probes == ["original", "patched", "patched", "probe"]


WRONG_FAKE = '''

@torch.library.custom_op("mendtest::copied", mutates_args=())
def _copied(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@_copied.register_fake
def _(x):
    # the right shape, the wrong layout: a transposed view, where the op gives a contiguous tensor
    return x.new_empty(x.shape[::-1]).t()
'''


def test_a_custom_op_whose_fake_promises_another_layout_is_a_difference(tmp_path, probes):
    """aot_eager never looks at a fake's strides, Inductor asserts them: the compiled check runs
    each custom op against its fake, so a fix's op with a wrong fake is caught before Inductor.
    (Inference only, as an op with no autograd formula is: the check runs in eval.)"""
    (v,) = _verify(tmp_path, EVAL_ONLY, [EVAL_ONLY + "        h = _copied(h)\n"], tail=WRONG_FAKE)
    assert v.mismatches[0].startswith(f"{CHECK_NAMES[COMPILED_EVAL]} on input example"), v.mismatches
    assert "its fake gives" in v.mismatches[0] and "(Inductor asserts the fake's)" in v.mismatches[0], v.mismatches
    assert probes == ["original", "patched", "probe"]
