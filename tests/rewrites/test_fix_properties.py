"""Property-based: generated small programs with tensor-valued branches, side effects and
negative cases. Rewritten programs agree with the originals on random inputs, rewriting
is idempotent, and programs the rewriter must refuse are left untouched."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewrites.fixes import fix_source

torch = pytest.importorskip("torch")

EXPRS = ["x * 2", "x - 1", "x.abs()", "torch.relu(x)", "x + y", "y * 0.5", "torch.sigmoid(y)", "-x"]
CONDS = ["x.sum() > 0", "(x > 1).any()", "y.mean().item() < 0.1", "x.max() > y.min()",
         "x.sum() > 0 and y.sum() < 0", "not (x < 0).all()", "(x.sum() > 0) or (y.max() > 2)"]
SIDE = ["print('hi')", "x.add_(1)", "x[0] = 0", "self_count.append(1)", "raise ValueError('no')"]

settings.register_profile("mend-fix", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])


def _program(cond, shape, a, b, elif_cond, c):
    body = ["import torch", "def f(x, y):"]
    if shape == "assign":
        body += [f"    if {cond}:", f"        z = {a}"]
        if elif_cond:
            body += [f"    elif {elif_cond}:", f"        z = {c}"]
        body += ["    else:", f"        z = {b}", "    return z + 1"]
    elif shape == "single":
        body += ["    z = x + y", f"    if {cond}:", f"        z = {a.replace('x', 'z')}", "    return z"]
    elif shape == "ternary":
        body += [f"    return ({a}) if {cond} else ({b})"]
    else:  # early return
        body += [f"    if {cond}:", f"        return {a}", f"    return {b}"]
    return "\n".join(body) + "\n"


def _run(src, x, y):
    ns = {}
    exec(compile(src, "<gen>", "exec"), ns)
    return ns["f"](x.clone(), y.clone())


@settings(settings.get_profile("mend-fix"))
@given(cond=st.sampled_from(CONDS), shape=st.sampled_from(["assign", "single", "ternary", "return"]),
       a=st.sampled_from(EXPRS), b=st.sampled_from(EXPRS), elif_cond=st.sampled_from([None, *CONDS]),
       c=st.sampled_from(EXPRS), seed=st.integers(0, 2**16), scale=st.sampled_from([0.1, 1.0, 10.0]))
def test_generated_branches_agree(cond, shape, a, b, elif_cond, c, seed, scale):
    src = _program(cond, shape, a, b, elif_cond, c)
    r = fix_source(src)
    assert r.error is None
    assert r.changed, src  # every generated program here is rewritable
    assert "torch.where" in r.new_source
    assert fix_source(r.new_source).new_source == r.new_source  # idempotent
    g = torch.Generator().manual_seed(seed)
    for sign in (1, -1):
        x = torch.randn(3, 4, generator=g) * scale * sign
        y = torch.randn(3, 4, generator=g) * scale
        torch.testing.assert_close(_run(r.new_source, x, y), _run(src, x, y), equal_nan=True)


@settings(settings.get_profile("mend-fix"))
@given(cond=st.sampled_from(CONDS), side=st.sampled_from(SIDE), a=st.sampled_from(EXPRS),
       b=st.sampled_from(EXPRS), first=st.booleans())
def test_side_effect_branches_untouched(cond, side, a, b, first):
    arm = [f"        {side}", f"        z = {a}"] if first else [f"        z = {a}", f"        {side}"]
    src = "\n".join(["import torch", "def f(x, y, self_count):", f"    if {cond}:", *arm,
                     "    else:", f"        z = {b}", "    return z"]) + "\n"
    r = fix_source(src, rules=("GM1",))
    assert not r.changed
    assert r.refused and r.refused[0].rule.startswith("GM10")


@settings(settings.get_profile("mend-fix"))
@given(a=st.sampled_from(EXPRS), b=st.sampled_from(EXPRS), n=st.sampled_from(["n > 0", "flag", "len(items) == 2"]))
def test_python_conditions_untouched(a, b, n):
    src = f"def f(x, y, n, flag, items):\n    if {n}:\n        z = {a}\n    else:\n        z = {b}\n    return z\n"
    assert not fix_source(src).changed


@settings(settings.get_profile("mend-fix"))
@given(cond=st.sampled_from(CONDS), a=st.sampled_from(EXPRS), b=st.sampled_from(EXPRS), c=st.sampled_from(EXPRS),
       d=st.sampled_from([None, *EXPRS]), seed=st.integers(0, 2**16))
def test_python_and_tensor_with_elif_agree(cond, a, b, c, d, seed):
    """``if <python> and <tensor>`` with a Python ``elif`` (and maybe an ``else``); the first
    arm rebinds ``x`` and then reads it, so the rewrite must bind every name at once."""
    lines = ["import torch", "def f(x, y, flag, other):", "    z = x + y", f"    if flag and ({cond}):",
             f"        x = {a}", f"        z = {b.replace('y', 'x')}", "    elif other:", f"        z = {c}"]
    if d:
        lines += ["    else:", f"        x = {d}"]
    src = "\n".join([*lines, "    return z + x"]) + "\n"
    r = fix_source(src)
    assert r.error is None and r.changed, src
    assert fix_source(r.new_source).new_source == r.new_source
    g = torch.Generator().manual_seed(seed)
    for flag in (True, False):
        for other in (True, False):
            for sign in (1, -1):
                x, y = torch.randn(3, 4, generator=g) * sign, torch.randn(3, 4, generator=g)
                ns_a, ns_b = {}, {}
                exec(compile(src, "<gen>", "exec"), ns_a)
                exec(compile(r.new_source, "<gen>", "exec"), ns_b)
                torch.testing.assert_close(ns_b["f"](x.clone(), y.clone(), flag, other),
                                           ns_a["f"](x.clone(), y.clone(), flag, other), equal_nan=True)
