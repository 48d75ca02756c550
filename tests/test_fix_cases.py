"""Every fix family's own FIXED (before -> after) and NEGATIVE cases, plus numeric
equivalence of each FIXED pair on random inputs and idempotence."""

from __future__ import annotations

import inspect

import pytest

from rewrites.fixes import family_modules, fix_source

FIXED = [(m.__name__.rsplit(".", 1)[1], i, b, a) for m in family_modules() for i, (b, a) in enumerate(m.FIXED)]
NEGATIVE = [(m.__name__.rsplit(".", 1)[1], i, s, r, m.RULES) for m in family_modules()
            for i, (s, r) in enumerate(m.NEGATIVE)]


@pytest.mark.parametrize("family,i,before,after", FIXED, ids=[f"{f}-{i}" for f, i, _, _ in FIXED])
def test_fixed_case(family, i, before, after):
    r = fix_source(before)
    assert r.error is None
    assert r.new_source == (after if after is not None else before)
    assert fix_source(r.new_source).new_source == r.new_source  # idempotent


@pytest.mark.parametrize("family,i,source,reason,rules", NEGATIVE, ids=[f"{f}-{i}" for f, i, *_ in NEGATIVE])
def test_negative_case(family, i, source, reason, rules):
    r = fix_source(source, rules=rules)
    assert not r.changed
    if reason:
        assert any(reason in x.reason for x in r.refused), [x.reason for x in r.refused]


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


@pytest.mark.parametrize("family,i,before,after", [c for c in FIXED if c[3] is not None],
                         ids=[f"{f}-{i}" for f, i, _, a in FIXED if a is not None])
def test_fixed_case_same_values(family, i, before, after):
    """Original and rewritten compute the same on random inputs (both branch sides)."""
    torch = pytest.importorskip("torch")
    ns_a, ns_b = {}, {}
    exec(compile(before, "<before>", "exec"), ns_a)
    exec(compile(after, "<after>", "exec"), ns_b)
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

    for before, after, lines in gm5_masks.FIXED_WITH_LINES:
        assert not fix_source(before).changed  # statically, `m` could be an index tensor
        r = fix_source(before, lines=lines, shape_lines=lines)
        assert r.new_source == after and [s.rule for s in r.applied] == ["GM502"]


def test_size_list_assert_split_per_dimension_where_dynamo_broke():
    from rewrites.fixes import gm4_guards

    for before, after, lines in gm4_guards.FIXED_WITH_LINES:
        r = fix_source(before, lines=lines)
        assert r.new_source == after
        ns_a, ns_b = {}, {}
        exec(before, ns_a)
        exec(after, ns_b)
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


@pytest.mark.parametrize("i", range(len(__import__("rewrites.fixes.gm1_where", fromlist=["x"]).FIXED_IN_CLASS)))
def test_method_of_the_class_decides_where_or_cond(i):
    """A pure method of the enclosing class keeps torch.where; one with a side effect gets
    torch.cond. Both compute what the original computed, on both sides of the branch."""
    torch = pytest.importorskip("torch")
    from rewrites.fixes.gm1_where import FIXED_IN_CLASS

    before, after = FIXED_IN_CLASS[i]
    assert fix_source(before).new_source == after
    assert fix_source(after).new_source == after  # idempotent
    ns_a, ns_b = {}, {}
    exec(compile(before, "<before>", "exec"), ns_a)
    exec(compile(after, "<after>", "exec"), ns_b)
    for sign in (1.0, -1.0):
        n, inv = torch.rand(3) * sign + 0.1 * sign, torch.randn(3)
        torch.testing.assert_close(ns_b["R"]().f(n, inv), ns_a["R"]().f(n, inv))


def test_numpy_scalar_call_rewritten_only_where_a_branch_read_it():
    from rewrites.fixes import gm6_numpy
    from tracer.messages import provenance

    for before, after, lines in gm6_numpy.FIXED_WITH_LINES:
        assert not fix_source(before, lines=lines).changed  # no provenance: left alone
        r = fix_source(before, lines=lines, numpy_lines=lines)
        assert r.new_source == after and [s.rule for s in r.applied] == ["GM604"]
        assert not fix_source(after, lines=lines, numpy_lines=lines).changed
        ns_a, ns_b = {}, {}
        exec(before, ns_a)
        exec(after, ns_b)

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
