"""In-process recording of what Dynamo does: graphs (through a recording backend), every
break its ``graph_breaks`` log artifact shows, and recompiles. Imports torch.

Used by the worker (one target at a time) and by ``mend run`` (a whole program).
"""

from __future__ import annotations

import functools
import linecache
import logging
import os
import re
import sys
import sysconfig
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from graphmend.core.model import Break, Frame, LoweringFailure, Recompile
from rewrites.rules import category_of
from tracer.classify import classify
from tracer.messages import (ParsedBreak, StackEntry, parse_log_record, parse_reason, parse_recompile,
                             parse_recompile_limit)
from tracer.registry import registry_id

_HERE = str(Path(__file__).resolve().parent)
LIMIT_LOGGER = "torch._dynamo.convert_frame"  # where Dynamo warns that a function hit the recompile limit
# torch 2.9 says that it skipped a frame for a break in its loop only here, at INFO, apart
# from the break's record (2.11 on say it in the record itself): "Skipping frame because there is a graph break in a for/while loop"
LOOP_SKIP_LOGGER = "torch._dynamo.symbolic_convert"
_LOOP_SKIP = "Skipping frame because there is a graph break in a for/while loop"
_FRAME_SUMMARY = re.compile(r"<FrameSummary file (?P<file>.+), line (?P<line>\d+) in (?P<fn>[^>]+)>")
_GRAPHMEND = str(Path(__file__).resolve().parent.parent / "graphmend")
_STDLIB = os.path.join(sysconfig.get_paths()["stdlib"], "")
_RESUME_RE = re.compile(r"^(?:torch_dynamo_)?resume_in_(?P<name>.+?)_at_(?P<line>\d+)$")
# the keyword before a condition, which a break whose log marks no column is placed after
_CONDITION_KEYWORD = re.compile(r"(?:if|elif|while)\s+")


def _torch_dir() -> str:
    import torch

    return str(Path(torch.__file__).resolve().parent)


def is_user_file(path: str, torch_dir: str) -> bool:
    if not path or path.startswith("<"):
        return False
    try:
        p = str(Path(path).resolve())
    except OSError:
        p = path
    if p.startswith(_STDLIB) and "site-packages" not in p and "dist-packages" not in p:
        return False  # copy.py, logging/, warnings.py: the user line is the caller's
    return not (p.startswith(torch_dir + os.sep) or p.startswith(_HERE + os.sep)
                or p.startswith(_GRAPHMEND + os.sep))


def function_name(code_name: str) -> str:
    """``torch_dynamo_resume_in_forward_at_12`` -> ``forward``."""
    m = _RESUME_RE.match(code_name)
    return m.group("name") if m else code_name


def resume_line(code_name: str) -> Optional[int]:
    """``torch_dynamo_resume_in_forward_at_12`` -> 12 (where the resume function takes over); None otherwise."""
    m = _RESUME_RE.match(code_name)
    return int(m.group("line")) if m else None


def _defs(file: str) -> tuple[tuple[str, str, int, int], ...]:
    """(name, qualified name, first line with decorators, last line) of every def in ``file``."""
    try:
        st = os.stat(file)
    except OSError:
        return ()
    return _defs_of(file, st.st_mtime_ns, st.st_size)  # a file rewritten since is parsed again


