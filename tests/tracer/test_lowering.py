"""The lowering check (``mend analyze --lower``, and every compiled bench arm): a graph Dynamo
captured whole that Inductor cannot compile is a GM608 issue naming the op, the user's line
and the reason, in one line. The failure is torch 2.13's own: ``torch._weight_int8pack_mm``
lowers when its scales are a buffer, not when they are computed in the graph."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from graphmend.core.model import LoweringFailure, Report, TargetResult  # noqa: E402

OP = "aten._weight_int8pack_mm.default"


class Int8Linear(nn.Module):
    """Weight-only int8 linear: the per-row absmax kept, the scale taken per call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.randint(-127, 127, (8, 8), dtype=torch.int8))
        self.register_buffer("absmax", torch.rand(8) + 0.5)

    def forward(self, x):
        return torch._weight_int8pack_mm(x, self.weight, self.absmax / 127)


CALL_LINE = inspect.getsourcelines(Int8Linear.forward)[1] + 1


def _capture(fn, args, lower=True):
    from tracer.worker import capture_loaded

    return capture_loaded("t.py::mend_target", __file__, "mend_target", fn, args, {}, lower=lower)


@pytest.fixture(scope="module")
def int8():
    torch.manual_seed(0)
    return Int8Linear().eval(), (torch.randn(4, 8),)


def test_a_graph_inductor_cannot_lower_is_named_with_its_op_line_and_reason(int8):
    r = _capture(*int8)
    assert r.error is None and r.graph_count == 1 and r.breaks == []  # Dynamo broke nothing
    (f,) = r.lowering
    assert (f.op, f.file, f.line, f.function, f.rule) == (OP, __file__, CALL_LINE, "forward", "GM608")
    assert f.reason == "LoweringException: AssertionError: <class 'torch._inductor.ir.Pointwise'>"
    assert f.source_line.strip() == "return torch._weight_int8pack_mm(x, self.weight, self.absmax / 127)"


def test_a_graph_that_lowers_gives_no_finding_and_no_check_none():
    model, x = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval(), torch.randn(4, 8)
    assert _capture(model, (x,)).lowering == []
    assert _capture(model, (x,), lower=False).lowering is None  # not checked, not "none found"


def test_a_lowering_failure_is_one_issue_per_op_and_line():
    from graphmend.correlate import diagnose

    f = LoweringFailure(reason="LoweringException: AssertionError: <class 'torch._inductor.ir.Pointwise'>", op=OP,
                        file="/r/q.py", line=14, function="forward", source_line="        return mm(x)")
    targets = [TargetResult(name=f"q.py::t{k}", file="/r/q.py", function=f"t{k}", graph_count=1, lowering=[f])
               for k in (1, 2)]
    report = Report(root="/r", targets=targets)
    diagnose(report, read_sources=False)
    (issue,) = report.issues
    assert (issue.rule, issue.status, issue.op, issue.line, issue.said.reason) == ("GM608", "dynamic", OP, 14, f.reason)
    assert issue.message.startswith(f"Inductor cannot lower `{OP}`") and issue.targets == ["q.py::t1", "q.py::t2"]
    assert issue.lowering == [[0, 0], [1, 0]] and not issue.breaks


def test_a_bench_arm_inductor_cannot_build_fails_in_one_line_naming_the_op(int8):
    from graphmend.bench.stage import fill_row
    from graphmend.bench.worker import _lowering_failure
    from graphmend.core.jobs import JobOutcome
    from graphmend.core.model import BenchRow

    torch._dynamo.reset()
    with pytest.raises(Exception) as raised:
        torch.compile(int8[0])(*int8[1])
    torch._dynamo.reset()
    line, data = _lowering_failure(raised.value)
    row = BenchRow("q.py::t", "original", "cpu", "default")
    fill_row(row, JobOutcome(result={"arm": "original", "error": line, "lowering": data}, error=None))
    assert "\n" not in row.error and "Pointwise(" not in row.error  # no IR dump
    assert row.error == (f"q.py::t [original]: Inductor cannot lower {OP} at tests/tracer/test_lowering.py:{CALL_LINE}: "
                         "LoweringException: AssertionError: <class 'torch._inductor.ir.Pointwise'> (GM608)")
    assert row.lowering.op == OP and row.lowering.line == CALL_LINE
    assert _lowering_failure(RuntimeError("the model raised")) is None  # the target's own error: not Inductor's


def test_lower_with_static_only_is_a_usage_error(tmp_path):
    from typer.testing import CliRunner

    from graphmend.cli.app import app

    (tmp_path / "m.py").write_text("x = 1\n")
    r = CliRunner().invoke(app, ["analyze", str(tmp_path / "m.py"), "--static-only", "--lower"])
    assert r.exit_code == 2 and "--lower compiles the captured graphs: it does nothing with --static-only" in r.output
