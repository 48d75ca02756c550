"""The runtime fixes copy into the files they rewrite (rewrites/fixes/runtime/): real modules,
read as text by mend and copied whole; imported here, so each runs as the user's file runs it."""

from __future__ import annotations

import importlib

import pytest

from rewrites.fixes import fix_source
from rewrites.fixes.runtime import helper


@pytest.mark.parametrize("module", ["size_op", "opaque", "emit", "guard", "registry", "interp", "index"])
def test_a_helper_is_the_modules_functions_as_the_file_has_them(module):
    got = helper(module)
    mod = importlib.import_module(f"rewrites.fixes.runtime.{module}")
    assert got.name in vars(mod) and got.source.startswith(f"def {got.name}(")
    text = open(mod.__file__, encoding="utf-8").read()
    assert text.endswith(got.source) and "import torch" not in got.source.split("\n", 1)[0]


def test_the_size_op_keeps_a_read_in_one_graph_and_is_made_once():
    torch = pytest.importorskip("torch")
    from rewrites.fixes.runtime.size_op import _mend_size_op

    op = _mend_size_op("mend::test_runtime_read", lambda t: t.item())
    assert _mend_size_op("mend::test_runtime_read", lambda t: t.item()) is op  # the same read: the same op

    def pooled(x, k):
        n = op(k)
        torch._check(n >= 0)
        return x[:, :n].sum(1) + torch.arange(n).sum()

    x, k = torch.randn(3, 8), torch.tensor(5)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(pooled)(x, k)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    assert torch.equal(torch.compile(pooled, backend="eager")(x, k), pooled(x, k))


def test_a_warning_and_a_log_record_fire_from_one_compiled_graph(caplog):
    import logging
    import warnings

    torch = pytest.importorskip("torch")
    from rewrites.fixes.runtime.emit import _mend_log_if, _mend_warn_if

    log = logging.getLogger("rewrites.fixes.runtime.emit")  # the module's own logger: what _mend_log_if names

    def f(x):
        h = x * 2
        _mend_warn_if(torch.isnan(h).any(), "NaN in the hidden state", RuntimeWarning, 17)
        _mend_log_if((h.abs() > 100).any(), log, "warning", "large activations", 19)
        return h + 1

    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(torch.randn(4))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    compiled = torch.compile(f, backend="aot_eager")
    bad = torch.tensor([1.0, float("nan"), 500.0])
    for fn, where in ((f, "eager"), (compiled, "compiled")):
        caplog.clear()
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
            warnings.simplefilter("always")
            fn(torch.randn(3))
            assert not caught and not caplog.records, where
            fn(bad)
        assert [(w.category, str(w.message)) for w in caught] == [(RuntimeWarning, "NaN in the hidden state")], where
        assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
            (log.name, "WARNING", "large activations")], where
    # compiled, the message names the call's line of the original file
    assert caught[0].lineno == 17 and caplog.records[0].lineno == 19
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="NaN in the hidden state"):  # -W error raises, as eager does
            compiled(bad)


def test_a_guard_raises_its_error_in_eager_and_checks_in_one_compiled_graph():
    torch = pytest.importorskip("torch")
    from rewrites.fixes.runtime.guard import _mend_raise_if

    def f(x):
        _mend_raise_if((x < 0).any(), ValueError, "negative input")
        return x.sqrt()

    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(torch.rand(4))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    with pytest.raises(ValueError, match="^negative input$"):
        f(-torch.rand(4))
    compiled = torch.compile(f, backend="aot_eager")
    assert torch.equal(compiled(torch.ones(4)), torch.ones(4))
    with pytest.raises(RuntimeError, match="negative input"):
        compiled(-torch.rand(4))


def test_the_op_runtimes_share_one_naming_helper_defined_once_before_them():
    from rewrites.fixes import gm3_unbacked, gm5_opaque, gm5_shape_tail
    from rewrites.fixes.runtime.registry import _mend_op_name

    for rt, shared in ((gm3_unbacked.RUNTIME, ["_mend_op_name", "_mend_op_table"]),
                       (gm5_shape_tail.RUNTIME, ["_mend_op_name", "_mend_op_table"]),
                       (gm5_opaque.RUNTIME, ["_mend_op_name"])):
        assert [h.name for h in rt.with_required()] == shared + [rt.name]
        for name in shared:
            assert rt.text.count(f"def {name}(") == 1
    both = fix_source(gm3_unbacked.CASES[0].before.replace("def pooled(", "def rows(grid_thw: torch.Tensor):\n"
                                                        "    counts = grid_thw.prod(-1)\n"
                                                        "    return torch.repeat_interleave(grid_thw[:, 1], counts)\n\n\n"
                                                        "def pooled("),
                      lines={6, 10}, shape_lines={6}, unsafe=True)
    assert sorted(s.strategy for s in both.applied) == ["unbacked", "unbacked"], both.applied
    for name in ("_mend_op_name", "_mend_op_table", "_mend_size_op", "_mend_shape_op"):
        assert both.new_source.count(f"def {name}(") == 1, name  # one definition however many runtimes need it
    ops = {"mend::m_f_3": ("op", "code A")}
    assert _mend_op_name(ops, "mend::m_f_3", "code A") == ("mend::m_f_3", "op")  # this code's op, made before
    assert _mend_op_name(ops, "mend::m_f_3", "code B") == ("mend::m_f_3_1", None)  # another file's: the next name


