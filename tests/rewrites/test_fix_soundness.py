"""Soundness of the rewrites beyond equal forward values: the patched program
behaves as the original for a user in every mode the rewrite could change -- gradients
(NaN-aware), module buffers, the RNG stream, exception type and message, half precision --
and the compiled form has no graph break where the rewrite promised none."""

from __future__ import annotations

import pytest

from rewrites.fixes import fix_source

torch = pytest.importorskip("torch")


def _load(src: str, name: str = "f"):
    ns: dict = {}
    exec(compile(src, "<mend-test>", "exec"), ns)
    return ns[name]


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # the type and the message are what a caller sees
        return (type(exc), str(exc))


def _no_break(fn, *args):
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend="eager")(*args)


# -- GM4: eager keeps the exception, compiled code keeps the check ------------------------

GUARDS = [
    ("import torch\ndef f(x):\n    if (x < 0).any():\n        raise ValueError('negative')\n    return x * 2\n", None),
    ("import torch\ndef f(x):\n    assert (x >= 0).all(), 'negative'\n    return x * 2\n", None),
    ("import torch\ndef f(x):\n    assert (x >= 0).all()\n    return x * 2\n", None),
    ("import torch\ndef f(x):\n    assert (x >= 0).all(), f'min {x.min()}'\n    return x * 2\n", None),
    ("import torch\ndef f(x, n):\n    assert list(x.size()) == [n, 3]\n    return x * 2\n", {3}),
]


@pytest.mark.parametrize("i", range(len(GUARDS)))
def test_guard_keeps_the_exception_eager_raises(i):
    src, lines = GUARDS[i]
    r = fix_source(src, lines=lines)
    assert r.changed and "torch.compiler.is_compiling()" in r.new_source
    before, after = _load(src), _load(r.new_source)
    args_ok = (torch.ones(2, 3),) + ((2,) if lines else ())
    args_bad = ((-torch.ones(2, 3),) if not lines else (torch.ones(2, 3), 5))
    for args in (args_ok, args_bad):
        want, got = _outcome(before, *args), _outcome(after, *args)
        assert got[0] == want[0] and (got[0] == "ok" or got[1] == want[1]), (want, got)
    torch.testing.assert_close(_no_break(after, *args_ok), before(*args_ok))


def test_caller_except_value_error_still_catches():
    src = "import torch\ndef f(x):\n    if (x < 0).any():\n        raise ValueError('negative')\n    return x\n"
    after = _load(fix_source(src).new_source)
    with pytest.raises(ValueError, match="negative"):
        after(-torch.ones(2))


# -- GM1: non-total arms under torch.where keep their gradients ---------------------------

def _grads(fn, *args):
    """Forward value and the gradient of every floating input, on copies of ``args``."""
    xs = [a.detach().clone().requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a
          for a in args]
    out = fn(*xs)
    out.sum().backward()
    return out.detach(), [x.grad for x in xs if isinstance(x, torch.Tensor) and x.requires_grad]


NON_TOTAL = [  # (source, inputs): each input set takes the branch whose other arm is not total
    ("import torch\ndef f(h):\n    if (h > 0).all():\n        y = torch.sqrt(h)\n    else:\n        y = h * 0.5\n    return y\n",
     [(torch.tensor([0.0, -1.0, 4.0]),), (torch.tensor([1.0, 4.0]),)]),
    ("import torch\ndef f(s, m):\n    if (m > 0).any():\n        y = s / (m > 0).sum()\n    else:\n        y = s\n    return y * 2\n",
     [(torch.randn(3), torch.zeros(3)), (torch.randn(3), torch.ones(3))]),
    ("import torch\ndef f(p):\n    if (p < 1).all():\n        y = p.log() - torch.log1p(-p)\n    else:\n        y = p\n    return y * 2\n",
     [(torch.tensor([0.0, 1.0]),), (torch.tensor([0.2, 0.7]),)]),
    ("import torch\ndef f(x):\n    peak = x.abs().max()\n    if peak > 30.0:\n        x = x * (30.0 / peak)\n    return x * 2\n",
     [(torch.zeros(3),), (torch.full((3,), 40.0),)]),
    ("import torch\ndef f(h):\n    if (h.abs() < 1).all():\n        y = torch.acos(h)\n    else:\n        y = h\n    return y * 2\n",
     [(torch.tensor([1.0, 0.5]),), (torch.tensor([0.1, -0.5]),)]),
    ("import torch\ndef f(h):\n    if h.max() > 80:\n        return h * 0.5\n    return h.exp()\n",
     [(torch.tensor([100.0, 1.0]),), (torch.tensor([1.0, 2.0]),)]),
]


@pytest.mark.parametrize("i", range(len(NON_TOTAL)))
def test_non_total_arm_keeps_gradients(i):
    src, inputs = NON_TOTAL[i]
    r = fix_source(src)
    assert r.changed and "torch.where" in r.new_source, r.refused
    before, after = _load(src), _load(r.new_source)
    for args in inputs:
        want, got = _grads(before, *args), _grads(after, *args)
        torch.testing.assert_close(got[0], want[0], equal_nan=True)
        for gw, gg in zip(want[1], got[1]):
            assert (gw is None) == (gg is None)
            if gw is not None:  # NaN exactly where the original has NaN, equal elsewhere
                torch.testing.assert_close(gg, gw, equal_nan=True)


