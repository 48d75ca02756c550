"""Shapes and layouts a torch.where arm meets: the planner refuses an arm total only on some
shapes, or writes it in a form total on all, or leaves it to verification's edge inputs
(graphmend/verify/inputs.py ``SHAPES``), which run on both sides; an arm that hands back the
caller's own tensor is refused where the result escapes."""

from __future__ import annotations

import textwrap

import pytest

from rewrites.fixes import fix_source

torch = pytest.importorskip("torch")


def _load(src: str, name: str = "f"):
    ns: dict = {}
    exec(compile(src, "<mend-test>", "exec"), ns)
    return ns[name]


def _fix(body: str):
    return fix_source("import torch\n" + textwrap.dedent(body))


def _refused(body: str) -> str:
    r = _fix(body)
    assert not r.changed, r.new_source
    return " ".join(x.reason for x in r.refused)


# -- the planner --------------------------------------------------------------------------

def test_full_max_of_a_possibly_empty_tensor_is_refused_naming_op_and_shape():
    why = _refused("""
        def f(scores):
            if (scores > 0.05).any():
                best = scores.max() * 2.0
            else:
                best = scores.sum() * 0.0
            return best * 1.0
        """)
    assert "`scores.max()`" in why and "empty" in why


def test_max_over_a_dim_is_left_to_the_edge_inputs():
    assert _fix("def f(s):\n    if (s > 0).any():\n        y = s.max(-1).values\n    else:\n        y = s.sum(-1)\n"
                "    return y * 1.0\n").changed


def test_unbiased_var_is_refused_for_a_batch_of_one_and_correction_0_is_not():
    why = _refused("def f(x):\n    if x.abs().sum() > 0:\n        y = x.var(0)\n    else:\n        y = x.sum(0)\n"
                   "    return y * 1.0\n")
    assert "var" in why and "batch of one" in why
    assert _fix("def f(x):\n    if x.abs().sum() > 0:\n        y = x.var(0, correction=0)\n    else:\n"
                "        y = x.sum(0)\n    return y * 1.0\n").changed


def test_softmax_of_a_masked_row_is_fed_zero_where_unselected():
    src = ("import torch\ndef f(scores, bias):\n    if (bias == 0).any(-1).all():\n        w = (scores + bias).softmax(-1)\n"
           "    else:\n        w = (scores + bias.clamp(min=-1e4)).softmax(-1)\n    return w\n")
    r = fix_source(src)
    assert r.changed and "torch.where((bias == 0).any(-1).all(), (scores + bias), 0).softmax(-1)" in r.new_source
    before, after = _load(src), _load(r.new_source)
    bias = torch.zeros(3, 5)
    bias[2] = float("-inf")  # an empty sequence: the clamped arm is taken
    for b in (bias, torch.zeros(3, 5)):
        grads = []
        for fn in (before, after):
            s = torch.randn(3, 5, generator=torch.Generator().manual_seed(0)).requires_grad_()
            out = fn(s, b)
            out.sum().backward()
            grads.append((out.detach(), s.grad))
        torch.testing.assert_close(grads[1][0], grads[0][0])
        torch.testing.assert_close(grads[1][1], grads[0][1])
        assert torch.isfinite(grads[1][1]).all()


def test_view_is_written_reshape_and_runs_on_channels_last():
    src = ("import torch\ndef f(f4):\n    b, c, h, w = f4.shape\n    if f4.abs().mean() > 10.0:\n"
           "        out = f4.view(b, c * h * w) * 0.1\n    else:\n        out = f4.flatten(1) * 1.0\n    return out\n")
    r = fix_source(src)
    assert r.changed and ".view(" not in r.new_source and "f4.reshape(b, c * h * w)" in r.new_source
    x = torch.randn(2, 3, 4, 4)
    torch.testing.assert_close(_load(r.new_source)(x * 100), _load(src)(x * 100))
    last = x.contiguous(memory_format=torch.channels_last)  # eager flattens it; view would raise
    torch.testing.assert_close(_load(r.new_source)(last), _load(src)(last))


def test_a_dtype_view_is_not_written_reshape():
    r = _fix("def f(x):\n    if x.sum() > 0:\n        y = x.view(torch.int32) * 2\n    else:\n        y = x.int()\n"
             "    return y * 1\n")
    assert "x.view(torch.int32)" in r.new_source


# -- aliasing -----------------------------------------------------------------------------

@pytest.mark.parametrize("body,how", [
    ("def f(x):\n    if x.abs().max() > 6:\n        x = x.clamp(-6, 6)\n    return x\n", "is returned"),
    ("def f(h):\n    if h.max() > 80:\n        return h\n    return h.exp()\n", "is returned"),
    ("def f(h, m):\n    if m.all():\n        return h[:, 0]\n    return h.sum(1)\n", "a view of it"),
    ("def f(x):\n    if torch.isnan(x).any():\n        y = torch.nan_to_num(x)\n    else:\n        y = x\n"
     "    y.clamp_(-3, 3)\n    return y.sum()\n", "written in place"),
    ("def f(x):\n    if x.sum() > 0:\n        y = x * 2\n    else:\n        y = x\n    y += 1\n    return y.sum()\n",
     "written in place"),
    ("def f(self, x):\n    if x.sum() > 0:\n        y = x * 2\n    else:\n        y = x\n    self.last = y\n"
     "    return y.sum()\n", "stored on an attribute"),
    ("def f(x):\n    return x if x.sum() > 0 else x * 2\n", "is returned"),
])
def test_an_arm_that_hands_back_the_callers_tensor_is_refused(body, how):
    why = _refused(body)
    assert "aliases the caller's tensor" in why and how in why