def test_the_scan_knows_the_numpy_helpers_by_their_runtime_names():
    from rewrites.fixes.gm6_numpy import INTERP
    from rewrites.guards import NUMPY_HELPERS

    assert NUMPY_HELPERS == {INTERP.name}


def test_interp_compiles_to_one_graph_with_numpys_results_at_points_ends_nans_and_infinities():
    """numpy.interp's C loop, as _mend_interp runs it under torch.compile: every value equal
    (bit for bit, NaN where NumPy's is NaN), in one graph; what it leaves to numpy.interp
    (complex fp, one point) still gives NumPy's values, across a break."""
    import warnings

    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    from rewrites.fixes.runtime.interp import _mend_interp

    rng = np.random.default_rng(0)
    xp, fp = np.arange(10.0), rng.random(10)
    cases = [
        (np.linspace(-2, 12, 57), xp, fp),  # both ends, the points, between them
        (np.array([0.0, 9.0, 9.5, np.nan, -np.inf, np.inf, 3.3]), xp, fp),
        (np.array([0.0, 1.0, 1.5, 2.0, 3.0]), np.array([0.0, 1.0, 1.0, 2.0]), np.array([5.0, 6.0, 7.0, 8.0])),  # a tie
        (np.array([0.5, 1.5, 2.5]), np.arange(4.0), np.array([np.inf, np.inf, 1.0, -np.inf])),  # NaN slopes
        (np.array([0.5, 1.5]), np.arange(4.0), np.array([np.nan, 1.0, 2.0, 3.0])),
        (np.linspace(0, 999, 50)[::-1].copy(), np.arange(0, 1000), rng.random(1000).astype(np.float32)),
        (rng.random((3, 4)) * 10, xp, fp),  # x of any shape
        (np.float64(3.3), xp, fp),  # a scalar
    ]
    torch._dynamo.reset()
    compiled = torch.compile(_mend_interp, backend="eager", fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's loop warns of nothing; neither may the helper
        for x, a, b in cases:
            want = np.interp(x, a, b)
            assert np.array_equal(_mend_interp(x, a, b), want, equal_nan=True)  # eager: numpy.interp itself
            got = compiled(x, a, b)
            assert got.shape == np.shape(want) and np.array_equal(got, want, equal_nan=True), (x, got, want)
    falls_back = torch.compile(_mend_interp, backend="eager")
    for x, a, b in [(np.array([1.5]), xp, fp + 1j), (np.array([0.5, 2.0]), np.array([1.0]), np.array([2.0]))]:
        assert np.array_equal(falls_back(x, a, b), np.interp(x, a, b))


def test_a_tensor_index_stays_in_the_graph_compiled_and_indexes_as_written_in_eager_code():
    torch = pytest.importorskip("torch")
    from rewrites.fixes.runtime.index import _mend_index

    table = torch.randn(10, 3, requires_grad=True)

    def step(table, steps):
        return sum(_mend_index(table, t) * _mend_index(table, t - 2) for t in steps)

    steps = torch.tensor([9, 5, 2])
    torch._dynamo.reset()
    explained = torch._dynamo.explain(step)(table, steps)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    # without it, the same loop reads each index back (__index__): not one graph (its frame skipped)
    torch._dynamo.reset()
    plain = torch._dynamo.explain(lambda a, s: sum(a[t] * a[t - 2] for t in s))(table, steps)
    assert (plain.graph_count, plain.graph_break_count) != (1, 0)
    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    got, want = compiled(table, steps), step(table, steps)
    assert torch.equal(got, want)
    (g1,) = torch.autograd.grad(got.sum(), table)
    (g2,) = torch.autograd.grad(want.sum(), table)
    assert torch.equal(g1, g2)
    # eager code: x[i] as written (a view), other indexes and non-tensors too
    t = torch.tensor(4)
    assert _mend_index(table, t)._base is table and torch.equal(_mend_index(table, t), table[4])
    assert _mend_index([1, 2, 3], 1) == 2 and torch.equal(_mend_index(table, slice(1, 3)), table[1:3])
    with pytest.raises(IndexError, match="out of bounds"):
        _mend_index(table, torch.tensor(10))
