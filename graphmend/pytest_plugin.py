"""pytest plugin (entry point ``pytest11``): fail a test whose compiled calls graph-break.

    @pytest.mark.mend(max_breaks=0)
    def test_forward_compiles_whole():
        torch.compile(model)(x)

    def test_budget(mend_breaks):
        torch.compile(model)(x)
        mend_breaks.assert_at_most(1)

    @pytest.mark.mend(max_breaks=0, max_recompiles=0)
    def test_one_compile_serves_every_call():
        f = torch.compile(model)
        f(x)
        f(x, temperature=0.5)  # a float specialised: a recompile, named with its guard

    @pytest.mark.mend(max_breaks=0, train=True)
    def test_train_step_compiles_whole():
        torch.compile(model.train())(x).sum().backward()

``train=True`` holds the test to a training step: grad is on while it runs, and a test
whose compiled calls never reach a backward fails (it did not test what it says).

pytest loads this module in every run of every project where graphmend is installed, so it
imports nothing but the standard library and pytest at import time; torch is imported only
when a test uses the marker or the fixture.

Breaks are read from Dynamo's ``graph_breaks`` log artifact (each record names the user
file:line and the reason, including breaks ``explain`` does not count and frames skipped
whole), parsed by ``tracer.messages`` as ``mend``'s own capture parses it, with
``torch._dynamo`` counters as a fallback for torch versions that log less.
Dynamo's caches are reset when recording starts, so calls compiled by an earlier test
break (and are counted) again here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

import pytest

MARKER = "mend"
_ARTIFACT_SUFFIX = ".__graph_breaks"
_RECOMPILES_SUFFIX = ".__recompiles"


@dataclass(frozen=True)
class RecordedBreak:
    reason: str
    file: Optional[str] = None
    line: Optional[int] = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.file else "<unknown location>"
        return f"{where}: {self.reason}"


def parse_record(message: str) -> Optional[RecordedBreak]:
    """One ``graph_breaks`` log message -> the break it reports (None if it reports none), read
    by ``tracer.messages`` as mend's capture reads it; the reason is ``ParsedBreak.headline``."""
    from tracer.messages import parse_frame_skip, parse_log_record  # the standard library only

    parsed = parse_log_record(message)
    if parsed is None or not parsed.file:
        parsed = parse_frame_skip(message)  # a frame skipped whole: the innermost user frame
    if parsed is None:
        return None
    return RecordedBreak(reason=parsed.headline, file=parsed.file, line=parsed.line)


@dataclass(frozen=True)
class RecordedRecompile:
    function: str
    reason: str  # the guard that failed, in Dynamo's words
    file: Optional[str] = None  # the function recompiled
    line: Optional[int] = None
    guard_file: Optional[str] = None  # the user line whose value the guard checks
    guard_line: Optional[int] = None
    guard_source: Optional[str] = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.file else "<unknown location>"
        guarded = (f" (the guard checks {self.guard_source or 'a value'} at {self.guard_file}:{self.guard_line})"
                   if self.guard_file else "")
        return f"{where}: {self.function} recompiled: {self.reason}{guarded}"


def parse_recompile_record(message: str) -> Optional[RecordedRecompile]:
    """One ``recompiles`` log message -> the recompile it reports, read by ``tracer.messages``."""
    from tracer.messages import parse_recompile  # the standard library only

    r = parse_recompile(message)
    if r is None:
        return None
    return RecordedRecompile(function=r["function"], reason=r["reason"], file=r["file"], line=r["line"],
                             guard_file=r.get("guard_file"), guard_line=r.get("guard_line"),
                             guard_source=r.get("guard_source"))


class _Handler(logging.Handler):
    def __init__(self, sink: list, parse=parse_record) -> None:
        super().__init__(level=logging.DEBUG)
        self.sink = sink
        self.parse = parse

    def emit(self, record: logging.LogRecord) -> None:
        try:
            parsed = self.parse(record.getMessage())
        except Exception:  # a log format we do not know must never fail the user's test
            return
        if parsed is not None:
            self.sink.append(parsed)