@functools.lru_cache(maxsize=64)
def _defs_of(file: str, mtime_ns: int, size: int) -> tuple[tuple[str, str, int, int], ...]:
    import ast

    try:
        with open(file, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return ()
    found: list[tuple[str, str, int, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    found.append((child.name, qual, first, child.end_lineno or child.lineno))
                walk(child, qual + ("." if isinstance(child, ast.ClassDef) else ".<locals>."))

    walk(tree, "")
    return tuple(found)


def qualname(file: str, function: str, line: Optional[int]) -> str:
    """``TinyNet.forward`` for the ``forward`` defined at ``line`` of ``file``, or whose body
    holds ``line`` (``cached_property.__get__`` for functools.py:997), else the one def of that
    name; ``function`` as it is when the source does not say."""
    found = [(qual, first, last) for name, qual, first, last in _defs(file) if name == function]
    if line is not None:
        at = [q for q, first, _ in found if first == line]
        if not at:  # the innermost def whose lines hold it
            at = [q for q, first, last in sorted(found, key=lambda f: f[1], reverse=True) if first <= line <= last]
        if at:
            return at[0]
    return found[0][0] if len(found) == 1 else function


def compiled_key(co_name: str, co_filename: str) -> str:
    """How a compiled region is named: resume functions fold into the function they resume."""
    return f"{function_name(co_name)} ({co_filename})"


def _compiling_code() -> Optional[types.CodeType]:
    """The code object Dynamo is converting right now (read off the interpreter stack:
    ``convert_frame._compile(code, ...)``; defensive across versions)."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename.endswith("convert_frame.py"):
            code = f.f_locals.get("code")
            if isinstance(code, types.CodeType):
                return code
            frame = f.f_locals.get("frame")
            code = getattr(frame, "f_code", None)
            if isinstance(code, types.CodeType):
                return code
        f = f.f_back
    return None


class _LoopSkipFilter(logging.Filter):
    """Reads the loop-skip message (``LOOP_SKIP_LOGGER``) for the recorder; lets through only
    what the logger's own level let through before (the INFO record was made for mend alone)."""

    def __init__(self, recorder: "Recorder", level: int):
        super().__init__()
        self.recorder, self.level = recorder, level

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
            if text.startswith(_LOOP_SKIP):
                self.recorder._loop_skip(text)
        except Exception:  # a surprise here must never break the user's run: the skip goes unmarked
            pass
        return record.levelno >= self.level


@dataclass
class _Raw:
    parsed: ParsedBreak
    compiled: Optional[str]
    phase: str = "forward"
    call: int = 1  # the target's call that logged it (1: the first)


@dataclass
class Mark:
    """How far a recording had got: what the calls so far recorded (``Recorder.mark``)."""

    graphs: int
    backward_graphs: int
    ops: int
    sites: int
    raw: int
    recompiles: int


@dataclass
class Recording:
    graphs: int = 0
    ops_per_graph: list[int] = field(default_factory=list)
    # (file, line) of each graph compiled because of a break: the breaks explain() counts
    break_sites: list[tuple[str, int]] = field(default_factory=list)
    raw: list[_Raw] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    backward_graphs: int = 0  # graphs of the backward, traced under compiled autograd
    # lower: each forward graph Inductor could not compile, one per op and user line
    lowering: list[LoweringFailure] = field(default_factory=list)


class _Handler(logging.Handler):
    def __init__(self, recorder: "Recorder"):
        super().__init__(logging.DEBUG)
        self.recorder = recorder

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.recorder._on_record(record)
        except Exception:  # a parsing surprise must never break the user's run: kept raw instead
            try:
                self.recorder._unparsed(record)
            except Exception:  # not even its raw text could be kept: the run goes on without it
                pass


class Recorder:
    """Install with ``with Recorder() as rec:``; read ``rec.recording`` / ``rec.breaks()``."""

    ARTIFACTS = ("__graph_breaks", "__recompiles")

    def __init__(self, own_backend: bool = True, launcher_files: tuple[str, ...] = (), lower: bool = False) -> None:
        # own_backend: graphs go through self.backend, so which breaks explain() counts is
        # known; otherwise (mend run) every graph break is taken as counted.
        self.own_backend = own_backend
        # Frames of whatever launched the user's code (mend's console script, typer,
        # runpy): the user stack starts after the last of them.
        self.launcher_files = tuple(launcher_files)
        self._enabled_artifacts: list[str] = []
        self.recording = Recording()
        self._handler = _Handler(self)
        self._skip_filter: Optional[_LoopSkipFilter] = None
        self._saved: list[tuple[logging.Logger, int, bool]] = []
        self._torch_dir = _torch_dir()
        # "backward" while compiled autograd traces a backward: its graphs and breaks are
        # kept apart from the forward's (explain counts the forward only)
        self.phase = "forward"
        # the lowering check: each graph also compiled by Inductor (tracer.lowering)
        self.lower = lower
        self.call = 1  # the target's call now running (the worker's later calls count on)

    # -- install / remove ---------------------------------------------------------------
    def _artifact_loggers(self) -> list[logging.Logger]:
        import torch._dynamo  # noqa: F401  (registers the artifact loggers)

        names = set()
        try:
            from torch._logging._internal import log_registry

            names.update(log_registry.get_artifact_log_qnames())
        except Exception:  # no artifact registry in this torch: the loggers below only
            pass
        names.update(n for n in list(logging.root.manager.loggerDict) if isinstance(n, str))
        # The modules that log them, in case they are not created yet.
        names.update({"torch._dynamo.symbolic_convert.__graph_breaks", "torch._dynamo.exc.__graph_breaks",
                      "torch._dynamo.guards.__recompiles", "torch._dynamo.convert_frame.__recompiles"})
        return [logging.getLogger(n) for n in sorted(names) if n.startswith("torch") and n.endswith(self.ARTIFACTS)]

    def __enter__(self) -> "Recorder":
        for log in self._artifact_loggers():
            self._saved.append((log, log.level, log.propagate))
            log.setLevel(logging.DEBUG)
            if not _user_enabled(log):
                log.propagate = False  # ours only; what the user asked TORCH_LOGS for still shows
            log.addHandler(self._handler)
        # the warning that a function reached the recompile limit (it runs in eager from then
        # on): read, level and propagation left as they are
        limit_log = logging.getLogger(LIMIT_LOGGER)
        self._saved.append((limit_log, limit_log.level, limit_log.propagate))
        limit_log.addHandler(self._handler)
        skip_log = logging.getLogger(LOOP_SKIP_LOGGER)
        self._saved.append((skip_log, skip_log.level, skip_log.propagate))
        self._skip_filter = _LoopSkipFilter(self, skip_log.getEffectiveLevel())
        skip_log.addFilter(self._skip_filter)
        if skip_log.getEffectiveLevel() > logging.INFO:
            skip_log.setLevel(logging.INFO)
        # Recompile reasons are only formatted when the artifact is on in torch's log state.
        try:
            from torch._logging._internal import log_state

            for name in ("recompiles",):
                if not log_state.is_artifact_enabled(name):
                    log_state.enable_artifact(name)
                    self._enabled_artifacts.append(name)
        except Exception:  # no artifact switch in this torch: recompiles come from the counters
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        for log, level, propagate in self._saved:
            log.removeHandler(self._handler)
            if self._skip_filter is not None:
                log.removeFilter(self._skip_filter)
            log.setLevel(level)
            log.propagate = propagate
        self._saved.clear()
        try:
            from torch._logging._internal import log_state

            for name in self._enabled_artifacts:
                log_state.artifact_names.discard(name)
        except Exception:  # no artifact switch in this torch: nothing was enabled
            pass
        self._enabled_artifacts.clear()

    # -- the recording backend ----------------------------------------------------------
    def backend(self, gm: Any, example_inputs: Any) -> Callable[..., Any]:
        """Counts graphs and ops like ``torch._dynamo.explain``; compiles nothing."""
        rec = self.recording
        if self.phase == "backward":
            rec.backward_graphs += 1
            return gm.forward
        rec.graphs += 1
        rec.ops_per_graph.append(sum(1 for n in gm.graph.nodes if n.op == "call_function"))
        reason = getattr(gm, "compile_subgraph_reason", None)
        if reason is not None and getattr(reason, "graph_break", False):
            stack = getattr(reason, "user_stack", None) or []
            if stack:
                rec.break_sites.append((stack[-1].filename, stack[-1].lineno))
        if self.lower:
            self._check_lowering(gm, example_inputs)
        return gm.forward

    def _check_lowering(self, gm: Any, example_inputs: Any) -> None:
        from tracer.lowering import check_graph

        failure = check_graph(gm, example_inputs, lambda f: is_user_file(f, self._torch_dir))
        if failure is not None and not any((f.file, f.line, f.op) == (failure.file, failure.line, failure.op)
                                           for f in self.recording.lowering):
            self.recording.lowering.append(failure)

    # -- log records --------------------------------------------------------------------
    def _on_record(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.name == LIMIT_LOGGER:
            hit = parse_recompile_limit(text)
            if hit:
                self._limit(*hit)
            return
        if record.name.endswith("__recompiles"):
            r = parse_recompile(text)
            if not r:
                self._unparsed(record)
                return
            # frame 0 is the entry's code: it recompiles at most once a call, first, and never in
            # the call that compiled it
            reentered = r.get("frame") == 0 and (
                self.call == 1 or bool(r.get("new_code"))
                or any(p.frame == 0 and p.call == self.call for p in self.recording.recompiles))
            self.recording.recompiles.append(Recompile(
                function=r["function"], reason=r["reason"], file=r["file"], line=r["line"], call=self.call,
                guard_file=r.get("guard_file"), guard_line=r.get("guard_line"), guard_source=r.get("guard_source"),
                frame=r.get("frame"), reentered=reentered))
            return
        parsed = parse_log_record(text)
        if parsed is None:
            self._unparsed(record)
            return
        code = _compiling_code()
        compiled = None
        if code is not None:
            compiled = compiled_key(code.co_name, code.co_filename)
        self.recording.raw.append(_Raw(parsed, compiled, self.phase, self.call))

    def _loop_skip(self, text: str) -> None:
        """torch 2.9: Dynamo skipped the frame it is converting because of a break in a loop
        (the break's own record, just logged, does not say): that record is marked as a frame
        skip, naming the frame as later torches do (the code's first line)."""
        m = _FRAME_SUMMARY.search(text)
        if m is None:
            return
        file, line = m.group("file"), int(m.group("line"))
        for raw in reversed(self.recording.raw):
            p = raw.parsed
            if raw.call != self.call or raw.phase != self.phase:
                break
            if (p.file, p.line) == (file, line) or (p.stack and (p.stack[-1].file, p.stack[-1].line) == (file, line)):
                p.frame_skipped = True
                if p.skipped_frame is None:
                    code = _compiling_code()
                    p.skipped_frame = (StackEntry(file=code.co_filename, line=code.co_firstlineno, function=code.co_name)
                                       if code is not None else StackEntry(file=file, line=line, function=m.group("fn")))
                return

    def _unparsed(self, record: logging.LogRecord) -> None:
        """A record of Dynamo's that mend could not read (a torch that words it anew): kept with
        its raw text, as a break no rule explains (GM900) or a recompile whose guard matches no
        rule, never dropped."""
        try:
            text = record.getMessage()
        except Exception:  # a record whose own formatting fails: its template is what there is
            text = str(record.msg)
        first = next((line.strip() for line in text.splitlines() if line.strip()), "(empty record)")[:300]
        if record.name.endswith("__recompiles"):
            self.recording.recompiles.append(Recompile(function="(unread)", reason=first, call=self.call))
        elif record.name.endswith("__graph_breaks"):
            pb = ParsedBreak(reason=first, message=text.strip("\n"), explanation=f"mend could not read this record: {text}")
            self.recording.raw.append(_Raw(pb, None, self.phase, self.call))

    def _limit(self, function: str, file: Optional[str], line: Optional[int], reason: str) -> None:
        """The function reached the recompile limit: its latest recompile is where (Dynamo logs
        that attempt before refusing it), else a record of its own."""
        rcs = self.recording.recompiles
        last = next((r for r in reversed(rcs) if r.function == function and (file is None or r.file == file)), None)
        if last is not None and not last.limit:
            last.limit = True
            return
        rcs.append(Recompile(function=function, reason=reason, file=file, line=line, call=self.call, limit=True))

    # -- fullgraph=True: the first break raises instead of splitting the graph ----------
    def refused(self, exc: BaseException) -> None:
        """Record the break that ``torch.compile(fullgraph=True)`` raised as ``exc`` (a
        ``refusal``) as the log would have it: a counted break at the place it names."""
        text = str(exc)
        reason, _, trace = text.partition("\nfrom user code:\n")
        # Dynamo's message puts one space more before the first frame than format_list does
        trace = "  " + trace.split("\n\nSet TORCHDYNAMO_VERBOSE")[0].lstrip(" ")
        stack = list(getattr(exc, "real_stack", None) or ())
        if not trace.strip() and stack:
            import traceback

            trace = "".join(traceback.format_list(stack))
        head = f"Graph break in user code at {stack[-1].filename}:{stack[-1].lineno}\n" if stack else ""
        parsed = parse_log_record(f"{head}Graph Break Reason: {reason.rstrip()}\nUser code traceback:\n{trace}\n")
        if parsed is None:  # a message no parser reads: its first line, at no place
            parsed = parse_reason(reason.strip().splitlines()[0] if reason.strip() else type(exc).__name__)
        raw = _Raw(parsed, None, self.phase, self.call)
        self.recording.raw.append(raw)
        # where the graph it refused would have ended: what breaks() counts a break by
        self.recording.break_sites.append(_broke_at(self._to_break(raw)))

    # -- marks: what one call recorded --------------------------------------------------
    def mark(self) -> Mark:
        r = self.recording
        return Mark(r.graphs, r.backward_graphs, len(r.ops_per_graph), len(r.break_sites), len(r.raw),
                    len(r.recompiles))

    def rewind(self, to: Mark) -> None:
        """Forget what was recorded since ``to`` (a call whose record must not count)."""
        r = self.recording
        r.graphs, r.backward_graphs = to.graphs, to.backward_graphs
        del r.ops_per_graph[to.ops:], r.break_sites[to.sites:], r.raw[to.raw:], r.recompiles[to.recompiles:]

    # -- results ------------------------------------------------------------------------
    def breaks(self, first: Optional[Mark] = None) -> list[Break]:
        """Distinct breaks, first-seen order; repeats folded into ``occurrences``. With
        ``first`` (the mark after the target's first call), the breaks of later calls add
        only those the first call did not hit (``Break.call`` says which call first did),
        and never to explain's count: the figures stay the first call's."""
        out: list[Break] = []
        index: dict[tuple, Break] = {}
        sites = self.recording.break_sites
        counted_sites = list(sites if first is None else sites[:first.sites])
        for raw in self.recording.raw:
            b = self._to_break(raw)
            b.call = raw.call
            key = (b.file, b.line, b.gb_type or b.reason, b.kind, b.phase)
            if key in index:
                if index[key].call == raw.call:  # a repeat in a later call is that call's, not another occurrence
                    index[key].occurrences += 1
                continue
            if raw.parsed.duplicate:
                # a short duplicate whose full record we did not see: match on place alone (a
                # repeat that broke in library code names only that place: match it there)
                if b.file is None and b.library:
                    prior = next((x for x in reversed(out) if _broke_at(x) == _broke_at(b)), None)
                else:
                    prior = next((x for x in out if (x.file, x.line) == (b.file, b.line)), None)
                if prior is not None:
                    prior.occurrences += prior.call == raw.call
                    continue
            if first is not None and raw.call > 1:
                b.counted = False  # explain's figures are the first call's
            elif b.phase == "backward":
                b.counted = False  # explain counts the forward's graphs only
            elif b.kind == "graph_break" and not self.own_backend:
                b.counted = True
            elif b.kind == "graph_break" and ((b.file, b.line) in counted_sites or _broke_at(b) in counted_sites):
                # the graph's user_stack ends where Dynamo broke: the user line, or library code below it
                counted_sites.remove((b.file, b.line) if (b.file, b.line) in counted_sites else _broke_at(b))
                b.counted = True
            else:
                b.counted = False
            index[key] = b
            out.append(b)
        return out

    def _to_break(self, raw: _Raw) -> Break:
        p = raw.parsed
        stack = p.stack
        if self.launcher_files:
            cut = max((i for i, s in enumerate(stack) if _is_launcher(s.file, self.launcher_files)), default=-1)
            stack = stack[cut + 1:]
        user = [s for s in stack if is_user_file(s.file, self._torch_dir)]
        inner = user[-1] if user else None
        # what ran below the user's line until Dynamo broke: a record that lists no stack (a
        # repeat) names only its innermost place, which is library code when no user file
        below = stack[stack.index(inner) + 1:] if inner else list(stack)
        if not stack and p.file and not is_user_file(p.file, self._torch_dir):
            below = [StackEntry(file=p.file, line=p.line or 0, function="")]
        file = inner.file if inner else (p.file if p.file and is_user_file(p.file, self._torch_dir) else None)
        line = inner.line if inner else (p.line if file else None)
        function = inner.function if inner else None
        source = inner.source_line if inner else None
        col = None
        following: list[str] = []
        if file and line:
            full = linecache.getline(file, line)
            if full:
                source = full.rstrip("\r\n")  # indentation kept: col indexes into this line
                indent = len(full) - len(full.lstrip())
                caret = inner.caret_col if inner and inner.caret_col is not None and inner.caret_col >= 0 else None
                if caret is None:  # torch 2.11 prints no caret for a branch: its condition, as 2.13 marks it
                    keyword = _CONDITION_KEYWORD.match(full.lstrip())
                    caret = keyword.end() if keyword else 0
                col = indent + caret
                following = [linecache.getline(file, line + k) for k in (1, 2, 3)]
        kind = "frame_skipped" if p.frame_skipped else "graph_break"
        rule = classify(p.gb_type, p.message, source, following, frame_skipped=p.frame_skipped)
        return Break(
            rule=rule, category=category_of(rule), reason=p.reason, explanation=p.explanation, context=p.context,
            hints=list(p.hints), gb_type=p.gb_type, registry_id=p.registry_id or registry_id(p.gb_type),
            file=file, line=line, col=col, source_line=source,
            function=function_name(function) if function else None,
            stack=[Frame(file=s.file, line=s.line, function=s.function) for s in user],
            counted=False, kind=kind, compiled_function=raw.compiled, phase=raw.phase,
            skipped_frame=Frame(file=p.skipped_frame.file, line=p.skipped_frame.line, function=p.skipped_frame.function)
            if p.skipped_frame and is_user_file(p.skipped_frame.file, self._torch_dir) else None,
            library=[_library_frame(s) for s in below],
        )


def _broke_at(b: Break) -> tuple:
    """The place Dynamo broke: the innermost library frame, else the user line."""
    return (b.library[-1].file, b.library[-1].line) if b.library else (b.file, b.line)


def _library_frame(s: StackEntry) -> Frame:
    """A frame of library code, by its qualified name (``cached_property.__get__``, not
    ``__get__``) and with its line's text (``with self.lock:``): the cause in its own words."""
    source = s.source_line or (linecache.getline(s.file, s.line).strip() if s.line else "") or None
    function = s.function
    if s.line:
        named = qualname(s.file, function, s.line) if function else _innermost_def(s.file, s.line)
        function = named or function
    return Frame(file=s.file, line=s.line, function=function, source=source)


def _innermost_def(file: str, line: int) -> str:
    """The qualified name of the innermost def whose lines hold ``line``; "" when none does."""
    spans = [(first, qual) for _, qual, first, last in _defs(file) if first <= line <= last]
    return max(spans)[1] if spans else ""


def _is_launcher(path: str, launchers: tuple[str, ...]) -> bool:
    return any(path == l or (l.endswith(os.sep) and path.startswith(l)) for l in launchers)


def _user_enabled(log: logging.Logger) -> bool:
    """Whether the user asked for this artifact themselves (TORCH_LOGS / set_logs)."""
    try:
        from torch._logging._internal import log_state

        return bool(log_state.is_artifact_enabled(getattr(log, "artifact_name", "")))
    except Exception:  # no artifact switch in this torch: not enabled
        return False


def frame_counters() -> dict[str, int]:
    try:
        from torch._dynamo.utils import counters

        return dict(counters.get("frames", {}))
    except Exception:  # counters moved in this torch: no frame counts
        return {}
