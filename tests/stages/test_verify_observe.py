"""The ways a user runs a module beyond calling it (graphmend/verify/modes.py): hooks,
second derivatives, torch.func, replication, torch.compile, and what the outputs alias.
Each pair below differs only in that one way, and its check must see it."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from graphmend.verify.modes import (COMPILE_BACKEND, COMPILED, DOUBLE, EVAL, FUNC_GRAD, HOOKS,  # noqa: E402
                                    HOOKS_FORWARD, REPLICA, TRAIN, VMAP, observer_unusable, replicate, resized, run_call)
from graphmend.verify.records import compare_records  # noqa: E402


_SELF = object()


def _diff(a, b, args, mode, ma=_SELF, mb=_SELF, kwargs=None):
    """The first difference between ``a`` and ``b`` called in ``mode`` (modules: their own)."""
    ra = run_call(a, a if ma is _SELF else ma, args, kwargs or {}, mode, 0)
    rb = run_call(b, b if mb is _SELF else mb, args, kwargs or {}, mode, 0)
    return compare_records(ra, rb, f"{mode} on input example", None)


class _Experts(nn.Module):
    """Two experts; ``twice``: the second is called once more and its first result kept
    (the output, gradients and state are the same; only a hook sees the extra call)."""

    def __init__(self, twice: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.e0, self.e1 = nn.Linear(4, 4), nn.Linear(4, 4)
        self.twice = twice

    def forward(self, x):
        h = self.e0(x)
        out = self.e1(h)
        if self.twice:
            self.e1(h.detach())  # a recomputation whose result is dropped
        return out


def test_a_module_called_more_often_is_seen_by_the_hooks_only():
    x = torch.randn(3, 4)
    a, b = _Experts(), _Experts(twice=True)
    assert _diff(a, b, (x,), TRAIN) is None  # nothing else shows it
    why = _diff(a, b, (x,), HOOKS)
    assert why == "hooks on input example: module hooks: forward of e1 ran 2 times, originally 1"


def test_hooks_see_the_order_and_backward_counts():
    class Order(nn.Module):
        def __init__(self, swap):
            super().__init__()
            torch.manual_seed(0)
            self.p, self.q = nn.Linear(4, 4), nn.Linear(4, 4)
            self.swap = swap

        def forward(self, x):
            if self.swap:
                b = self.q(x)
                a = self.p(x)
            else:
                a = self.p(x)
                b = self.q(x)
            return a + b

    x = torch.randn(2, 4)
    assert _diff(Order(False), Order(True), (x,), TRAIN) is None
    assert "forward call 2 is q, originally p" in _diff(Order(False), Order(True), (x,), HOOKS)
    m = Order(False)
    rec = run_call(m, m, (x,), {}, HOOKS, 0)
    assert rec["calls"][:3] == [("forward", "(root)"), ("forward", "p"), ("forward", "q")]
    assert sorted(n for p, n in rec["calls"] if p == "backward") == ["(root)", "p", "q"]


class _Penalty(nn.Module):
    """``detached_grad``: the same values through a function with no double backward."""

    def __init__(self, detached_grad: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.detached_grad = detached_grad

    def forward(self, x):
        h = self.fc(x)
        return _OnceDifferentiableTanh.apply(h) if self.detached_grad else torch.tanh(h)


class _OnceDifferentiableTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h):
        out = torch.tanh(h)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * (1 - out * out)


def test_a_lost_second_derivative_is_a_difference():
    x = torch.randn(3, 4)
    a, b = _Penalty(), _Penalty(detached_grad=True)
    assert _diff(a, b, (x,), TRAIN) is None  # first-order gradients agree
    why = _diff(a, b, (x,), DOUBLE)
    assert why is not None and why.startswith("double_backward on input example: "), why
    assert "gradient of input 0: values differ" in why  # the penalty's gradient lost its tanh'' term
    rec = run_call(a, a, (x,), {}, DOUBLE, 0)
    assert rec["second_order"] and len(rec["grads_first"]) == 3  # the input, weight and bias
    assert observer_unusable(rec, DOUBLE, a, True) is None


def test_no_second_derivative_in_the_original_skips_the_check():
    lin = nn.Linear(4, 1)

    def linear_in_x(x):  # d/dx is the weight: no x in it, but it depends on the weight
        return lin(x)

    rec = run_call(lambda x: (x * 2.0).sum(), None, (torch.ones(3),), {}, DOUBLE, 0)
    assert "no second derivative" in observer_unusable(rec, DOUBLE, None, True)
    rec = run_call(linear_in_x, lin, (torch.ones(2, 4),), {}, DOUBLE, 0)
    assert observer_unusable(rec, DOUBLE, lin, True) is None


class _Func(nn.Module):
    """``ctx_function``: the same values through an autograd.Function torch.func cannot use."""

    def __init__(self, ctx_function: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.ctx_function = ctx_function

    def forward(self, x):
        h = self.fc(x)
        return _OldStyleRelu.apply(h) if self.ctx_function else torch.relu(h)


class _OldStyleRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h):  # ctx in forward (no setup_context): no torch.func support
        ctx.save_for_backward(h)
        return h.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (h,) = ctx.saved_tensors
        return g * (h > 0)


def test_torch_func_grad_failing_is_a_difference():
    x = torch.randn(3, 4)
    a, b = _Func(), _Func(ctx_function=True)
    assert _diff(a, b, (x,), TRAIN) is None
    why = _diff(a, b, (x,), FUNC_GRAD)
    assert why is not None and "original returned, patched raised" in why, why
    rec = run_call(a, a, (x,), {}, FUNC_GRAD, 0)
    assert set(rec["out"]["parameters"]) == {"fc.weight", "fc.bias"} and len(rec["out"]["inputs"]) == 1


def test_vmap_failing_is_a_difference_and_an_original_that_fails_it_is_skipped():
    x = torch.randn(3, 4)
    a, b = _Func(), _Func(ctx_function=True)
    why = _diff(a, b, (x,), VMAP)
    assert why is not None and "patched raised" in why, why
    rec = run_call(a, a, (x,), {}, VMAP, 0)
    assert rec["status"] == "ok" and tuple(rec["out"].shape) == (3, 1, 4)

    def branchy(x):
        return x * 2 if x.sum() > 0 else x

    rec = run_call(branchy, None, (x,), {}, VMAP, 0)
    assert observer_unusable(rec, VMAP, None, True).startswith("the original raises under torch.func.vmap: ")


class _Internals(nn.Module):
    """``internals``: reads its layer's weight from ``_parameters``, as code reaching module
    internals does; a replica keeps its parameters elsewhere (the same values otherwise)."""

    def __init__(self, internals: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.internals = internals

    def forward(self, x):
        if self.internals:
            return torch.nn.functional.linear(x, self.fc._parameters["weight"], self.fc.bias)
        return self.fc(x)


def test_a_program_a_replica_cannot_run_is_a_difference():
    x = torch.randn(3, 4)
    a, b = _Internals(), _Internals(internals=True)
    for mode in (EVAL, TRAIN, FUNC_GRAD):
        assert _diff(a, b, (x,), mode) is None, mode
    assert "forward of fc ran 0 times" in _diff(a, b, (x,), HOOKS)  # (the layer's hooks are bypassed too)
    why = _diff(a, b, (x,), REPLICA)
    assert why == "replicate on input example: original returned, patched raised KeyError: 'weight'", why
    rec = run_call(a, a, (x,), {}, REPLICA, 0)
    assert rec["grads_param"]["fc.weight"] is not None  # through the non-leaf copies


def test_replicate_makes_non_leaf_copies_and_keeps_ties():
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    m[1].weight = m[0].weight
    r = replicate(m)
    assert r is not m and r[0] is not m[0]
    assert not r[0].weight.is_leaf and r[0].weight is r[1].weight
    assert list(r.parameters()) == []  # as torch's replicas: they hold no parameters themselves
    r(torch.ones(1, 2)).sum().backward()
    assert m[0].weight.grad is not None


class _CompileAware(nn.Module):
    def __init__(self, differs: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.differs = differs

    def forward(self, x):
        h = self.fc(x)
        if self.differs and torch.compiler.is_compiling():
            return h * 2
        return h


def test_a_program_that_differs_under_compile_is_a_difference_on_either_shape():
    x = torch.randn(3, 4)
    a, b = _CompileAware(), _CompileAware(differs=True)
    assert _diff(a, b, (x,), TRAIN) is None
    torch._dynamo.reset()
    good, bad = torch.compile(copy.deepcopy(a), backend=COMPILE_BACKEND), torch.compile(b, backend=COMPILE_BACKEND)
    grown = resized((x,), {})
    assert grown[2] == 4 and grown[0][0].shape == (4, 4) and torch.equal(grown[0][0][3], x[0])
    for args in ((x,), grown[0]):  # the second shape recompiles
        assert _diff(a, good, args, COMPILED, ma=a, mb=good._orig_mod) is None
        why = _diff(a, bad, args, COMPILED, ma=a, mb=b)
        assert why is not None and "output" in why and "values differ" in why, why
    torch._dynamo.reset()


def test_identity_of_an_output_with_an_input_is_compared():
    x = torch.randn(3)
    same = lambda x: x  # noqa: E731
    fresh = lambda x: x.clone()  # noqa: E731
    view = lambda x: x[1:]  # noqa: E731
    copied_view = lambda x: x[1:].clone()  # noqa: E731
    assert _diff(same, fresh, (x,), EVAL, None, None) is not None
    why = _diff(same, fresh, (x,), EVAL, None, None)
    assert why == ("eval on input example: output aliasing: output is a new tensor, "
                   "originally is the caller's args[0]"), why
    assert "views the caller's args[0]" in _diff(view, copied_view, (x,), EVAL, None, None)
    assert _diff(view, view, (x,), EVAL, None, None) is None
    lin = nn.Linear(2, 2)
    assert "is parameter weight" in _diff(lambda x: lin.weight, lambda x: lin.weight * 1, (x,), EVAL, lin, lin)


class _Noisy(nn.Module):
    """Draws from a generator of its own; ``twice``: once more, unused."""

    def __init__(self, twice: bool = False):
        super().__init__()
        self.gen = torch.Generator().manual_seed(7)
        self.twice = twice

    def forward(self, x):
        noise = torch.randn(x.shape, generator=self.gen)
        if self.twice:
            torch.randn(x.shape, generator=self.gen)
        return x + noise


def test_a_module_generator_drawn_twice_is_a_difference():
    x = torch.zeros(2)
    why = _diff(_Noisy(), _Noisy(twice=True), (x,), EVAL)
    assert why == "eval on input example: the state of the module's generator gen after the call differs (drawn differently)"
    assert _diff(_Noisy(), _Noisy(), (x,), EVAL) is None


def test_the_original_side_runs_each_way_once_on_the_example_and_names_the_checks():
    from graphmend import Target
    from graphmend.core.targets import LoadedTarget
    from graphmend.verify.arms import ArmRecorder
    from graphmend.verify.worker import _run_original

    m = _Experts()
    loaded = LoadedTarget(fn=m, args=(torch.randn(2, 4),), kwargs={}, target=Target(fn=m))
    plan, records, skipped = _run_original(loaded, m, [], ArmRecorder(), 0, [])
    assert not skipped, skipped
    for mode in (HOOKS, FUNC_GRAD, VMAP, REPLICA):  # twice: the repeat that tells a non-deterministic one
        assert [name for mo, name in plan if mo == mode] == ["example"] * 2, mode
    # the double backward: twice on the example, then once on every other input
    assert [name for mo, name in plan if mo == DOUBLE] == ["example", "example", "negated", "random"]
    assert [name for mo, name in plan if mo == COMPILED] == ["example", "example, batch 3"]
    grown = [r for r in records if r["mode"] == COMPILED][1]
    assert grown["args"][0].shape == (3, 4)
    # the second derivative in float64, after the float64 records: float32 rounding, which it
    # amplifies, is not a difference
    double = next(i for i, (mo, _) in enumerate(plan) if mo == DOUBLE)
    assert plan[double - 1][0] == "float64" and records[double]["grads_first"][0].dtype == torch.float64


class _ClipOrRelu(nn.Module):
    """A conv block whose hot maps are clipped, others rectified; ``where``: the branch as
    ``torch.where`` (what GM101 writes)."""

    def __init__(self, where: bool):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.where = where

    def forward(self, x):
        f = self.bn(self.conv(x))
        if self.where:
            return torch.where(f.abs().amax() > 4.0, f.clamp(-4.0, 4.0), f.relu())
        return f.clamp(-4.0, 4.0) if f.abs().amax() > 4.0 else f.relu()


def test_the_double_backward_runs_on_every_input_the_original_serves():
    """A second derivative differs only on the arm an input takes: clamp's backward reads no
    operand, relu's reads its output, so the gradient penalty of the torch.where form reaches
    the norm's bias (zeros) where the clamped original's never does (None). The example
    takes the relu arm; the input that takes the other must be run too, and one the original
    cannot serve (it raises there) is left out."""
    from graphmend import Target
    from graphmend.core.targets import LoadedTarget
    from graphmend.verify.arms import ArmRecorder
    from graphmend.verify.worker import _run_original

    x = torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    hot = x.clone()
    hot[0, 0, 0, 0] = 500.0
    assert _diff(_ClipOrRelu(False), _ClipOrRelu(True), (x,), DOUBLE) is None  # the example shows nothing
    why = _diff(_ClipOrRelu(False), _ClipOrRelu(True), (hot,), DOUBLE)
    assert why == "double_backward on input example: the gradient of parameter bn.bias: NoneType vs Tensor"

    m = _ClipOrRelu(False)
    wrong = torch.randn(2, 5, 6, 6)  # five channels: the original raises on it
    loaded = LoadedTarget(fn=m, args=(x,), kwargs={}, target=Target(fn=m, inputs=[((hot,), {}), ((wrong,), {})]))
    plan, records, skipped = _run_original(loaded, m, [], ArmRecorder(), 0, [])
    assert DOUBLE not in skipped, skipped
    # input_1, which the original cannot serve, is not compared
    assert [name for mo, name in plan if mo == DOUBLE] == ["example", "example", "input_0", "negated", "random"]


def test_a_way_the_original_cannot_run_is_skipped_with_its_reason():
    from graphmend import Target
    from graphmend.core.targets import LoadedTarget
    from graphmend.verify.arms import ArmRecorder
    from graphmend.verify.worker import _run_original

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            h = self.fc(x)
            return h * 2 if h.sum() > 0 else h  # vmap cannot take the branch

    m = Branchy()
    loaded = LoadedTarget(fn=m, args=(torch.randn(2, 4),), kwargs={}, target=Target(fn=m))
    _, _, skipped = _run_original(loaded, m, [], ArmRecorder(), 0, [])
    assert set(skipped) == {VMAP}
    assert skipped[VMAP].startswith("the original raises under torch.func.vmap: ")


class _Arms(nn.Module):
    """``cond``: the branch as ``torch.cond`` (what GM101 writes), else the Python ``if``."""

    def __init__(self, cond: bool):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.cond = cond

    def forward(self, x):
        if self.cond:
            return torch.cond(x.sum() > 0, lambda x: torch.tanh(self.a(x)), lambda x: self.b(x), (x,))
        return torch.tanh(self.a(x)) if x.sum() > 0 else self.b(x)


def test_torch_cond_arms_refuse_hooks_and_lose_second_derivatives():
    x = torch.ones(2, 4)
    assert _diff(_Arms(False), _Arms(True), (x,), EVAL) is None
    # a hook on a module inside an arm: torch.cond refuses to trace it
    assert "original returned, patched raised UncapturedHigherOrderOpError" in _diff(_Arms(False), _Arms(True), (x,),
                                                                                      HOOKS)
    assert _diff(_Arms(False), _Arms(True), (x,), DOUBLE).endswith(
        "the gradient no longer depends on the inputs or parameters (no second derivative)")


def test_a_target_without_a_module_skips_the_module_checks_saying_so():
    def plain(x):
        return x * 2.0

    x = torch.randn(2, 3)
    for mode, why in ((HOOKS, "the target has no module to hook"), (REPLICA, "the target has no module to replicate")):
        rec = run_call(plain, None, (x,), {}, mode, 0)
        assert observer_unusable(rec, mode, None, True) == why
    rec = run_call(plain, None, (torch.tensor(1.0),), {}, VMAP, 0)
    assert observer_unusable(rec, VMAP, None, True) == "no input has a batch dimension"


class _InPlaceOut(nn.Module):
    """A layer whose output is written in place by its parent (full backward hooks refuse
    that); ``twice``: the layer is called once more, its result dropped."""

    def __init__(self, twice: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.twice = twice

    def forward(self, x):
        h = self.fc(x)
        h.mul_(2)
        if self.twice:
            self.fc(x)
        return h


def test_forward_hooks_alone_where_backward_hooks_break_the_original():
    from graphmend import Target
    from graphmend.core.targets import LoadedTarget
    from graphmend.verify.arms import ArmRecorder
    from graphmend.verify.worker import _run_original

    x = torch.randn(2, 4)
    m = _InPlaceOut()
    loaded = LoadedTarget(fn=m, args=(x,), kwargs={}, target=Target(fn=m))
    plan, _, skipped = _run_original(loaded, m, [], ArmRecorder(), 0, [])
    assert skipped[HOOKS].startswith("the original raises under module hooks: RuntimeError: Output 0 of "), skipped
    assert HOOKS_FORWARD not in skipped and (HOOKS_FORWARD, "example") in plan
    why = _diff(_InPlaceOut(), _InPlaceOut(twice=True), (x,), HOOKS_FORWARD)
    assert why.endswith("module hooks: forward of fc ran 2 times, originally 1"), why


def test_a_warning_or_log_record_lost_or_changed_is_a_difference():
    import logging
    import warnings

    log = logging.getLogger("mend.test.said")

    def said(warn: str = "", record: str = ""):
        def f(x):
            if warn:
                warnings.warn(warn, RuntimeWarning)
            if record:
                log.warning(record)
            return x * 2
        return f

    x = (torch.randn(3),)
    assert _diff(said("NaN seen"), said("NaN seen"), x, EVAL, None, None) is None
    assert "warning RuntimeWarning: NaN seen" in _diff(said("NaN seen"), said(), x, EVAL, None, None)
    assert _diff(said(), said(record="big"), x, TRAIN, None, None).endswith(
        "what the original warned and logged: nothing; the patched program: log mend.test.said WARNING: big")
    # an object's address in a message is not a difference
    assert _diff(said(f"at {hex(id(x))}"), said(f"at {hex(id(log))}"), x, EVAL, None, None) is None
    # compiled runs leave messages to the rewrite's documented caveat
    assert _diff(said("kept"), said(), x, COMPILED, None, None) is None


class _Counted(nn.Module):
    """A step counter a user reads off the module, as a Python int."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.count = 0

    def forward(self, x):
        self.count += 1
        return self.proj(x)