class BreakRecorder:
    """Records the graph breaks of compiled calls between ``start()`` and ``stop()``."""

    def __init__(self, max_breaks: Optional[int] = None, train: bool = False,
                 max_recompiles: Optional[int] = None) -> None:
        self.max_breaks = max_breaks
        self.max_recompiles = max_recompiles
        self.train = train
        self.backwards = 0  # backward / autograd.grad calls while recording (train=True)
        self._restore: list = []
        self._records: list[RecordedBreak] = []
        self.recompiles: list[RecordedRecompile] = []  # in the order Dynamo logged them
        self._loggers: list[tuple[logging.Logger, int, bool, logging.Handler]] = []
        self._handler = _Handler(self._records)
        self._recompile_handler = _Handler(self.recompiles, parse_recompile_record)
        self._counter_before: dict[str, int] = {}
        self._counter_after: Optional[dict[str, int]] = None
        self.active = False

    # -- recording -----------------------------------------------------------------------
    def start(self) -> "BreakRecorder":
        try:
            import torch._dynamo  # the first use pays torch's import, not pytest's start-up
            import torch._logging  # noqa: F401  (registers the artifact loggers)
        except ImportError as exc:
            pytest.fail(f"@pytest.mark.mend / mend_breaks need PyTorch, which cannot be imported: {exc}", pytrace=False)

        torch._dynamo.reset()
        manager = logging.Logger.manager
        for suffix, handler in ((_ARTIFACT_SUFFIX, self._handler), (_RECOMPILES_SUFFIX, self._recompile_handler)):
            known = {n for n in list(manager.loggerDict) if n.endswith(suffix)}
            if suffix == _RECOMPILES_SUFFIX:  # the modules that log them, in case none is made yet
                known |= {"torch._dynamo.guards.__recompiles", "torch._dynamo.convert_frame.__recompiles"}
            for name in sorted(known):
                log = logging.getLogger(name)
                self._loggers.append((log, log.level, log.propagate, handler))
                log.setLevel(logging.DEBUG)
                log.propagate = False  # ours to read, not torch's handlers to print on the test's stderr
                log.addHandler(handler)
        self._enable_recompile_records()
        self._counter_before = self._graph_break_counter()
        if self.train:
            self._count_backwards()
        self.active = True
        return self

    def _enable_recompile_records(self) -> None:
        """Dynamo formats a recompile's guard failures only while its ``recompiles`` artifact
        is on in torch's log state: on until ``stop()`` (as the user's TORCH_LOGS left it after)."""
        try:
            from torch._logging._internal import log_state
        except ImportError:  # another torch's layout: the breaks are still recorded
            return
        if not log_state.is_artifact_enabled("recompiles"):
            log_state.enable_artifact("recompiles")
            self._restore.append(lambda: log_state.artifact_names.discard("recompiles"))

    def _count_backwards(self) -> None:
        """Grad on, and ``torch.autograd.backward`` / ``grad`` counted (``Tensor.backward``
        calls the former), until ``stop()``."""
        import torch

        previous = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        self._restore.append(lambda: torch.set_grad_enabled(previous))
        for name in ("backward", "grad"):
            original = getattr(torch.autograd, name)

            def counted(*args, _original=original, **kwargs):
                self.backwards += 1
                return _original(*args, **kwargs)

            setattr(torch.autograd, name, counted)
            self._restore.append(lambda name=name, original=original: setattr(torch.autograd, name, original))

    def stop(self) -> None:
        if not self.active:
            return
        self._counter_after = self._graph_break_counter()
        while self._restore:
            self._restore.pop()()
        for log, level, propagate, handler in self._loggers:
            log.removeHandler(handler)
            log.setLevel(level)
            log.propagate = propagate
        self._loggers.clear()
        self.active = False

    @staticmethod
    def _graph_break_counter() -> dict[str, int]:
        try:
            from torch._dynamo.utils import counters

            return dict(counters.get("graph_break", {}))
        except Exception:  # counters moved in this torch: the log alone decides
            return {}

    # -- results -------------------------------------------------------------------------
    @property
    def breaks(self) -> list[RecordedBreak]:
        """Distinct breaks (a recompile logs the same site again; it is one break)."""
        seen: dict[tuple, RecordedBreak] = {}
        for b in self._records:
            seen.setdefault((b.file, b.line, b.reason), b)
        out = list(seen.values())
        if not out:
            after = self._counter_after if self._counter_after is not None else self._graph_break_counter()
            for reason, n in sorted(after.items()):
                if n > self._counter_before.get(reason, 0):
                    out.append(RecordedBreak(reason=str(reason)))
        return out

    @property
    def count(self) -> int:
        return len(self.breaks)

    def __len__(self) -> int:
        return self.count

    def failure_message(self, allowed: int) -> str:
        lines = [f"{self.count} graph break(s) in compiled calls, {allowed} allowed (@pytest.mark.mend):"]
        lines += [f"  {b}" for b in self.breaks]
        return "\n".join(lines)

    def recompile_message(self, allowed: int) -> str:
        lines = [f"{len(self.recompiles)} recompile(s) in compiled calls, {allowed} allowed (@pytest.mark.mend):"]
        lines += [f"  {r}" for r in self.recompiles]
        return "\n".join(lines)

    def assert_recompiles_at_most(self, allowed: int) -> None:
        if len(self.recompiles) > allowed:
            pytest.fail(self.recompile_message(allowed), pytrace=False)

    def assert_at_most(self, allowed: int) -> None:
        if self.count > allowed:
            pytest.fail(self.failure_message(allowed), pytrace=False)
        if self.train and not self.backwards:
            pytest.fail("@pytest.mark.mend(train=True): the test ran no backward, so no training step was "
                        "checked; call .backward() on a loss of the compiled model's outputs", pytrace=False)


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(max_breaks=0, train=False, max_recompiles=None): fail the test when its "
                   "torch.compile'd calls graph-break more than max_breaks times (or recompile more than "
                   "max_recompiles times, when given); train=True: grad on, and a backward must run (graphmend)")


