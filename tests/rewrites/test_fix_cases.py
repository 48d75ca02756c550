"""Every fix family's own CASES (rewrites/fixes/base.py ``Case``), plus numeric equivalence
of the plain rewrites on random inputs, and that every module of the fixes is a registered
family or a support module."""

from __future__ import annotations

import ast
import inspect
import pkgutil

import pytest

import rewrites.fixes
from rewrites.fixes import family_modules, fix_source
from rewrites.fixes.base import Case

CASES = [(m.__name__.rsplit(".", 1)[1], i, c, m.RULES) for m in family_modules() for i, c in enumerate(m.CASES)]
IDS = [f"{f}-{i}" for f, i, _, _ in CASES]


def test_every_module_is_a_registered_family():
    """A family is found, not listed: every module of rewrites/fixes/ but the support ones
    plans, has cases, and says which rules it rewrites and where it plans."""
    names = {m.name for m in pkgutil.iter_modules(rewrites.fixes.__path__)}
    families = {m.__name__.rsplit(".", 1)[1] for m in family_modules()}
    assert names == families | rewrites.fixes.SUPPORT and not families & rewrites.fixes.SUPPORT
    for m in family_modules():
        assert callable(m.plan) and isinstance(m.ORDER, int), m.__name__
        assert m.RULES and all(isinstance(c, Case) for c in m.CASES), m.__name__
    orders = [m.ORDER for m in family_modules()]
    assert len(set(orders)) == len(orders), "two families with one ORDER plan in name order: say which goes first"


@pytest.mark.parametrize("family,i,case,rules", CASES, ids=IDS)
def test_case(family, i, case, rules):
    if case.after is None:  # left alone by its family
        r = fix_source(case.before, rules=rules, **case.options())
        assert r.error is None and not r.changed, r.new_source
        if case.reason:
            assert any(case.reason in x.reason for x in r.refused), [x.reason for x in r.refused]
        return
    r = fix_source(case.before, **case.options())
    assert r.error is None
    assert r.new_source == case.after
    assert fix_source(case.after, **case.options()).new_source == case.after  # idempotent
    if case.unsafe:  # never without --unsafe-fixes, and the site says the fix exists
        safe = fix_source(case.before, **case.options(unsafe=False))
        assert not safe.changed and any("--unsafe-fixes" in x.advice for x in safe.refused)
    if case.hints:  # only where Dynamo said so
        assert not fix_source(case.before, **case.options(hints=False)).changed


class _Proj:
    def __init__(self, torch):
        self.w = torch.randn(4, 4)

    def proj(self, x):
        return x @ self.w


def _inputs(torch, fn, seed):
    g = torch.Generator().manual_seed(seed)
    names = list(inspect.signature(fn).parameters)
    out = []
    for n in names:
        if n == "self":
            torch.manual_seed(seed)
            out.append(_Proj(torch))
        else:
            out.append(torch.randn(4, 4, generator=g) * (3 if seed % 2 else 0.5))
    if names[:2] == ["a", "b"] and seed % 3 == 0:
        out[1] = out[0].clone()  # torch.equal-guarded code: also the passing case
    return out


def _plain(case) -> bool:
    """A safe rewrite anywhere in a module-level ``f`` of tensors (the harness below)."""
    top = ast.parse(case.before).body
    return case.after is not None and not case.unsafe and case.lines is None and any(
        isinstance(s, ast.FunctionDef) and s.name == "f" for s in top)


PLAIN = [(f, i, c) for f, i, c, _ in CASES if _plain(c)]


@pytest.mark.parametrize("family,i,case", PLAIN, ids=[f"{f}-{i}" for f, i, _ in PLAIN])
def test_fixed_case_same_values(family, i, case):
    """Original and rewritten compute the same on random inputs (both branch sides)."""
    torch = pytest.importorskip("torch")
    ns_a, ns_b = {}, {}
    exec(compile(case.before, "<before>", "exec"), ns_a)
    exec(compile(case.after, "<after>", "exec"), ns_b)
    fa, fb = ns_a["f"], ns_b["f"]
    for seed in range(6):
        args = _inputs(torch, fa, seed)
        try:
            want = fa(*args)
        except Exception:
            with pytest.raises(Exception):
                fb(*args)
            continue
        got = fb(*args)
        torch.testing.assert_close(got, want, equal_nan=True)


