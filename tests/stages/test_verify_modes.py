"""The behaviour records verification compares (graphmend/verify/modes.py), in process:
each check must see the difference a user would see, and only that."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from graphmend.core.modes import module_of  # noqa: E402
from graphmend.verify.modes import (AUTOCAST, AUTOCAST_TRAIN, BF16, EVAL, TRAIN, run_call,  # noqa: E402
                                    train_unusable)
from graphmend.verify.records import compare_records  # noqa: E402


def _diff(a, b, args, mode, module_a=None, module_b=None, seed=0):
    ra = run_call(a, module_a if module_a is not None else module_of(a), args, {}, mode, seed)
    rb = run_call(b, module_b if module_b is not None else module_of(b), args, {}, mode, seed)
    return compare_records(ra, rb, f"{mode} on input example", None)


def branch_sqrt(h):
    if (h > 0).all():
        return torch.sqrt(h)
    return h * 0.5


def where_sqrt(h):
    return torch.where((h > 0).all(), torch.sqrt(h), h * 0.5)


def test_nan_gradient_through_where_is_a_difference_in_train_mode_only():
    x = torch.tensor([1.0, -2.0, 3.0])
    assert _diff(branch_sqrt, where_sqrt, (x,), EVAL) is None  # forward identical
    why = _diff(branch_sqrt, where_sqrt, (x,), TRAIN)
    assert why is not None and "gradient of input 0" in why and "NaN" in why and "patched" in why


def test_same_program_agrees_in_every_mode():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4))
    x = torch.randn(3, 4)
    for mode in (EVAL, TRAIN, AUTOCAST):
        a, b = _clone_pair(m)
        assert _diff(a, b, (x,), mode) is None, mode


def _clone_pair(m):
    import copy

    return copy.deepcopy(m), copy.deepcopy(m)


class _Cond(nn.Module):
    def __init__(self, always: bool):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.norm = nn.BatchNorm1d(4)
        self.always = always

    def forward(self, x):
        h = self.fc(x)
        n = self.norm(h) if (self.always or h.sum() > 1e9) else h  # the rewrite ran the arm always
        return torch.where(h.sum() > 1e9, n, h) if self.always else n


def test_module_state_running_stats_are_compared():
    x = torch.randn(5, 4)
    why = _diff(_Cond(False), _Cond(True), (x,), TRAIN)
    assert why is not None and ("buffer norm.running_mean" in why or "gradient of parameter norm" in why), why


def test_rng_stream_is_compared():
    def one(x):
        return F.dropout(x, 0.5, training=True) if x.sum() > 0 else x

    def both(x):
        return torch.where(x.sum() > 0, F.dropout(x, 0.5, training=True), F.dropout(x, 0.1, training=True) * 0 + x)

    x = -torch.ones(8)  # the dropout arm is not taken: outputs equal, random numbers drawn anyway
    why = _diff(one, both, (x,), EVAL)
    assert why is not None and "RNG state" in why


def test_caller_inputs_mutated_is_a_difference():
    def pure(x):
        return F.relu(x)

    def mutates(x):
        return F.relu(x, inplace=True)

    x = torch.tensor([-1.0, 2.0])
    why = _diff(pure, mutates, (x,), EVAL)
    assert why is not None and "the caller's inputs" in why
    assert x.tolist() == [-1.0, 2.0]  # the record ran on a copy: the test's own tensor is untouched


def test_exception_type_and_message_are_compared():
    def value_error(x):
        if (x < 0).any():
            raise ValueError("negative input")
        return x

    def runtime_error(x):
        if (x < 0).any():
            raise RuntimeError("negative input")
        return x

    def other_message(x):
        if (x < 0).any():
            raise ValueError("bad input")
        return x

    x = -torch.ones(2)
    assert _diff(value_error, value_error, (x,), EVAL) is None
    why = _diff(value_error, runtime_error, (x,), EVAL)
    assert "original raised ValueError: negative input, patched raised RuntimeError" in why
    assert "bad input" in _diff(value_error, other_message, (x,), EVAL)


def test_detached_scalar_versus_attached_tensor_differs_in_gradients():
    w = nn.Linear(3, 3)

    def item(x):
        h = w(x)
        return h / h.abs().max().item()

    def tensor(x):
        h = w(x)
        return h / h.abs().max()

    x = torch.randn(2, 3)
    assert _diff(item, tensor, (x,), EVAL) is None
    assert "gradient" in _diff(item, tensor, (x,), TRAIN, module_a=w, module_b=w)


def test_none_gradient_versus_zeros_differs():
    def ignores(x, y):
        return x * 2

    def zero_uses(x, y):
        return x * 2 + y * 0

    why = _diff(ignores, zero_uses, (torch.ones(2), torch.ones(2)), TRAIN)
    assert why is not None and "gradient of input 1" in why and "NoneType vs Tensor" in why


def test_autocast_dtype_difference_is_seen():
    lin = nn.Linear(4, 4)

    def native(x):
        return lin(x)

    def upcast(x):
        return lin(x).float()

    x = torch.randn(2, 4)
    assert _diff(native, upcast, (x,), EVAL) is None
    why = _diff(native, upcast, (x,), AUTOCAST, module_a=lin, module_b=lin)
    assert why is not None and "bfloat16 tensor" in why and "float32 tensor" in why


def test_autocast_float32_outputs_compare_at_the_autocast_precision():
    lin = nn.Linear(4, 4)

    def host_scale(x):  # a scale taken to the host exactly, as .item() does
        h = lin(x)
        return h.float() * (3.0 / h.abs().max().item())

    def device_scale(x):  # the same scale kept a (bf16) tensor: rounded to bf16
        h = lin(x)
        return h.float() * (3.0 / h.abs().max())

    x = torch.randn(2, 4) * 7
    assert _diff(host_scale, device_scale, (x,), AUTOCAST, module_a=lin, module_b=lin) is None
    assert _diff(host_scale, lambda x: host_scale(x) * 1.1, (x,), AUTOCAST, module_a=lin, module_b=lin)


class _AmpGrad(nn.Module):
    """The same values everywhere; under autocast its gradient is doubled (a stand-in for a
    region whose backward ignores the autocast its forward ran in)."""

    def __init__(self, double: bool):
        super().__init__()
        torch.manual_seed(0)
        self.fc, self.double = nn.Linear(4, 4), double

    def forward(self, x):
        y = self.fc(x)
        if self.double and torch.is_autocast_enabled("cpu"):
            y = y + (y - y.detach())
        return y


def test_a_gradient_only_mixed_precision_training_shows_is_seen():
    x = torch.randn(3, 4)
    a, b = _AmpGrad(False), _AmpGrad(True)
    for mode in (EVAL, TRAIN, AUTOCAST):  # the other checks cannot see it
        assert _diff(a, b, (x,), mode) is None, mode
    why = _diff(a, b, (x,), AUTOCAST_TRAIN)
    assert why is not None and "gradient" in why, why
    rec = run_call(a, a, (x,), {}, AUTOCAST_TRAIN, 0)
    assert rec["precision"] == "bfloat16" and rec["out"].dtype == torch.bfloat16 and rec["grads_param"]["fc.weight"] is not None
    assert _diff(_AmpGrad(False), _AmpGrad(False), (x,), AUTOCAST_TRAIN) is None


def test_mixed_precision_gradients_compare_at_the_autocast_precision():
    """A scale kept a bfloat16 tensor where the original took it to the host exactly (GM301's
    fix under autocast) rounds the gradients at bfloat16's precision, as it rounds the outputs:
    not a difference; a gradient 10 % off is one."""
    lin = nn.Linear(4, 4)

    def host_scale(x):
        h = lin(x)
        return h * (30.0 / h.abs().max().item())

    def device_scale(x):
        h = lin(x)
        return h * (30.0 / h.abs().max().detach())

    def off(x):
        h = lin(x)
        return h * (30.0 / h.abs().max().item()) * (1 + 0.1 * (h - h.detach()))

    x = torch.randn(3, 4) * 7
    assert _diff(host_scale, device_scale, (x,), AUTOCAST_TRAIN, module_a=lin, module_b=lin) is None
    assert "gradient" in _diff(host_scale, off, (x,), AUTOCAST_TRAIN, module_a=lin, module_b=lin)


def test_mixed_precision_training_runs_once_on_the_example():
    from graphmend.core.targets import LoadedTarget
    from graphmend.verify.arms import ArmRecorder
    from graphmend.verify.worker import _run_original

    m = _AmpGrad(False)
    loaded = LoadedTarget(fn=m, args=(torch.randn(2, 4),), kwargs={}, target=graphmend_target(m))
    plan, _, skipped = _run_original(loaded, m, [], ArmRecorder(), 0, [])
    # the example only (twice: the repeat that tells a non-deterministic original)
    assert [name for mode, name in plan if mode == AUTOCAST_TRAIN] == ["example"] * 2 and not skipped
    assert len({name for _, name in plan}) > 1  # the other inputs ran the other modes


def test_bf16_mode_runs_on_cast_inputs():
    rec = run_call(lambda x: x * 2, None, (torch.ones(2, dtype=torch.bfloat16),), {}, BF16, 0)
    assert rec["status"] == "ok" and rec["out"].dtype == torch.bfloat16


def test_module_modes_are_restored_after_a_train_call():
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)).eval()
    m[1].train()  # a target may keep one submodule in train mode
    run_call(m, m, (torch.ones(1, 2),), {}, TRAIN, 0)
    assert [x.training for x in m.modules()] == [False, False, True]
    assert all(p.grad is None for p in m.parameters())  # gradients do not leak into the next call


def test_train_unusable_says_why():
    def ints(n):
        return n * 2

    rec = run_call(ints, None, (torch.arange(3),), {}, TRAIN, 0)
    assert train_unusable(rec, None, has_leaves=False) == \
        "no parameters and no floating-point input to take gradients of"
    rec = run_call(lambda x: (x > 0).float(), None, (torch.ones(2),), {}, TRAIN, 0)
    assert train_unusable(rec, None, has_leaves=True) == "no floating-point output requires grad"

    class NoTrain(nn.Module):
        def forward(self, x):
            if self.training:  # (pytest rewrites a plain assert's message)
                raise AssertionError("inference only")
            return x

    m = NoTrain()
    rec = run_call(m, m, (torch.ones(2),), {}, TRAIN, 0)
    assert "the original raises in train mode: AssertionError: inference only" == train_unusable(rec, m, True)


def test_half_precision_tolerance_follows_the_tensor_scale():
    from graphmend.verify.compare import compare

    a = torch.tensor([100.0, 0.0], dtype=torch.bfloat16)
    b = torch.tensor([100.0, 0.5], dtype=torch.bfloat16)  # an element cancelled to ~0 in another order
    assert compare(a, b) is None
    assert compare(a, torch.tensor([100.0, 5.0], dtype=torch.bfloat16)) is not None
    assert compare(a.float(), b.float()) is not None  # float32 keeps its element-wise tolerance


_DRAWS = iter(range(10**9))


class _OsSeeded(nn.Module):
    """Reseeds itself from outside in train mode, a new seed every call (Reformer's
    reversible dropout draws one from the OS; a counter makes every draw differ for sure)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if self.training:
            torch.manual_seed(next(_DRAWS))
            h = F.dropout(h, 0.5) + torch.rand(())  # a fresh number on every call
        return h


