"""The pytest plugin (``pytest11`` entry point): the mend marker and the mend_breaks fixture.

One inner pytest run (pytester, in a subprocess so its torch import and Dynamo state stay
out of this process) covers every case; it is the expensive part, so it runs once.
"""

from __future__ import annotations

import re

pytest_plugins = ["pytester"]

CONFTEST = '''
import sys


def pytest_collection_finish(session):
    # the plugin is loaded by now (entry point) and must not have imported torch
    print("TORCH-AT-COLLECTION", "torch" in sys.modules)
'''

# torch is imported inside the tests, not at the top, so the conftest can tell whether the
# plugin imported it.
INNER = '''
import pytest


def noisy(x):
    y = x + 1
    print("hello from noisy")  # the break
    return y * 2


def twice(x):
    y = x + 1
    print("one")
    y = y * 2
    print("two")
    return y - 1


def clean(x):
    return x.relu() * 2


@pytest.mark.mend(max_breaks=0)
def test_prints_fails():
    import torch
    torch.compile(noisy, backend="eager")(torch.ones(3))


@pytest.mark.mend(max_breaks=0)
def test_clean_passes():
    import torch
    torch.compile(clean, backend="eager")(torch.ones(3))


@pytest.mark.mend(max_breaks=1)
def test_one_allowed():
    import torch
    torch.compile(noisy, backend="eager")(torch.ones(3))


@pytest.mark.mend(max_breaks=1)
def test_two_over_one():
    import torch
    torch.compile(twice, backend="eager")(torch.ones(3))


def test_fixture_counts(mend_breaks):
    import torch
    torch.compile(noisy, backend="eager")(torch.ones(3))
    assert mend_breaks.count == 1
    (b,) = mend_breaks.breaks
    assert b.file.endswith("test_inner.py") and b.line == LINE_NOISY
    mend_breaks.assert_at_most(0)


def test_unmarked_ignored():
    import torch
    torch.compile(noisy, backend="eager")(torch.ones(3))


@pytest.mark.mend(max_breaks=0, train=True)
def test_train_step_clean_passes():
    import torch
    assert torch.is_grad_enabled()
    model = torch.nn.Linear(3, 3).train()
    torch.compile(model, backend="eager")(torch.ones(2, 3)).sum().backward()
    assert model.weight.grad is not None


@pytest.mark.mend(max_breaks=0, train=True)
def test_train_without_backward_fails():
    import torch
    torch.compile(clean, backend="eager")(torch.ones(3))


def dropout_logged(model, x):
    y = model(x)
    if model.training:
        print("train step")  # the break only a training step hits
    return y


@pytest.mark.mend(max_breaks=0, train=True)
def test_train_only_break_fails():
    import torch
    model = torch.nn.Linear(3, 3).train()
    torch.compile(dropout_logged, backend="eager")(model, torch.ones(2, 3)).sum().backward()


def scaled(x, k):
    return x * k


@pytest.mark.mend(max_breaks=0, max_recompiles=0)
def test_recompile_fails():
    import torch
    f = torch.compile(scaled, backend="eager")
    f(torch.ones(3), 2.0)
    f(torch.ones(3), 3.0)  # the float was specialised: the second call recompiles


@pytest.mark.mend(max_breaks=0, max_recompiles=1)
def test_one_recompile_allowed(mend_breaks):
    import torch
    f = torch.compile(scaled, backend="eager")
    f(torch.ones(3), 2.0)
    f(torch.ones(3), 3.0)
    assert len(mend_breaks.recompiles) == 1 and mend_breaks.recompiles[0].function == "scaled"


@pytest.mark.mend(max_breaks=0)
def test_own_failure_wins():
    import torch
    torch.compile(noisy, backend="eager")(torch.ones(3))
    assert False, "the test's own assertion"
'''


def _line(text: str, needle: str, nth: int = 0) -> int:
    """1-based line of the nth line holding ``needle`` in the file pytester wrote."""
    return [i for i, ln in enumerate(text.splitlines(), 1) if needle in ln][nth]


def _outcomes(out: str) -> dict[str, str]:
    return {m.group(2): m.group(1) for m in re.finditer(r"^(PASSED|FAILED|ERROR) test_inner\.py::(\w+)", out, re.M)}


def _section(out: str, name: str) -> str:
    return out.split(f"_ {name} _", 1)[1].split("\n___", 1)[0]