def _train(item) -> bool:
    marker = item.get_closest_marker(MARKER)
    value = marker.kwargs.get("train", False) if marker is not None else False
    if not isinstance(value, bool):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.mend(train=...) needs True or False, got {value!r}")
    return value


def _max_breaks(item) -> Optional[int]:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    value = marker.kwargs.get("max_breaks", marker.args[0] if marker.args else 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.mend(max_breaks=...) needs a non-negative int, "
                                f"got {value!r}")
    return value


def _max_recompiles(item) -> Optional[int]:
    marker = item.get_closest_marker(MARKER)
    value = marker.kwargs.get("max_recompiles") if marker is not None else None
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.mend(max_recompiles=...) needs a non-negative int, "
                                f"got {value!r}")
    return value


def _recorder(item) -> BreakRecorder:
    return BreakRecorder(max_breaks=_max_breaks(item), train=_train(item), max_recompiles=_max_recompiles(item))


@pytest.fixture
def mend_breaks(request):
    """The breaks of compiled calls in this test; with the marker, its limit is enforced."""
    recorder = _recorder(request.node)
    request.node._mend_recorder = recorder
    recorder.start()
    yield recorder
    recorder.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    # The marker alone is enough: record without asking for the fixture.
    if item.get_closest_marker(MARKER) is not None and "mend_breaks" not in getattr(item, "fixturenames", ()):
        recorder = _recorder(item)
        item._mend_recorder = recorder
        recorder.start()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield  # a test that failed on its own raises here: that failure is the one to show
    recorder: Optional[BreakRecorder] = getattr(item, "_mend_recorder", None)
    if recorder is not None and recorder.max_breaks is not None:
        recorder.stop()
        recorder.assert_at_most(recorder.max_breaks)
        if recorder.max_recompiles is not None:
            recorder.assert_recompiles_at_most(recorder.max_recompiles)
    return result


def pytest_runtest_teardown(item) -> None:
    recorder: Optional[BreakRecorder] = getattr(item, "_mend_recorder", None)
    if recorder is not None:
        recorder.stop()