class _HeldCounted(nn.Module):
    """The same counter held in a 0-d tensor, behind a property that reads it back."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self._count = torch.tensor(0)

    @property
    def count(self):
        return self._count.item()

    def forward(self, x):
        self._count = self._count + 1
        return self.proj(x)


class _StaleCounted(_HeldCounted):
    """... behind a property that does not."""

    @property
    def count(self):
        return 0


def test_a_number_read_off_the_module_after_the_call_is_compared():
    x = (torch.randn(2, 4),)
    made = []
    for cls in (_Counted, _HeldCounted, _Counted, _StaleCounted):
        torch.manual_seed(0)
        made.append(cls())
    assert _diff(made[0], made[1], x, EVAL) is None  # the property reads what the int held
    why = _diff(made[2], made[3], x, EVAL)
    assert why is not None and "attribute count went unchanged in the call, originally 0 -> 1" in why, why


class _KeepsDeltas(nn.Module):
    """Caches a tensor it computed on itself, as Qwen3-VL keeps ``rope_deltas``: a call under
    torch.func leaves a functorch wrapper there, with no storage."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.deltas = None

    def forward(self, x):
        h = self.fc(x)
        self.deltas = h.sum(-1)
        return h


def test_a_wrapper_a_transform_left_on_the_module_does_not_stop_the_original_side(tmp_path):
    from graphmend import Target
    from graphmend.core.targets import LoadedTarget
    from graphmend.verify.arms import ArmRecorder
    from graphmend.verify.worker import _run_original, _savable

    m = _KeepsDeltas()
    loaded = LoadedTarget(fn=m, args=(torch.randn(2, 4),), kwargs={}, target=Target(fn=m))
    plan, records, skipped = _run_original(loaded, m, [], ArmRecorder(), 0, [])
    assert FUNC_GRAD in {mo for mo, _ in plan} and FUNC_GRAD not in skipped, skipped
    with pytest.raises(NotImplementedError, match="Cannot access storage"):  # in a snapshot compiled runs start from
        torch.save(records, tmp_path / "raw.pt")
    torch.save({"plan": plan, "records": _savable(records)}, tmp_path / "state.pt")  # what the worker keeps
