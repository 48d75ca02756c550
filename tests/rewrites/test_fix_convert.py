"""GM606 / GM607: a buffer or submodule converted in ``forward`` (transformers 5.x CTRL's
re-bound ``nn.Buffer``; Switch Transformers' and NLLB-MoE's router casts, which torch 2.11
breaks at). The safe guard (the conversion runs only when it changes something) and the
unsafe local: the exact rewrites, their refusals, that the guarded module computes, re-binds
and compiles as it should, and ``mend fix`` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewrites.fixes import fix_source, gm6_convert
from rewrites.scan import scan_source

REWRITES = [c for c in gm6_convert.CASES if c.after is not None]
SAFE = [c for c in REWRITES if not c.unsafe]
UNSAFE = [c for c in REWRITES if c.unsafe]
CTRL, CTRL_GUARDED = SAFE[0].before, SAFE[0].after
ROUTER, ROUTER_GUARDED = gm6_convert._ROUTER, SAFE[2].after


@pytest.mark.parametrize("case", SAFE, ids=["ctrl", "registered-half", "router", "bare-in-helper", "device-dtype",
                                          "own-module-class"])
def test_guard_is_safe(case):
    """The text and idempotence are test_fix_cases.py's; here: no flag needed, one site each."""
    r = fix_source(case.before, **case.options(unsafe=False))
    assert [(s.rule, s.strategy) for s in r.applied] in ([("GM606", "convert_guard")], [("GM607", "convert_guard")])
    assert not any("--unsafe-fixes" in x.advice for x in r.refused)


@pytest.mark.parametrize("case", UNSAFE, ids=["tensor-target", "base-class-chain"])
def test_buffer_local_is_unsafe(case):
    safe = fix_source(case.before, **case.options(unsafe=False))
    assert [r.rule for r in safe.refused if "--unsafe-fixes" in r.advice] == ["GM606"]
    r = fix_source(case.before, **case.options())
    assert [(s.rule, s.strategy) for s in r.applied] == [("GM606", "buffer_local")]


@pytest.mark.parametrize("case", [c for c in gm6_convert.CASES if c.after is None],
                         ids=["router-no-break", "router-tensor-target", "router-copy", "router-call-arg",
                              "own-conversion", "reassigned", "method-reads", "in-with", "self-passed", "lambda-after",
                              "lambda-before", "not-a-buffer", "not-a-conversion"])
def test_left_alone_by_every_family(case):
    assert not fix_source(case.before, **case.options()).changed


def test_buffer_fix_only_at_a_break_line_or_a_known_buffer():
    assert not fix_source(CTRL, lines={1}, unsafe=True).changed
    plain = CTRL.replace("nn.Buffer(torch.randn(n, d), persistent=False)", "torch.randn(n, d)")
    assert fix_source(plain, lines={14}, unsafe=True).changed  # Dynamo broke there: evidence enough


def test_static_scan_reports_the_assignment_but_not_under_the_guard():
    found = scan_source(CTRL, "ctrl.py").findings
    assert [(f.rule, f.line) for f, *_ in found if f.rule == "GM606"] == [("GM606", 14)]
    # guarded, the re-bind runs only with a converted (unmarked) tensor, which does not break
    assert not [f for f, *_ in scan_source(CTRL_GUARDED, "ctrl.py").findings if f.rule == "GM606"]


def _load(src, name="Model"):
    ns: dict = {}
    exec(compile(src, f"<{name}>", "exec"), ns)
    return ns[name]


def test_guarded_buffer_computes_rebinds_and_compiles_as_the_original():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    before = _load(CTRL)(12, 8).eval()
    after = _load(CTRL_GUARDED)(12, 8).eval()
    after.pos_encoding.copy_(before.pos_encoding)  # non-persistent: not in the state dict
    x, ids = torch.randn(2, 5, 8), torch.randint(0, 12, (2, 5))
    table = after.pos_encoding
    torch.testing.assert_close(after(x, ids), before(x, ids))
    assert after.pos_encoding is table  # nothing to convert: the same tensor, as .to() returns it
    torch._dynamo.reset()
    assert torch._dynamo.explain(before)(x, ids).graph_break_count >= 1
    torch._dynamo.reset()
    compiled = torch.compile(after, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x, ids), before(x, ids))
    # a conversion that changes the buffer still happens and re-binds it, as in the original
    torch._dynamo.reset()
    torch.testing.assert_close(after(x.double(), ids), before(x.double(), ids))
    assert before.pos_encoding.dtype == after.pos_encoding.dtype == torch.float64