def test_out_of_range_ids_in_the_unselected_arm_do_not_raise():
    src = ("import torch\nimport torch.nn.functional as F\ndef f(ids, w):\n    if (ids < w.shape[0]).all():\n"
           "        y = F.embedding(ids, w).sum() + w.index_select(0, ids).sum() + w[ids].sum() + w.gather(0, ids[:, None].expand(-1, 2)).sum()\n"
           "    else:\n        y = w.sum() * 0.0\n    return y\n")
    r = fix_source(src)
    assert r.changed, r.refused
    before, after = _load(src), _load(r.new_source)
    w = torch.randn(4, 2)
    for ids in (torch.tensor([0, 3]), torch.tensor([1, 7])):
        want, got = _grads(before, ids, w), _grads(after, ids, w)
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1][0], want[1][0])


def test_module_attribute_is_a_module_call_not_a_tensor_method():
    nn = torch.nn
    src = ("import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.norm = nn.LayerNorm(4)\n\n    def forward(self, h):\n        if h.sum() > 0:\n"
           "            h = self.norm(h)\n        return h * 2\n")
    r = fix_source(src, unsafe=True)  # torch.cond is an unsafe fix (gm1_where._COND_LIMITS)
    assert "torch.cond" in r.new_source and "torch.where" not in r.new_source
    bn = src.replace("nn.LayerNorm(4)", "nn.BatchNorm1d(4)")
    r = fix_source(bn)
    assert not r.changed and "running statistics" in r.refused[0].reason
    # BatchNorm in training: the original updates the running stats only on the taken path
    m_before, m_after = _load(bn, "M")(), _load(bn, "M")()
    m_after.load_state_dict(m_before.state_dict())
    h = -torch.ones(3, 4)
    m_before.train()(h)
    assert torch.equal(m_before.norm.running_mean, torch.zeros(4)) and isinstance(m_after, nn.Module)


def test_rng_in_an_arm_is_refused_not_speculated():
    src = ("import torch\nimport torch.nn.functional as F\ndef f(x):\n    if x.sum() > 0:\n"
           "        x = F.dropout(x, 0.5, training=True)\n    return x\n")
    r = fix_source(src)
    assert not r.changed and "RNG stream" in r.refused[0].reason


# -- GM3: the scalar stays detached; thresholds compare as Python did ----------------------

def test_item_removal_keeps_the_detach():
    src = "import torch\ndef f(x, h):\n    scale = h.abs().max().item()\n    return x / scale\n"
    r = fix_source(src)
    assert "h.abs().max().detach()" in r.new_source
    before, after = _load(src), _load(r.new_source)
    x, h = torch.randn(3), torch.randn(3)
    want, got = _grads(before, x, h), _grads(after, x, h)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1][0], want[1][0])
    assert want[1][1] is None and got[1][1] is None  # no gradient reaches h, as with .item()


def test_float_threshold_in_bfloat16_compares_like_python():
    src = "import torch\ndef f(h):\n    if h.max().item() > 0.3:\n        h = h * 2\n    return h * 2\n"
    r = fix_source(src)
    assert "h.max().double() > 0.3" in r.new_source
    before, after = _load(src), _load(r.new_source)
    h = torch.tensor([0.3, 0.1], dtype=torch.bfloat16)  # 0.30078125 > 0.3 in Python
    assert torch.equal(after(h), before(h)) and torch.equal(before(h), h * 4)
    assert _no_break(after, h).dtype == torch.bfloat16


def test_ternary_division_by_the_scalar_keeps_finite_gradients():
    src = ("import torch\ndef f(x):\n    peak = x.abs().max().item()\n"
           "    scale = (x.sum() + 30.0) / peak if peak > 30.0 else 1.0\n    return x * scale\n")
    r = fix_source(src)
    assert r.changed, r.refused
    before, after = _load(src), _load(r.new_source)
    for x in (torch.zeros(3), torch.full((3,), 40.0)):
        want, got = _grads(before, x), _grads(after, x)
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1][0], want[1][0])


def test_python_number_divisor_divides_exactly_in_float64_and_zero_stays_finite():
    """``x / self.penalty`` (a float of ``__init__``) in a branch: the divisor keeps its
    double value in float64 (as a float32 tensor 1.3 was 1.2999999523, and gradients differed
    by 8e-9), and a penalty of 0 on the path eager code skips gives no NaN gradient."""
    src = ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n"
           "    def __init__(self, penalty: float = 1.3):\n        super().__init__()\n"
           "        self.penalty = penalty\n\n    def forward(self, x):\n"
           "        if x.max() > 0:\n            x = x / self.penalty\n        return x * 2\n")
    r = fix_source(src, lines={11})
    assert [s.rule for s in r.applied] == ["GM101"] and "self.penalty or torch.where(" in r.new_source
    before, after = _load(src, "M"), _load(r.new_source, "M")
    for penalty in (1.3, 0.0):
        for x in (torch.randn(5, dtype=torch.float64).abs(), -torch.rand(5, dtype=torch.float64) - 0.1):
            want, got = _grads(before(penalty), x), _grads(after(penalty), x)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1][0], want[1][0]), (penalty, x)
    assert _no_break(after(1.3), torch.randn(5)).shape == (5,)


# -- GM2: a message eager code emits on a tensor condition is not silently dropped ---------

def test_conditional_warning_dropped_under_compile_is_only_an_unsafe_fix():
    from rewrites.fixes import gm2_defer

    cases = [c for c in gm2_defer.CASES if c.unsafe]
    assert cases  # the texts, idempotence and the flag's advice are test_fix_cases.py's
    for c in cases:
        r = fix_source(c.before)
        assert not r.changed and any("no longer fires in compiled code" in x.reason for x in r.refused)
        # a logger call (GM202) or a warnings.warn (GM203): both lost in compiled code
        assert [s.rule for s in fix_source(c.before, unsafe=True).applied] in (["GM202"], ["GM203"])
