"""The lowering check: a graph Dynamo captured, compiled by Inductor for the CPU, as a plain
``torch.compile`` would. Dynamo capturing a graph says nothing of whether Inductor can turn it
into kernels; a graph it cannot lower makes ``torch.compile`` raise where ``mend analyze``
saw nothing wrong. Imports torch.

A failure is told in one line: the op Inductor failed on, the user's line that called it (the
failing node's stack trace, innermost user frame) and the exception's first line; Inductor's
IR dump, which follows that line in its message, is left out."""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any, Optional

from graphmend.core.model import LoweringFailure

RULE = "GM608"
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
# where Inductor reports a failing compile itself before raising (the IR dump, twice)
_LOGGERS = ("torch._inductor", "torch._dynamo", "torch.fx.experimental.symbolic_shapes")


def check_graph(gm: Any, example_inputs: Any, user_file=None) -> Optional[LoweringFailure]:
    """None when Inductor compiles ``gm`` (its code generated and built); else the failure.
    ``user_file(path) -> bool`` tells the user's files from torch's."""
    from torch._inductor.compile_fx import compile_fx

    try:
        with quiet_inductor():
            compile_fx(_own_graph(gm), example_inputs)
    except Exception as exc:  # any failure of Inductor's is the finding: lowering, codegen, C++ build
        return describe(exc, gm, user_file)
    return None


def _own_graph(gm: Any) -> Any:
    """``gm`` over a copy of its graph: Inductor's graph passes rewrite the graph they are given
    in place, and the recording backend runs ``gm`` itself afterwards."""
    import copy

    import torch.fx

    try:
        return torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    except Exception:  # a graph that will not copy is compiled as it is
        return gm


@contextlib.contextmanager
def quiet_inductor():
    """Inductor's and Dynamo's own log records off for the block: a failure is ours to tell."""
    saved = []
    for name in _LOGGERS:
        log = logging.getLogger(name)
        saved.append((log, log.level))
        log.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for log, level in saved:
            log.setLevel(level)


def describe(exc: BaseException, gm: Any = None, user_file=None) -> LoweringFailure:
    """``exc``, raised compiling a graph, as a LoweringFailure: the node Inductor was lowering
    when it failed (read off the traceback: GraphLowering.run_node's ``n``) gives the op and
    the user's line; the exception's first line is the reason."""
    node = _failing_node(exc)
    op = _op_name(node.target) if node is not None and node.op == "call_function" else None
    trace = (node.meta.get("stack_trace") if node is not None else None) or _first_trace(gm)
    frame = _user_frame(trace or "", user_file)
    failure = LoweringFailure(op=op, reason=reason_of(exc))
    if frame:
        failure.file, failure.line, failure.function = frame
        failure.source_line = _source(failure.file, failure.line)
    return failure


def reason_of(exc: BaseException) -> str:
    """The exception's first line, with its type (Inductor's wrappers already name the inner
    one: ``LoweringException: AssertionError: ...``)."""
    inner = getattr(exc, "inner_exception", None)
    shown = inner if inner is not None else exc
    text = str(shown).strip().splitlines()
    first = text[0].strip() if text else ""
    return f"{type(shown).__name__}: {first}"[:300] if first else type(shown).__name__


def one_line(f: LoweringFailure, where: str = "") -> str:
    """How a failure reads where a sentence is wanted (a bench arm's error)."""
    op = f" {f.op}" if f.op else ""
    at = f" at {where or f.file}:{f.line}" if f.file and f.line else ""
    return f"Inductor cannot lower{op}{at}: {f.reason}"


def _failing_node(exc: BaseException) -> Any:
    """The innermost fx node a frame of the traceback was running, over the exception's chain."""
    import torch.fx

    found = None
    seen: set[int] = set()
    e: Optional[BaseException] = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None:
            for name in ("n", "node"):
                v = tb.tb_frame.f_locals.get(name)
                if isinstance(v, torch.fx.Node):
                    found = v
            tb = tb.tb_next
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return found


def _op_name(target: Any) -> str:
    name = getattr(target, "name", None)
    if callable(name):  # an OpOverload: aten::_weight_int8pack_mm -> aten._weight_int8pack_mm.default
        ns, _, rest = str(target).partition(".")
        return f"{ns}.{rest}" if rest else str(target)
    return getattr(target, "__name__", None) or str(target)


def _first_trace(gm: Any) -> Optional[str]:
    for n in getattr(getattr(gm, "graph", None), "nodes", ()):
        if n.meta.get("stack_trace"):
            return n.meta["stack_trace"]
    return None


def _user_frame(trace: str, user_file) -> Optional[tuple[str, int, str]]:
    frames = [(m["file"], int(m["line"]), m["function"]) for m in _FRAME.finditer(trace)]
    mine = [f for f in frames if user_file is None or user_file(f[0])]
    return (mine or frames or [None])[-1]


def _source(file: str, line: int) -> Optional[str]:
    import linecache

    text = linecache.getline(file, line)
    return text.rstrip("\r\n") or None
