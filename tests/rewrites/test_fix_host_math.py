"""GM301 on integer arithmetic done in torch and read back (CANINE 4.x's
``torch.fmod(torch.tensor(n), torch.tensor(rate)).item()``): the exact rewrite, what it
leaves alone, the helper against torch on every op and sign, and ``mend fix`` end to end."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewrites.fixes import fix_source, gm3_host_math

(CANINE,) = [c for c in gm3_host_math.CASES if c.after is not None and "fmod" in c.before]
BEFORE, AFTER, LINES = CANINE.before, CANINE.after, set(CANINE.lines)


def test_host_math_fix_text_and_idempotence():
    r = fix_source(BEFORE, lines=LINES)
    assert r.error is None and r.new_source == AFTER
    assert [(s.rule, s.line, s.strategy) for s in r.applied] == [("GM301", 13, "host_int")]
    assert not fix_source(AFTER, lines=LINES).changed
    assert not fix_source(BEFORE).changed  # no break reported: nothing planned


@pytest.mark.parametrize("case", [c for c in gm3_host_math.CASES if c.after is None],
                         ids=["dtype", "atan2", "new_tensor", "round_dtype", "round_exp"])
def test_host_math_left_alone(case):
    assert not fix_source(case.before, lines=case.lines).changed  # by any family, not only this one


def _helper(torch):
    ns = {"torch": torch}
    exec(gm3_host_math.HELPER.source, ns)
    return ns[gm3_host_math.HELPER.name]


@pytest.mark.parametrize("op", gm3_host_math.OPS)
def test_helper_agrees_with_torch(op):
    torch = pytest.importorskip("torch")
    helper = _helper(torch)
    ints = [-7, -4, -1, 0, 1, 3, 4, 9, 2**40, 2**62, -(2**63)]
    floats = [-2.5, 0.1, 3.0, 7.25]
    for a, b in itertools.chain(itertools.product(ints, ints), itertools.product(floats, floats + [3]),
                                [(True, 3), (5, False)]):
        try:
            want = getattr(torch, op)(torch.tensor(a), torch.tensor(b)).item()
        except (RuntimeError, ZeroDivisionError):
            with pytest.raises((RuntimeError, ZeroDivisionError)):
                helper(op, a, b)
            continue
        got = helper(op, a, b)
        assert got == want and type(got) is type(want), (op, a, b, got, want)


_INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(gm3_host_math.OPS), st.one_of(_INT64, st.integers(-50, 50)),
       st.one_of(_INT64, st.integers(-50, 50)))
def test_helper_agrees_with_torch_on_random_int64(op, a, b):
    """Including overflow (torch wraps: the helper hands those back to torch) and zero divisors."""
    torch = pytest.importorskip("torch")
    helper = _helper(torch)
    try:
        want = getattr(torch, op)(torch.tensor(a), torch.tensor(b)).item()
    except (RuntimeError, ZeroDivisionError) as exc:
        with pytest.raises(type(exc)):
            helper(op, a, b)
        return
    assert helper(op, a, b) == want


def test_rewritten_module_same_values_and_one_graph():
    torch = pytest.importorskip("torch")

    def load(src):
        ns: dict = {}
        exec(compile(src, "<canine>", "exec"), ns)
        return ns["Upsample"](4).eval()

    before, after = load(BEFORE), load(AFTER)
    x = torch.randn(2, 5, 3)
    for n in (16, 17, 19):
        torch.testing.assert_close(after(x, n), before(x, n))
    torch._dynamo.reset()
    assert torch._dynamo.explain(before)(x, 17).graph_break_count >= 1
    torch._dynamo.reset()
    assert torch._dynamo.explain(after)(x, 17).graph_break_count == 0


def test_mend_fix_verifies_host_math(tmp_path):
    pytest.importorskip("torch")
    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "canine_like.py").write_text(
        BEFORE + "\n\ndef mend_target_upsample():\n    torch.manual_seed(0)\n"
        "    return Upsample(4).eval(), (torch.randn(2, 5, 3), 17)\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--format", "json", "--quiet", str(tmp_path)],
                         capture_output=True, text=True, timeout=900, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    report = json.loads(run.stdout)
    verified = [(f["rule"], f["line"]) for f in report["fixes"] if f["status"] == "verified"]
    assert verified == [("GM301", 13)], (report["fixes"], run.stderr)
    target = report["fix_targets"][0]
    assert target["breaks_before"] >= 1 and target["breaks_after"] == 0 and target["outputs_equal"] is True, target


def _round_helper():
    import math

    torch = pytest.importorskip("torch")
    ns = {"torch": torch, "math": math}
    exec(gm3_host_math.ROUND_HELPER.source, ns)
    return ns["_mend_host_round"]


def test_host_rounding_is_exact_on_every_int_it_takes():
    """``float(torch.tensor(s).<fn>().<rnd>())``: torch computes in float32, math in float64;
    the helper takes the host path only where the two agree, shown here on every int of its
    domain [1, 2**16], each function and rounding (past it they do differ: log2 rounded at
    741455, floor(log10) at 9999995 ...)."""
    torch = pytest.importorskip("torch")
    import math

    n = gm3_host_math.ROUND_LIMIT
    ints = torch.arange(1, n + 1)
    for fn in gm3_host_math.ROUNDED:
        f32 = getattr(ints, fn)()  # what torch.tensor(int).<fn>() computes: float32
        assert f32.dtype == torch.float32
        for rnd in gm3_host_math.ROUNDINGS:
            want = getattr(f32, rnd)().tolist()
            if rnd == "round":
                got = [float(round(getattr(math, fn)(s))) for s in range(1, n + 1)]
            else:
                got = [float(getattr(math, rnd)(getattr(math, fn)(s))) for s in range(1, n + 1)]
            bad = [s for s, a, b in zip(range(1, n + 1), got, want) if a != b]
            assert not bad, (fn, rnd, bad[:5])
    helper = _round_helper()
    assert "1 <= s <= 2**16:" in gm3_host_math.ROUND_HELPER.source and n == 2**16  # the helper's bound is the one checked
    for s in (1, 2, 3, 1000, n):
        assert helper("log2", "round", s) == float(torch.tensor(s).log2().round())


def test_host_rounding_keeps_torch_outside_its_domain():
    torch = pytest.importorskip("torch")
    helper = _round_helper()
    for s in (0, -4, 2.5, True, 2**16 + 1, 741455):
        want = getattr(getattr(torch.tensor(s), "log2")(), "round")().item()
        got = helper("log2", "round", s)
        assert got == want or (got != got and want != want), s  # NaN for negatives, -inf for 0
