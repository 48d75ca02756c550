"""Properties over shapes and layouts, not only values.

Hypothesis draws a batch size (0 and 1 included), a sequence length (0 included), a mask
(all kept, all masked, one row all masked, random), a memory layout (contiguous,
``channels_last``, a transposed view, a strided slice) and the values.

* ``test_verified_where_fixes_agree_on_drawn_shapes``: a tensor branch over such inputs,
  its arms drawn from operations that are total only on some shapes (``softmax`` of a row
  all -inf, ``amax`` / ``x[:, 0]`` / ``mean`` of an empty dim, unbiased ``var`` of one
  sample, ``view`` of strides it cannot follow), is rewritten by ``rewrites.fixes`` and put
  through what verification decides on, in process (no worker, no compile): the example, its
  value variants and its edge shapes (``graphmend.verify.inputs``) compared by
  ``graphmend.verify.modes`` in eval and in train with gradients, and both arms run. A fix
  that passes must then agree with the original on every drawn input: the same values and
  gradients (NaN-aware), the same exception type where the original raises.
* ``test_total_table_holds_on_drawn_shapes``: every operation ``rewrites/fixes/total.py``
  lists, on a drawn shape and layout, is total (no raise, a finite value, a finite
  derivative under the zero gradient ``where`` sends an unselected arm) wherever its
  ``Totality`` record does not name that shape.
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from test_adversarial_properties import _fn, rewrite  # one cache of rewritten programs
from rewrites.fixes.total import OPS

torch = pytest.importorskip("torch")

from graphmend.verify.inputs import VARIANTS, edge_inputs, variant  # noqa: E402
from graphmend.verify.modes import EVAL, TRAIN, run_call  # noqa: E402
from graphmend.verify.records import compare_records  # noqa: E402

settings.register_profile("mend-shapes", max_examples=6, deadline=None, report_multiple_bugs=False,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

# -- programs: a tensor branch over a padded sequence batch, and over an image batch ---------

# x: (batch, seq, dim), mask: (batch, seq) True where kept; arms by the shape they return
SEQ_CONDITIONS = ["mask.any()", "mask.all()", "x.abs().mean() > 0.8", "(mask.sum(-1) > 0).all()"]
SEQ_ARMS = {
    "tokens": ["x * 2", "x.clamp(-1.0, 1.0)", "x.softmax(-1)", "(x + bias).softmax(-1)", "(x + bias).log_softmax(-1)",
               "x.relu() + 1"],
    "pooled": ["x.mean(1)", "x.amax(1)", "x.sum(1)", "x[:, 0] * 2", "x.var(1)", "x.logsumexp(1)",
               "(x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)"],
    # (arms that compute on the view: one that hands back a view of x is refused for aliasing)
    "flat": ["x.reshape(x.shape[0], -1) * 2", "x.view(x.shape[0], -1) * 2", "x.flatten(1) + 1",
             "x.transpose(1, 2).reshape(x.shape[0], -1) * 2"],
}
SEQ_PRELUDE = '    bias = torch.zeros_like(x).masked_fill(~mask[..., None], float("-inf"))\n'

# x: (batch, channels, h, w)
IMG_CONDITIONS = ["x.mean() > 0", "x.abs().amax() > 1.5"]
IMG_ARMS = {
    "map": ["x * 2", "x.relu()", "x.clamp(-1.0, 1.0)", "x.softmax(1)"],
    "flat": ["x.view(x.shape[0], -1) * 2", "x.flatten(1) + 1", "x.reshape(x.shape[0], -1) * 2"],
    "pooled": ["x.mean((2, 3))", "x.amax((2, 3))", "x.flatten(2).max(-1).values", "x[:, :, 0, 0] * 2"],
}


def program(family: str, cond: str, a: str, b: str) -> str:
    params = "x, mask" if family == "seq" else "x"
    prelude = SEQ_PRELUDE if family == "seq" else ""
    return (f"import torch\n\n\ndef f({params}):\n{prelude}    if {cond}:\n        y = {a}\n    else:\n"
            f"        y = {b}\n    return y\n")




def _example(family: str) -> tuple:
    g = torch.Generator().manual_seed(0)
    if family == "seq":
        return torch.randn(3, 4, 2, generator=g), torch.ones(3, 4, dtype=torch.bool)
    return (torch.randn(2, 3, 2, 2, generator=g),)


def _took(src: str, cond: str, args: tuple):
    """Which way the condition goes on ``args`` (None where it raises)."""
    head = src.split("    if ", 1)[0]
    try:
        return bool(_fn(f"{head}    return bool({cond})\n")(*args))
    except Exception:  # noqa: BLE001
        return None


def _agree(f_orig, f_new, args: tuple, where: str) -> "str | None":
    """None when the rewrite shows what the original shows on ``args`` in eval and in train
    (outputs, gradients, inputs after the call), else the difference; where the original
    raises, the rewrite must raise the same type."""
    for mode in (EVAL, TRAIN):
        want = run_call(f_orig, None, args, {}, mode, 0)
        got = run_call(f_new, None, args, {}, mode, 0)
        if want["status"] == "raised":
            if got["status"] != "raised" or got["exc"].split(":", 1)[0] != want["exc"].split(":", 1)[0]:
                return f"{where}, {mode}: original raised {want['exc'][:120]}, patched {got.get('exc', 'returned')}"
            continue
        why = compare_records(want, got, f"{where}, {mode}", None)
        if why:
            return why
    return None


@functools.lru_cache(maxsize=None)
def verified(src: str, new: str, family: str, cond: str) -> bool:
    """What verification decides on, in process, as graphmend/verify/worker.py picks its
    inputs: the example and its edge shapes (with value variants in their layout
    until both arms met each), then value variants (at least MIN_VARIANTS in
    all, more only while an arm has not run); every one agrees in eval and train, and the
    condition went both ways on them."""
    from graphmend.verify.worker import MIN_VARIANTS

    example = _example(family)
    candidates = [example]

    class Window:  # the arms of the one condition, as verify/worker.py's _Window reads the recorder
        def __init__(self):
            self.sides, self.all = [], [_took(src, cond, example)]

        def start(self):
            self.sides = []

        def one_way(self):
            return len({*self.sides} - {None}) == 1

        def never_flipped(self):
            return len({*self.all} - {None}) == 1

    window = Window()
    for _, edge, _ in edge_inputs(example, {}, 0, window):
        candidates.append(edge)
        window.sides.append(_took(src, cond, edge))
        window.all.append(window.sides[-1])
    took = {_took(src, cond, a) for a in candidates}
    for i, name in enumerate(VARIANTS[1:]):
        if i >= MIN_VARIANTS - 1 and {True, False} <= took:
            break
        candidates.append(variant(name, example, {})[0])
        took.add(_took(src, cond, candidates[-1]))
    if not {True, False} <= took:
        return False  # an arm never ran: unverified
    f_orig, f_new = _fn(src), _fn(new)
    return all(_agree(f_orig, f_new, a, "verification") is None for a in candidates)


# -- drawn inputs ----------------------------------------------------------------------------

LAYOUTS = ["contiguous", "channels_last", "transposed", "sliced"]
MASKS = ["all_kept", "all_masked", "one_row_masked", "random"]


@st.composite
def seq_inputs(draw):
    b, t, d = draw(st.sampled_from([0, 1, 2, 3])), draw(st.sampled_from([0, 1, 3])), draw(st.sampled_from([1, 2]))
    layout, masking = draw(st.sampled_from(LAYOUTS)), draw(st.sampled_from(MASKS))
    scale, seed = draw(st.sampled_from([0.1, 1.0, 4.0])), draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    if layout == "transposed":  # (b, d, t) storage seen as (b, t, d)
        x = torch.randn(b, d, t, generator=g).transpose(1, 2)
    elif layout == "sliced":  # every other element of a wider buffer
        x = torch.randn(b, t, 2 * d, generator=g)[:, :, ::2]
    else:
        x = torch.randn(b, t, d, generator=g)
    mask = {"all_kept": torch.ones(b, t, dtype=torch.bool), "all_masked": torch.zeros(b, t, dtype=torch.bool),
            "random": torch.rand(b, t, generator=g) > 0.5}.get(masking)
    if mask is None:  # one row all masked, the others kept
        mask = torch.ones(b, t, dtype=torch.bool)
        if b:
            mask[0] = False
    return (x * scale, mask), f"x {tuple(x.shape)} stride {x.stride()} ({layout}), mask {masking}, scale {scale}"


@st.composite
def img_inputs(draw):
    b, c = draw(st.sampled_from([0, 1, 2])), draw(st.sampled_from([1, 3]))
    h, w = draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([1, 2]))
    layout = draw(st.sampled_from(LAYOUTS))
    scale, seed = draw(st.sampled_from([0.1, 1.0, 4.0])), draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, c, h, w, generator=g)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "transposed":  # h and w swapped in storage
        x = x.transpose(2, 3).contiguous().transpose(2, 3)
    elif layout == "sliced":
        x = torch.randn(b, c, h, 2 * w, generator=g)[..., ::2]
    return (x * scale,), f"x {tuple(x.shape)} stride {x.stride()} ({layout}), scale {scale}"


def _program(draw_family, conditions, arms):
    group = st.sampled_from(sorted(arms))
    return group.flatmap(lambda g: st.tuples(st.just(draw_family), st.sampled_from(conditions),
                                             st.sampled_from(arms[g]), st.sampled_from(arms[g])))


SEQ_PROGRAMS = _program("seq", SEQ_CONDITIONS, SEQ_ARMS)
IMG_PROGRAMS = _program("img", IMG_CONDITIONS, IMG_ARMS)


def check(prog: tuple, drawn: list) -> None:
    family, cond, a, b = prog
    src = program(family, cond, a, b)
    r = rewrite(src)
    assert r.error is None, (src, r.error)
    assume(r.changed)  # a refusal holds trivially: draw programs the rewrite takes
    if not verified(src, r.new_source, family, cond):
        return  # not verified: nothing is written, nothing to hold
    f_orig, f_new = _fn(src), _fn(r.new_source)
    for args, label in drawn:
        why = _agree(f_orig, f_new, args, label)
        assert why is None, f"a verified fix differs on a drawn input: {why}\n--- original\n{src}--- rewritten\n{r.new_source}"


@settings(settings.get_profile("mend-shapes"))
@given(prog=SEQ_PROGRAMS, drawn=st.lists(seq_inputs(), min_size=4, max_size=4))
def test_verified_where_fixes_agree_on_drawn_sequence_shapes(prog, drawn):
    check(prog, drawn)


@settings(settings.get_profile("mend-shapes"))
@given(prog=IMG_PROGRAMS, drawn=st.lists(img_inputs(), min_size=4, max_size=4))
def test_verified_where_fixes_agree_on_drawn_image_layouts(prog, drawn):
    check(prog, drawn)


def test_the_property_is_not_won_by_refusing():
    """Shape-sensitive arms are rewritten and some pass verification (the properties above
    compare something), and verification's edges refuse the ones whose arm is not total on
    them (an empty sequence indexed or reduced by amax, an empty batch reshaped)."""
    def outcome(family, cond, a, b):
        src = program(family, cond, a, b)
        r = rewrite(src)
        return r.changed and verified(src, r.new_source, family, cond)

    assert outcome("seq", "x.abs().mean() > 0.8", "x.mean(1)", "x.sum(1)")
    assert outcome("seq", "x.abs().mean() > 0.8", "x.softmax(-1)", "x * 2")
    assert outcome("img", "x.mean() > 0", "x * 2", "x.clamp(-1.0, 1.0)")
    # an arm that returns a view of the caller's input: torch.where's new tensor is no view
    assert not outcome("img", "x.mean() > 0", "x.flatten(1)", "x.reshape(x.shape[0], -1)")
    assert not outcome("seq", "mask.any()", "x[:, 0]", "x.mean(1)")  # x[:, 0] of an empty sequence raises
    assert not outcome("seq", "mask.any()", "x.amax(1)", "x.mean(1)")  # amax over an empty sequence raises
    # an empty batch padded to an empty sequence: the condition holds vacuously over no rows,
    # the original takes the mean, and torch.where's amax over the empty sequence raises
    assert not outcome("seq", "(mask.sum(-1) > 0).all()", "x.mean(1)", "x.amax(1)")
    # a view strided maps cannot follow: written reshape, it returns where the original, taking
    # that arm on such a map, raises; the strided edge negated takes that arm and refuses it,
    # whichever arm the example takes
    for cond in ("x.mean() < 0", "x.mean() > 0"):
        assert not outcome("img", cond, "x.view(x.shape[0], x.shape[1], x.shape[2] * x.shape[3]).sum(-1)",
                           "x.sum((2, 3)) * 2")
        assert not outcome("img", cond, "x.flatten(1) + 1", "x.view(x.shape[0], -1) * 2")
    # the same on a condition on a mask: the strided edge's negation inverts the mask too, so the view arm
    # meets the transposed layout it raises on
    for a, b in (("x.reshape(x.shape[0], -1) * 2", "x.view(x.shape[0], -1) * 2"),
                 ("x.view(x.shape[0], -1) * 2", "x.reshape(x.shape[0], -1) * 2")):
        assert not outcome("seq", "mask.any()", a, b)
    # (an empty batch: reshape(0, -1) raises where the original's other arm ran)
    assert not outcome("img", "x.mean() > 0", "x.view(x.shape[0], -1) * 2", "x.flatten(1) + 1")


# -- the totality table, on drawn shapes -----------------------------------------------------

# (imported lazily: the table's own test module holds a recipe per operation)
def _recipes():
    from test_total_table import NO_OPERAND, RECIPES, _total_on

    return RECIPES, _total_on, sorted(set(OPS) - NO_OPERAND)


@st.composite
def operand(draw):
    """A 2-D float operand and the edges it has: (x, empty, one, strided, masked_row)."""
    rows, cols = draw(st.sampled_from([0, 1, 2, 3])), draw(st.sampled_from([0, 1, 2, 4]))
    layout, masked = draw(st.sampled_from(["contiguous", "transposed", "sliced"])), draw(st.booleans())
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    if layout == "transposed":
        x = torch.randn(cols, rows, generator=g).t()
    elif layout == "sliced":
        x = torch.randn(rows, 2 * cols, generator=g)[:, ::2]
    else:
        x = torch.randn(rows, cols, generator=g)
    if masked and rows and cols:
        x = x.clone() if layout == "contiguous" else x
        x[0] = float("-inf")  # a row all masked (in place: the layout stays)
    strided = x.numel() > 1 and not x.is_contiguous()
    return x, x.numel() == 0, rows == 1, strided, masked and rows > 0 and cols > 0


@settings(settings.get_profile("mend-shapes"), max_examples=40)
@given(data=st.data())
def test_total_table_holds_on_drawn_shapes(data):
    recipes, total_on, names = _recipes()
    name = data.draw(st.sampled_from(names), label="operation")
    x, empty, one, strided, masked = data.draw(operand(), label="operand")
    rec = OPS[name]
    claimed = not (empty and rec.empty or one and rec.one or strided and rec.layout or masked and rec.masked_row)
    if not claimed or masked:
        # a row all -inf is NaN through most operations (-inf - -inf): the table claims only
        # that the masked_row ones are NaN there, which the fixed test checks
        return
    if not total_on(recipes[name], torch.randn(2, 4))[0]:
        return  # the recipe needs another operand shape (a 4-D interpolate, a square trace)
    ok, why = total_on(recipes[name], x)
    if not ok and why.startswith("raises") and not empty:
        # the recipe's own shape demand (chunk of a width 1, a 2x2 kron, a narrow to 2 of a
        # width 1), not the table's claim: it raises on that width in a contiguous batch of
        # two as well
        ok = not total_on(recipes[name], torch.randn(max(x.shape[0], 2), *x.shape[1:]))[0]
    assert ok, f"{name} on {tuple(x.shape)} stride {x.stride()}: {why}, but the table claims it total there ({rec})"
