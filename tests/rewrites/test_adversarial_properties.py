"""Property: a static rewrite of a tensor branch keeps outputs AND gradients.

Hypothesis generates ``if <reduction of x> <op> <const>: y = <arm A> else: y = <arm B>``
(also as a ternary and as an early return), arms drawn from total ops (multiplication,
exp, tanh, ...) and non-total ones (sqrt, log, rsqrt, division by a tensor expression,
fractional powers, acos). ``rewrites.fixes.fix_source`` (torch-free) rewrites it; original
and rewritten are exec'd in-process and, wherever a rewrite was applied, compared on
inputs built to reach both arms and the singular points (0, 1, negatives, constants):
the output, and the gradient of ``y.sum()`` with respect to ``x``, NaN-aware.

The plain ``torch.where`` form of a non-total arm computes the unselected arm too; its
forward value is masked but its backward is ``0 * inf`` or ``0 * nan``, i.e. NaN: the
double-where form (the unselected arm fed a safe value) or a refusal is what keeps
``test_branch_rewrites_keep_gradients`` green; ``test_non_total_arms_are_rewritten`` makes
sure it is not green because nothing was rewritten.
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewrites.fixes import fix_source

torch = pytest.importorskip("torch")

TOTAL = ["x * 2", "x + 1", "x * x", "torch.exp(x)", "torch.tanh(x)", "x.abs()", "torch.sigmoid(x)", "-x"]
NON_TOTAL = ["torch.sqrt(x)", "torch.log(x)", "torch.rsqrt(x)", "x / (x - 1)", "1.0 / x", "x ** 0.5",
             "torch.log1p(x)", "torch.acos(x)", "x / x.sum()"]
REDUCTIONS = ["x.sum()", "x.mean()", "x.min()", "x.max()", "x.abs().max()", "(x * x).sum()"]
OPS = [">", ">=", "<", "<="]
CONSTS = ["0", "0.0", "1", "-1", "0.5"]
SPECIAL = [0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0]

settings.register_profile("mend-adversarial", max_examples=40, deadline=None, report_multiple_bugs=False,
                          suppress_health_check=[HealthCheck.too_slow])


def program(cond: str, a: str, b: str, shape: str) -> str:
    lines = ["import torch", "", "", "def f(x):"]
    if shape == "assign":
        lines += [f"    if {cond}:", f"        y = {a}", "    else:", f"        y = {b}", "    return y"]
    elif shape == "ternary":
        lines += [f"    y = ({a}) if {cond} else ({b})", "    return y"]
    else:  # early return
        lines += [f"    if {cond}:", f"        return {a}", f"    return {b}"]
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=None)
def rewrite(src: str):
    """fix_source once per distinct program (hypothesis replays and shrinks the same ones)."""
    return fix_source(src)


@functools.lru_cache(maxsize=None)
def _fn(src: str):
    ns: dict = {}
    exec(compile(src, "<generated>", "exec"), ns)
    return ns["f"]


def _observe(fn, x):
    leaf = x.clone().requires_grad_(True)
    y = fn(leaf)
    y.sum().backward()
    return y.detach(), (None if leaf.grad is None else leaf.grad.detach())


def inputs(values: list[float]) -> list:
    """The drawn tensor and variants that reach both arms and the singular points."""
    x = torch.tensor(values, dtype=torch.float32).reshape(2, 3)
    with_zero, with_one = x.clone(), x.clone()
    with_zero[0, 0], with_one[1, 2] = 0.0, 1.0
    return [x, -x, x.abs(), x.abs() + 0.25, -x.abs() - 0.25, with_zero, with_zero.abs(), with_one, with_one.abs(),
            torch.zeros(2, 3), torch.ones(2, 3), torch.full((2, 3), 2.0)]


def check(cond: str, a: str, b: str, shape: str, values: list[float]) -> None:
    src = program(cond, a, b, shape)
    r = rewrite(src)
    assert r.error is None, (src, r.error)
    if not r.changed:
        return  # refused: nothing to compare (a refusal is always sound)
    f_orig, f_new = _fn(src), _fn(r.new_source)
    for x in inputs(values):
        took = bool(_fn(f"import torch\ndef f(x):\n    return bool({cond})\n")(x))  # which arm, for the message
        try:
            want = _observe(f_orig, x)
        except Exception as exc:  # noqa: BLE001 - the original raising: the rewrite must too
            with pytest.raises(type(exc)):
                _observe(f_new, x)
            continue
        got = _observe(f_new, x)
        where = f"\n--- original\n{src}--- rewritten\n{r.new_source}--- x = {x.tolist()} (condition {took})"
        torch.testing.assert_close(got[0], want[0], equal_nan=True, msg=lambda m: f"output differs: {m}{where}")
        if (want[1] is None) != (got[1] is None):
            raise AssertionError(f"gradient: original {want[1]}, rewritten {got[1]}{where}")
        if want[1] is not None:
            torch.testing.assert_close(got[1], want[1], equal_nan=True,
                                       msg=lambda m: f"gradient differs: {m}{where}")


VALUES = st.lists(st.sampled_from(SPECIAL) | st.floats(-3, 3, width=32), min_size=6, max_size=6)
CONDITIONS = st.builds(lambda r, o, c: f"{r} {o} {c}", st.sampled_from(REDUCTIONS), st.sampled_from(OPS),
                       st.sampled_from(CONSTS))
SHAPES = st.sampled_from(["assign", "ternary", "return"])


@settings(settings.get_profile("mend-adversarial"))
@given(cond=CONDITIONS, a=st.sampled_from(TOTAL), b=st.sampled_from(TOTAL), shape=SHAPES, values=VALUES)
def test_total_arm_rewrites_keep_gradients(cond, a, b, shape, values):
    """Both arms total: the plain torch.where form is sound; outputs and gradients agree."""
    check(cond, a, b, shape, values)


@settings(settings.get_profile("mend-adversarial"))
@given(cond=CONDITIONS, a=st.sampled_from(TOTAL + NON_TOTAL), b=st.sampled_from(TOTAL + NON_TOTAL),
       shape=SHAPES, values=VALUES)
def test_branch_rewrites_keep_gradients(cond, a, b, shape, values):
    """Any arms: a rewrite that was applied must keep outputs and gradients at the singular
    points too (double-where, or no rewrite)."""
    check(cond, a, b, shape, values)


@pytest.mark.parametrize("arm", NON_TOTAL)
def test_non_total_arms_are_rewritten(arm):
    """The property above is not won by refusing: every non-total arm it draws is rewritten,
    in the double-where form (its dangerous operand behind the arm's own condition)."""
    r = rewrite(program("x.sum() > 0", arm, "x * 2", "assign"))
    assert r.changed, arm
    assert r.new_source.count("torch.where(") >= 2, r.new_source