def test_marker_and_fixture_in_a_real_pytest_run(pytester):
    pytester.makeconftest(CONFTEST)
    path = pytester.makepyfile(test_inner=INNER)
    text = path.read_text()
    noisy, one, two = _line(text, "hello from noisy"), _line(text, 'print("one")'), _line(text, 'print("two")')
    path.write_text(text.replace("LINE_NOISY", str(noisy)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-s", "--strict-markers",
                                           "-rA", timeout=600)
    out = result.stdout.str() + result.stderr.str()
    outcome = _outcomes(out)

    # loading the plugin imported no torch; --strict-markers knew the marker
    assert "TORCH-AT-COLLECTION False" in out
    assert "not found in `markers`" not in out and "ERROR" not in outcome.values(), out

    # a compiled function that prints: the test fails, the break listed with file:line and reason
    assert outcome["test_prints_fails"] == "FAILED", out
    failure = _section(out, "test_prints_fails")
    assert "1 graph break(s) in compiled calls, 0 allowed" in failure
    assert f"test_inner.py:{noisy}" in failure and "`print`" in failure  # Dynamo's reason names it

    # a clean one passes; max_breaks=1 allows one and not two
    assert outcome["test_clean_passes"] == "PASSED"
    assert outcome["test_one_allowed"] == "PASSED"
    assert outcome["test_two_over_one"] == "FAILED"
    over = _section(out, "test_two_over_one")
    assert "2 graph break(s) in compiled calls, 1 allowed" in over
    assert f"test_inner.py:{one}" in over and f"test_inner.py:{two}" in over

    # the fixture: count and location right (its asserts passed), then assert_at_most(0) failed
    assert outcome["test_fixture_counts"] == "FAILED"
    fixture = _section(out, "test_fixture_counts")
    assert "1 graph break(s) in compiled calls, 0 allowed" in fixture and "AssertionError" not in fixture

    # unmarked tests are not checked; a test's own failure is the one reported
    assert outcome["test_unmarked_ignored"] == "PASSED"
    assert outcome["test_own_failure_wins"] == "FAILED"
    assert "the test's own assertion" in _section(out, "test_own_failure_wins")

    # train=True: a training step with no break passes with grad on; one that never runs a
    # backward fails saying so; a break only the training branch hits fails with its line
    assert outcome["test_train_step_clean_passes"] == "PASSED", out
    assert outcome["test_train_without_backward_fails"] == "FAILED"
    assert "the test ran no backward" in _section(out, "test_train_without_backward_fails")
    assert outcome["test_train_only_break_fails"] == "FAILED"
    train_break = _section(out, "test_train_only_break_fails")
    train_line = _line(text, "the break only a training step hits")
    assert f"test_inner.py:{train_line}" in train_break
    # max_recompiles: a recompile over the limit fails, naming the function, its line and the guard
    assert outcome["test_recompile_fails"] == "FAILED", out
    recompiled = _section(out, "test_recompile_fails")
    assert "1 recompile(s) in compiled calls, 0 allowed" in recompiled, recompiled
    assert f"test_inner.py:{_line(text, 'def scaled(x, k):')}: scaled recompiled: " in recompiled
    assert outcome["test_one_recompile_allowed"] == "PASSED", out
    result.assert_outcomes(passed=5, failed=7)


def test_parse_record_reads_every_log_form_torch_writes():
    from graphmend.pytest_plugin import parse_record

    new = ("Graph break in user code at /m/net.py:8\nGraph Break Reason: Encountered graph break when attempting "
           "to trace CALL: a function call, e.g. f(x, y):\n\nFailed to trace builtin operator\n  Explanation: Dynamo "
           "does not know how to trace builtin operator `print`\n  Hint: avoid it\n\nUser code traceback:\n"
           '  File "/m/net.py", line 8, in forward\n')
    b = parse_record(new)
    assert (b.file, b.line) == ("/m/net.py", 8)
    assert b.reason == "Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print`"
    dup = ("Graph break (user stack suppressed due to duplicate graph break) in user code at /m/net.py:9\n"
           "Graph Break Reason: call_function BuiltinVariable(print) [] {}")
    assert str(parse_record(dup)) == "/m/net.py:9: call_function BuiltinVariable(print) [] {}"
    skip = ("Graph break: torch.compile cannot properly resume from this graph break, which results in a skip.\n"
            "torch.compile will skip tracing the frame forward (/m/net.py line 5) and fall back to eager.\n"
            "The graph break occurred in the following user code:\n"
            '  File "/m/run.py", line 3, in main\n  File "/m/net.py", line 11, in forward\n')
    b = parse_record(skip)
    assert (b.file, b.line) == ("/m/net.py", 11) and "skip" in b.reason
    assert parse_record("Step 1: torchdynamo start tracing forward") is None


def test_parse_record_is_mends_own_parser_on_every_recorded_message():
    """The plugin reads Dynamo's records with tracer.messages, as mend's capture does: the
    same place for every recorded message of every torch, and the reason without Dynamo's
    wrapper ("Failed to handle graph break gracefully ... Graph break encountered:")."""
    import json
    from pathlib import Path

    from graphmend.pytest_plugin import parse_record
    from tracer.messages import parse_log_record

    fixtures = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "messages"
    cases = [c for f in sorted(fixtures.glob("torch_*.json")) for c in json.loads(f.read_text())["cases"]]
    wrapped = 0
    for case in cases:
        parsed, recorded = parse_log_record(case["text"]), parse_record(case["text"])
        assert (recorded.file, recorded.line) == (parsed.file, parsed.line), case["case"]
        assert recorded.reason.startswith(parsed.reason.rstrip(":")), case["case"]
        wrapped += "Failed to handle graph break gracefully" in case["text"]
        assert not recorded.reason.startswith("Failed to handle graph break gracefully"), case["case"]
    assert wrapped  # the wrapper is in the recordings