@pytest.mark.parametrize("body", [
    "def f(x):\n    if x.abs().max() > 6:\n        x = x.clamp(-6, 6)\n    return x * 2\n",  # a new tensor either way
    "def f(x):\n    x = x + 1\n    if x.max() > 3:\n        x = x / 2\n    return x\n",  # no longer the caller's
    "def f(x):\n    if x.sum() > 0:\n        y = x * 2\n    else:\n        y = x\n    y = y + 1\n    y.add_(1)\n"
    "    return y\n",  # bound again before the in-place step
])
def test_an_alias_that_does_not_escape_is_rewritten(body):
    assert _fix(body).changed


# -- the edge inputs ----------------------------------------------------------------------

def test_shaped_inputs_cut_the_batch_and_the_sequence_consistently():
    from graphmend.verify.inputs import shaped

    x, m, pos = torch.randn(3, 4, 5), torch.ones(3, 4, dtype=torch.bool), torch.arange(4)[None]
    m[2, 3] = False
    (a, k) = shaped("empty_batch", (x, m), {"pos": pos})
    assert a[0].shape == (0, 4, 5) and a[1].shape == (0, 4) and k["pos"].shape == (1, 4)
    (a, _) = shaped("batch_of_one", (x, m), {})
    assert a[0].shape == (1, 4, 5) and a[1].shape == (1, 4)
    (a, _) = shaped("empty_sequence", (x, m), {})
    assert a[0].shape == (3, 0, 5) and a[1].shape == (3, 0)
    # an empty batch padded to its longest sequence: both empty, the positions cut with them
    (a, k) = shaped("empty_batch_and_sequence", (x, m), {"pos": pos})
    assert a[0].shape == (0, 0, 5) and a[1].shape == (0, 0) and k["pos"].shape == (1, 0)
    assert shaped("empty_batch_and_sequence", (torch.randn(3),), {}) is None  # no sequence: empty_batch's
    (a, _) = shaped("full_sequence", (x, m), {})
    assert bool(a[1].all()) and torch.equal(a[0], x)


def test_shaped_inputs_mask_a_whole_row():
    from graphmend.verify.inputs import shaped

    m = torch.ones(2, 4, dtype=torch.bool)
    bias = torch.zeros(2, 4)
    bias[1, 3] = float("-inf")
    (a, _) = shaped("masked_row", (m, bias), {})
    assert not bool(a[0][0].any()) and bool(a[0][1].all())
    assert bool((a[1][0] == float("-inf")).all()) and torch.equal(a[1][1], bias[1])


def test_shaped_inputs_change_the_layout_not_the_values():
    from graphmend.verify.inputs import shaped

    img, tok = torch.randn(2, 3, 4, 4), torch.randn(3, 5)
    (a, _) = shaped("channels_last", (img, tok), {})
    assert a[0].is_contiguous(memory_format=torch.channels_last) and torch.equal(a[0], img)
    (a, _) = shaped("strided", (img, tok), {})
    assert not a[0].is_contiguous() and not a[1].is_contiguous()
    assert torch.equal(a[0], img) and torch.equal(a[1], tok)


def test_shaped_gives_nothing_where_it_changes_nothing():
    from graphmend.verify.inputs import shaped

    x = torch.randn(1, 5)
    assert shaped("batch_of_one", (x,), {}) is None
    assert shaped("channels_last", (x,), {}) is None
    assert shaped("masked_row", (x,), {}) is None


@pytest.mark.slow
def test_verification_runs_the_edge_inputs_on_both_sides(tmp_path):
    """A reshape with ``-1`` in the arm eager code skips on an empty batch: the example and
    its perturbed values never show it; the empty-batch input does."""
    from graphmend.core.config import load_config
    from graphmend.fixing import FixOptions, run_fix

    prog = tmp_path / "head.py"
    prog.write_text(textwrap.dedent("""
        import torch
        from graphmend import Target


        def head(feats):
            if feats.abs().sum() > 1e4:
                out = feats.reshape(feats.shape[0], feats.shape[1], -1).amax(-1)
            else:
                out = feats.mean((2, 3))
            return out


        def mend_target_head():
            torch.manual_seed(0)
            return Target(fn=head, args=(torch.randn(2, 3, 4, 4),))
        """), encoding="utf-8")
    run = run_fix([str(tmp_path)], load_config([str(tmp_path)]), FixOptions(jobs=1))
    fixes = [f for f in run.report.fixes if f.rule == "GM101"]
    assert fixes and fixes[0].status == "rejected", [(f.status, f.reason) for f in fixes]
    assert "empty_batch" in fixes[0].reason and "0 elements" in fixes[0].reason
