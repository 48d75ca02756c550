"""Output comparison: nested structures, per-dtype tolerances, exact ints."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

from graphmend.verify.compare import compare, to_plain  # noqa: E402


@dataclass
class Out:
    logits: object
    extra: object = None


def test_nested_equal_and_tolerances():
    a = to_plain((torch.ones(3), {"k": [torch.arange(3)]}, Out(torch.zeros(2))))
    b = to_plain((torch.ones(3) + 1e-7, {"k": [torch.arange(3)]}, Out(torch.zeros(2))))
    assert compare(a, b) is None
    c = to_plain((torch.ones(3) + 1e-3, {"k": [torch.arange(3)]}, Out(torch.zeros(2))))
    assert "values differ" in compare(a, c)
    h = torch.ones(3, dtype=torch.float16)
    assert compare(h, h + 5e-4) is None  # float16 is looser
    assert "values differ" in compare(torch.arange(3), torch.arange(3) + torch.tensor([0, 0, 1]))
    assert "shape" in compare(torch.ones(3), torch.ones(1, 3))
    assert "dtype" in compare(torch.ones(3), torch.ones(3, dtype=torch.float64))
    assert "keys" in compare({"a": 1}, {"b": 1})
    assert compare(torch.tensor([float("nan")]), torch.tensor([float("nan")])) is None


def test_target_tolerance_is_read_one_way_in_every_form():
    """``Target.tolerance`` as the bench documents it ({"rtol", "atol"}, or per dtype) and as
    a per-dtype (rtol, atol) pair: verification and the bench read it through one function."""
    a, b = torch.ones(3), torch.ones(3) + 1e-3
    assert compare(a, b) is not None
    for tolerance in ({"rtol": 1e-2, "atol": 1e-2}, {"float32": {"rtol": 1e-2}}, {"float32": (1e-2, 1e-2)}):
        assert compare(a, b, tolerance=tolerance) is None, tolerance
    assert compare(a, b, tolerance={"float16": (1.0, 1.0)}) is not None  # another dtype's