def test_mask_name_rewritten_only_where_dynamo_saw_a_dynamic_shape():
    from rewrites.fixes import gm5_masks

    cases = [c for c in gm5_masks.CASES if c.hints]
    assert cases
    for c in cases:
        assert not fix_source(c.before).changed  # statically, `m` could be an index tensor
        assert [s.rule for s in fix_source(c.before, **c.options()).applied] == ["GM502"]


def test_check_tensor_all_keeps_eager_and_compiles_whole():
    """``torch._check_tensor_all`` split: eager raises what it raised (type and message), and
    compiled code checks in the graph without a break."""
    import torch

    from rewrites.fixes import gm4_guards

    case = next(c for c in gm4_guards.CASES if c.after and "_check_tensor_all(x > 0, lambda" in c.before)
    ns_a, ns_b = {}, {}
    exec(case.before, ns_a)
    exec(case.after, ns_b)
    for x in (torch.ones(3), -torch.ones(3)):
        outcomes = []
        for ns in (ns_a, ns_b):
            try:
                outcomes.append(ns["f"](x).tolist())
            except RuntimeError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]
    torch._dynamo.reset()
    assert not torch._dynamo.explain(ns_b["f"])(torch.ones(3)).break_reasons
    assert torch._dynamo.explain(ns_a["f"])(torch.ones(3)).break_reasons  # what the fix removes


def test_size_list_assert_split_per_dimension_where_dynamo_broke():
    from rewrites.fixes import gm4_guards

    cases = [c for c in gm4_guards.CASES if c.after is not None and c.lines and "list(x.size())" in c.before]
    assert cases
    for c in cases:
        ns_a, ns_b = {}, {}
        exec(c.before, ns_a)
        exec(c.after, ns_b)
        import torch

        for shape, n in (((3, 4), 3), ((3, 4), 2), ((3,), 3), ((3, 4, 1), 3)):
            x = torch.zeros(shape)
            outcomes = []
            for ns in (ns_a, ns_b):
                try:
                    outcomes.append(ns["f"](x, n).shape)
                except (AssertionError, RuntimeError) as exc:  # the check raises RuntimeError
                    outcomes.append(str(exc))
            assert outcomes[0] == outcomes[1]


def test_ternary_on_a_python_typed_parameter_dynamo_saw_as_tensor_says_why_it_stays():
    """diffusers' DDIM `_get_variance(self, timestep: int, prev_timestep: int)` is called with
    tensors: the annotation keeps the rewrite off, and the refusal names the parameter rather
    than the report falling back to "no automatic fix for GM102"."""
    src = ("class S:\n    def f(self, p: int):\n"
           "        a = self.c[p] if p >= 0 else self.d\n        return a\n")
    r = fix_source(src, lines={3}, tensor_lines={3})
    assert not r.changed
    assert [(x.rule, x.line) for x in r.refused] == [("GM102", 3)]
    assert "`p`" in r.refused[0].reason and "annotation" in r.refused[0].reason
    assert not fix_source(src, lines={3}).refused  # without Dynamo's word: a Python branch, silent


IN_CLASS = [c for f, _, c, _ in CASES if f == "gm1_where" and "\nclass R:" in c.before]


@pytest.mark.parametrize("case", IN_CLASS, ids=[str(i) for i in range(len(IN_CLASS))])
def test_method_of_the_class_decides_where_or_cond(case):
    """A pure method of the enclosing class keeps torch.where; one with a side effect gets
    torch.cond. Both compute what the original computed, on both sides of the branch."""
    torch = pytest.importorskip("torch")
    ns_a, ns_b = {}, {}
    exec(compile(case.before, "<before>", "exec"), ns_a)
    exec(compile(case.after, "<after>", "exec"), ns_b)
    for sign in (1.0, -1.0):
        n, inv = torch.rand(3) * sign + 0.1 * sign, torch.randn(3)
        torch.testing.assert_close(ns_b["R"]().f(n, inv), ns_a["R"]().f(n, inv))