def test_a_mode_the_original_is_not_deterministic_in_is_skipped_with_the_reason():
    from graphmend.core.targets import LoadedTarget
    from graphmend.verify.arms import ArmRecorder
    from graphmend.verify.worker import _run_original

    m = _OsSeeded().eval()
    loaded = LoadedTarget(fn=m, args=(torch.randn(2, 4),), kwargs={}, target=graphmend_target(m))
    plan, records, skipped = _run_original(loaded, m, [], ArmRecorder(), 0, [])
    assert skipped["train"].startswith("the original is not deterministic in this mode")
    assert "eval" not in skipped and "autocast" not in skipped and "bf16" not in skipped
    assert [mode for mode, name in plan if name == "example"].count("eval") == 2  # run twice to tell
    assert all(r["seed"] == records[0]["seed"] for r in records[:2])


def graphmend_target(fn):
    from graphmend import Target

    return Target(fn=fn)


def test_an_exception_message_the_original_varies_is_compared_by_type():
    from graphmend.core.targets import LoadedTarget
    from graphmend.verify.arms import ArmRecorder
    from graphmend.verify.worker import _run_original

    calls = iter(range(1000))

    def flaky(x):  # a message naming whichever element a parallel kernel met first
        raise IndexError(f"Target {next(calls)} is out of bounds.")

    loaded = LoadedTarget(fn=flaky, args=(torch.ones(2),), kwargs={}, target=graphmend_target(flaky))
    _, records, _ = _run_original(loaded, None, [], ArmRecorder(), 0, [])
    first = records[0]
    assert first["exc_type_only"]
    other = dict(first, exc="IndexError: Target 7 is out of bounds.")
    assert compare_records(first, other, "eval", None) is None
    assert "ValueError" in compare_records(first, dict(first, exc="ValueError: Target 7"), "eval", None)
    steady = dict(first, exc_type_only=False)
    assert compare_records(steady, other, "eval", None) is not None  # a steady message must match exactly
