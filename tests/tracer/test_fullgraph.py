"""``--fullgraph``: a target compiled as ``torch.compile(fullgraph=True)`` compiles it. The first
break raises; it is the one break recorded, at its line, with the rule the default compile's log
would give it. What fullgraph=True traces and the default compile breaks on (a data-dependent
scalar) is one graph; the model's own exception stays an error."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from tracer.worker import capture_loaded, refusal  # noqa: E402


def branchy(x):
    y = x.sin()
    if y.sum() > 0:
        y = y + 1
    return y.cos()


def scalar_scale(x):
    return x * (x.sum().item() + 1)


def own_failure(x):
    return x + "text"


def plain(x):
    return x.sin().cos()


BRANCH_LINE = inspect.getsourcelines(branchy)[1] + 2


def _capture(fn, fullgraph=True, calls=()):
    return capture_loaded("t.py::mend_target", __file__, "mend_target", fn, (torch.randn(4),), {},
                          calls=calls, fullgraph=fullgraph)


def test_the_first_break_raises_and_is_the_one_break_at_its_line_with_its_rule():
    default, full = _capture(branchy, fullgraph=False), _capture(branchy)
    assert default.graph_break_count == 1 and not default.fullgraph
    assert full.fullgraph and full.error is None
    assert full.graph_count == 0 and full.graph_break_count == 1
    (b,) = full.breaks
    assert (b.file, b.line, b.function) == (__file__, BRANCH_LINE, "branchy")
    assert b.counted and b.rule == default.breaks[0].rule == "GM101"
    assert "if y.sum() > 0" in b.source_line


def test_a_data_dependent_scalar_the_default_compile_breaks_on_is_one_graph():
    default, full = _capture(scalar_scale, fullgraph=False), _capture(scalar_scale)
    assert default.graph_break_count >= 1 and default.breaks
    assert (full.graph_count, full.graph_break_count, full.breaks, full.error) == (1, 0, [], None)


def test_the_models_own_exception_is_an_error_not_a_break():
    r = _capture(own_failure)
    assert r.error and "raised TorchRuntimeError" in r.error and not r.breaks and r.graph_break_count == 0


def test_a_clean_target_is_one_graph_and_its_later_calls_run():
    r = _capture(plain, calls=[((torch.randn(6),), {})])
    assert (r.graph_count, r.graph_break_count, r.breaks, r.error, r.calls) == (1, 0, [], None, 2)


def test_a_break_only_a_later_call_reaches_ends_the_calls_there():
    def late(x):
        if x.shape[0] > 4 and x.sum() > 0:  # a size: the first call never tests the data
            return x.cos()
        return x.sin()

    r = _capture(late, calls=[((torch.randn(6),), {}), ((torch.randn(8),), {})])
    assert r.graph_count == 1 and r.graph_break_count == 0  # the figures stay the first call's
    assert r.error is None and [b.call for b in r.breaks] == [2] and not r.breaks[0].counted


def test_refusal_is_dynamos_exception_only():
    from torch._dynamo.exc import Unsupported

    assert refusal(Unsupported("x")) and not refusal(TypeError("x")) and not refusal(RuntimeError("x"))