def test_guarded_router_converts_only_when_something_differs():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    before, after = _load(ROUTER, "Router")(8, 4), _load(ROUTER_GUARDED, "Router")(8, 4)
    after.load_state_dict(before.state_dict())
    x = torch.randn(3, 8)
    weight = after.classifier.weight
    torch.testing.assert_close(after(x), before(x))
    assert after.classifier.weight is weight
    torch._dynamo.reset()
    compiled = torch.compile(after, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x), before(x))
    # half-precision weights: both cast the classifier back to the router's float32
    torch._dynamo.reset()
    before.half(), after.half()
    torch.testing.assert_close(after(x.half()), before(x.half()))
    assert before.classifier.weight.dtype == after.classifier.weight.dtype == torch.float32
    assert isinstance(after.classifier.weight, torch.nn.Parameter) and after.classifier.weight.requires_grad


def _mend_fix(tmp_path, *flags):
    repo = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--calls", "1", *flags, "--format", "json", "--quiet",
                          str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    return json.loads(run.stdout), run.stderr


_TARGET = ("\n\ndef mend_target_ctrl():\n    torch.manual_seed(0)\n"
           "    return Model(12, 8).eval(), (torch.randn(2, 5, 8), torch.randint(0, 12, (2, 5)))\n")


def test_mend_fix_verifies_the_guard_and_with_the_flag_the_local(tmp_path):
    pytest.importorskip("torch")
    guarded, local = tmp_path / "ctrl_like.py", tmp_path / "ctrl_tensor.py"
    guarded.write_text(CTRL + _TARGET, encoding="utf-8")
    local.write_text(UNSAFE[0].before + _TARGET, encoding="utf-8")
    report, err = _mend_fix(tmp_path, "--unsafe-fixes")
    verified = sorted((Path(f["file"]).name, f["rule"], f["line"]) for f in report["fixes"] if f["status"] == "verified")
    assert verified == [("ctrl_like.py", "GM606", 14), ("ctrl_tensor.py", "GM606", 14)], (report["fixes"], err)
    for target in report["fix_targets"]:
        assert target["breaks_before"] >= 1 and target["breaks_after"] == 0 and target["outputs_equal"] is True, target
    assert guarded.read_text(encoding="utf-8").startswith(CTRL)  # no --write: nothing written
    report, err = _mend_fix(tmp_path)  # without the flag: the guard only
    verified = [(Path(f["file"]).name, f["status"]) for f in report["fixes"] if f["status"] == "verified"]
    assert verified == [("ctrl_like.py", "verified")], (report["fixes"], err)


def test_mend_fix_on_the_router_follows_the_installed_torch(tmp_path):
    """torch 2.11 breaks at the router's conversion on every call and the guard is verified;
    2.13 traces it (nothing to fix, nothing planned)."""
    torch = pytest.importorskip("torch")
    # torch.nn's Linear, and a module class of the file's own (whose `to` is torch's too)
    for name, src in (("router.py", ROUTER), ("own_router.py", gm6_convert._OWN_ROUTER)):
        (tmp_path / name).write_text(src + "\n\ndef mend_target_router():\n    torch.manual_seed(0)\n"
                                     "    return Router(8, 4).eval(), (torch.randn(3, 8),)\n", encoding="utf-8")
    report, err = _mend_fix(tmp_path)
    fixes = sorted((Path(f["file"]).name, f["rule"], f["line"], f["status"]) for f in report["fixes"])
    targets = report["fix_targets"]
    assert len(targets) == 2, (report, err)
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 13):
        assert fixes == [("own_router.py", "GM607", 26, "verified"), ("router.py", "GM607", 13, "verified")], \
            (report["fixes"], err)
        assert all(t["breaks_before"] >= 1 and t["breaks_after"] == 0 for t in targets), targets
    else:
        assert fixes == [] and all(t["breaks_before"] == 0 for t in targets), (report, err)