def test_numpy_scalar_call_rewritten_only_where_a_branch_read_it():
    from rewrites.fixes import gm6_numpy
    from tracer.messages import provenance

    cases = [c for c in gm6_numpy.CASES if c.after is not None and gm6_numpy.INTERP.name not in c.after]
    assert cases and all(c.hints == ("numpy",) for c in cases)  # no provenance: left alone (test_case)
    for c in cases:
        assert [s.rule for s in fix_source(c.before, **c.options()).applied] == ["GM604"]
        ns_a, ns_b = {}, {}
        exec(c.before, ns_a)
        exec(c.after, ns_b)

        class Cfg:
            one, a, b, plan = False, 6, 8, [3, 1, 4, 1, 5, 9, 2, 6]

        class Short(Cfg):
            a = 2

        for cfg in (Cfg, Short):
            assert ns_a["chunk"](cfg) == ns_b["chunk"](cfg)
    # a reduction with keywords (an axis) is not the builtin's: left alone even where torch named it
    keyword = "import numpy as np\ndef f(a):\n    return np.sum(a, axis=0)\n"
    assert not fix_source(keyword, lines={3}, numpy_lines={3}).changed
    # torch 2.13's explanation of Reformer's break names the helper's line
    explanation = (
        "Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). The branch condition involves a "
        'tensor computed as follows: # File "/x/modeling_reformer.py", line 169, in _get_least_common_mult_chunk_len, '
        "code: return np.lcm(config.lsh_attn_chunk_length, config.local_attn_chunk_length) "
        "least_common_mult_chunk_length = wrapped_lcm(8, 8) # File \"/x/modeling_reformer.py\", line 2023, in forward, "
        "code: input_shape[-1] % least_common_mult_chunk_length != 0 wrapped_mod = wrapped_mod(16, least_common_mult_chunk_length)")
    got = [(e.file, e.line, e.function, e.source_line) for e in provenance(explanation)]
    assert got[0] == ("/x/modeling_reformer.py", 169, "_get_least_common_mult_chunk_len",
                      "return np.lcm(config.lsh_attn_chunk_length, config.local_attn_chunk_length)")
    assert got[1][1:3] == (2023, "forward") and provenance("Unsupported Tensor.item() call") == []


def test_fixes_read_masks_with_the_detectors_vocabulary():
    """One tensor-ness vocabulary (rewrites/tensors.py): every call the detectors know gives a
    boolean tensor is a mask to GM502's rewrite and a safe index to the double-where form,
    and a Python bool (``torch.equal``) indexes nothing out of range either."""
    import libcst as cst

    from rewrites.fixes import total
    from rewrites.fixes.gm5_masks import maskish
    from rewrites.tensors import BOOL_RESULTS, TORCH_HOST_FUNCS

    for name in sorted(BOOL_RESULTS):
        for spelling in (f"torch.{name}(h, g)", f"h.{name}(g)"):
            assert maskish(cst.parse_expression(spelling), []), spelling
            assert total._mask_like(cst.parse_expression(spelling)), spelling
    for name in sorted(TORCH_HOST_FUNCS):
        assert total._mask_like(cst.parse_expression(f"torch.{name}(h, g)")), name
    assert total.is_total(cst.parse_expression("x[torch.signbit(h)]")) is None
    assert total.is_total(cst.parse_expression("x[ids]")) is not None


def test_added_import_follows_the_header_and_stands_apart():
    """``import torch`` goes after a docstring, ``from __future__`` and the leading imports
    (libcst's AddImportsVisitor), separated from the code by a blank line; never twice."""
    src = ('"""Doc."""\nfrom __future__ import annotations\nimport os\ndef f(x):\n'
           "    if x.sum() > 0:\n        y = x * 2\n    else:\n        y = x - 1\n    return y\n")
    r = fix_source(src)
    assert r.new_source.startswith('"""Doc."""\nfrom __future__ import annotations\nimport os\nimport torch\n\ndef f(x):\n')
    assert fix_source(r.new_source).new_source == r.new_source
    again = "import torch as T\n" + src.split("import os\n")[1]
    assert fix_source(again).new_source.startswith("import torch as T\nimport torch\n\ndef f(x):\n")
