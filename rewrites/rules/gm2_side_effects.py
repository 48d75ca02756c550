"""GM2xx: side effects Dynamo cannot put in a graph (printing, logging, warnings, I/O).

A graph is a pure function of tensors; a call that writes to the outside world must run
in Python at that point in the program, so Dynamo ends the graph before it and resumes
after it.
"""

from __future__ import annotations

import ast
import re

from rewrites.rules.base import Rule

_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal",
                          "log", "warning_once", "info_once", "warning_advice", "debug_once"})
_LOGGER_NAME = re.compile(r"(^|_)(log|logger|logging)$", re.IGNORECASE)
_IO_CALLS = frozenset({"sys.stdout.write", "sys.stderr.write", "sys.stdout.flush", "sys.stderr.flush",
                       "torch.save", "torch.load", "builtins.open", "io.open", "os.system"})

_DEFER = ("Keep eager behaviour byte-identical and remove the break under compilation: guard the call "
          "with `if not torch.compiler.is_compiling():` (the message is then skipped in compiled runs), or "
          "defer it: compute the tensor values inside the graph and emit the message after the compiled "
          "call returns. What `mend fix` does: `print` of tensors and constants is deferred (`_mend_print`, "
          "registered in `reorderable_logging_functions`: the same line, printed after the graph); a `print` "
          "with any other argument (`print('block input', x.shape)`: a `torch.Size`, a size, an f-string, a "
          "name mend cannot show is a tensor or constant, which Dynamo would refuse to replay) is guarded like "
          "a logger call; a lone logger call or "
          "`warnings.warn` is guarded -- eager output is unchanged, and the user loses that message from "
          "compiled code (the same message eager code emits on every call, so eager runs still show it). "
          "An `if` on a tensor whose body is one warning or one log call of a string literal "
          "(`if torch.isnan(h).any(): warnings.warn(\"NaN\", RuntimeWarning)`, or the call of the module's own "
          "logger, `logging.getLogger(__name__)`) becomes one call, `_mend_warn_if(cond, \"NaN\", RuntimeWarning, "
          "line)` / `_mend_log_if(cond, logger, \"warning\", \"...\", line)`, a SAFE fix: eager code warns or "
          "logs as before (the same class, message and logger, at the call's line), and under torch.compile an "
          "effectful custom op (kept by the compiler, in program order) reads the condition and emits the same "
          "message, naming the call's line of the original file; under `-W error` it raises there, as the "
          "original does. Its cost is the original's: the condition is read on the host (a sync) where the "
          "graph broke, now from inside one graph, through a custom op call (benchmarks/emit_cost.py measures it "
          "against the original; the cost gate, `mend fix --bench`, keeps it from a model it makes slower). "
          "Any other `if` on a tensor whose body only logs or warns (a formatted message, a tensor argument, "
          "a condition Python decides in part) gets the guard in its condition "
          "(`if not torch.compiler.is_compiling() and (cond):`), which "
          "removes the condition's break too, but then the warning eager code emits when the DATA says so "
          "never fires in compiled code: that is an UNSAFE fix, offered only with `mend fix --unsafe-fixes`; "
          "without the flag it is refused with \"this warning no longer fires in compiled code\". It is not "
          "deferred instead because Dynamo replays a reorderable function only with tensor, constant and "
          "string-format arguments (a logger's bound method is none), and a helper logging on the caller's "
          "behalf would change the function name and line that logging and warnings report.")

GM201 = Rule(
    code="GM201", name="print-call", category="side-effect",
    summary="`print(...)` inside a compiled region.",
    why=("`print` writes to stdout: Dynamo cannot record it in a graph, so it breaks the graph, runs the "
         "print eagerly and resumes after it; printing a tensor also forces its value."),
    fix=_DEFER + " Or list `print` in `torch._dynamo.config.reorderable_logging_functions` (Dynamo then "
                 "moves the print after the graph).",
    preconditions="The printed values are not used afterwards; the print has no other effect.",
    limits="Only the builtin `print` (not a local function or import named print).",
    gb_ids=("GB0059",),
    message_patterns=(r"builtin operator `print`|BuiltinVariable\(print\)|\bprint\b.*not supported",),
    source_patterns=(r"\bprint\(",),
    advice="move print out of the compiled region, or `if not torch.compiler.is_compiling(): print(...)`",
    message="`print` breaks the graph", hint="guard with torch.compiler.is_compiling() or defer",
    valid=("import torch\n\ndef f(x: torch.Tensor):\n    return x.sin()\n",
           "from rich import print\n\ndef f(x):\n    print(x)\n"),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    print('x', x.shape)\n    return x\n",),
)

GM202 = Rule(
    code="GM202", name="logging-call", category="side-effect",
    summary="A `logging.Logger` method (`logger.info`, `logger.warning_once`, `logging.warning`) in a compiled region.",
    why=("Logger methods are not traceable (`logging.Logger method not supported for non-export cases`): "
         "the graph breaks at the call."),
    fix=_DEFER + " Alternatively list the method in `torch._dynamo.config.ignore_logger_methods`.",
    preconditions="The logged values are not used afterwards.",
    limits=("A logger is recognised by its name (`logger`, `log`, `_logger`, `LOGGER`, `self.logger`, "
            "`logging`): a logger stored under another name is not seen."),
    gb_ids=("GB0291",),
    gb_types=("logging.Logger method not supported for non-export cases",),
    message_patterns=(r"logging\.Logger|\blogger\b|warning_once|logging\.\w+\(",),
    source_patterns=(r"\blog(ger|ging)?\.\w+\(",),
    advice="`if not torch.compiler.is_compiling(): logger.warning(...)` (skipped under compile)",
    message="logger call `.{method}(...)` breaks the graph", hint="guard with torch.compiler.is_compiling() or defer",
    valid=("def f(catalog):\n    catalog.info('x')\n    return catalog\n",),
    invalid=("import logging\nlogger = logging.getLogger(__name__)\n\ndef f(x):\n    logger.warning_once('slow path')\n    return x\n",
             "import logging\n\ndef f(x):\n    logging.info('x=%s', x)\n    return x\n"),
)

GM203 = Rule(
    code="GM203", name="warnings-warn", category="side-effect",
    summary="`warnings.warn(...)` inside a compiled region.",
    why="`warnings.warn` is a skipped C-level function for Dynamo: calling it breaks the graph.",
    fix=_DEFER, preconditions="The warning's arguments are plain Python values or are computed outside the graph.",
    limits="`warnings.warn` and `from warnings import warn` aliases.",
    gb_ids=("GB0007",),
    message_patterns=(r"warnings\.warn|\bwarn\b.*skipped|_warnings",),
    advice="`if not torch.compiler.is_compiling(): warnings.warn(...)` (skipped under compile)",
    messages={"imported": "`{name}` (warnings.warn) breaks the graph", "attribute": "`{qualname}` breaks the graph"},
    hint="guard or defer the warning",
    valid=("def f(x, warn):\n    warn('x')\n    return x\n",),
    invalid=("import warnings\n\ndef f(x):\n    warnings.warn('deprecated')\n    return x\n",
             "from warnings import warn as w\n\ndef f(x):\n    w('deprecated')\n    return x\n"),
)

GM204 = Rule(
    code="GM204", name="io-call", category="side-effect",
    summary="File or stream I/O (`open`, `sys.stdout.write`, `torch.save`) inside a compiled region.",
    why="I/O cannot be captured in a graph; Dynamo breaks at the call.",
    fix="Move the I/O out of the compiled function (before or after the compiled call).",
    preconditions="Advice only: moving I/O changes when it happens.",
    limits="`open`, `sys.stdout/stderr.write/flush`, `torch.save/load`, `os.system` by name.",
    gb_ids=("GB0007",),
    advice="do I/O outside the compiled function",
    messages={"open": "`open` (file I/O) breaks the graph",
              "imported": "`{name}` ({qualname}) is I/O and breaks the graph",
              "attribute": "`{qualname}` is I/O and breaks the graph"},
    hint="move the I/O out of the compiled region",
    valid=("def f(x, sink):\n    sink.write(x)\n    return x\n",),
    invalid=("import sys\n\ndef f(x):\n    sys.stdout.write('step\\n')\n    return x\n",
             "def f(x):\n    with open('log.txt', 'a') as fh:\n        fh.write('x')\n    return x\n"),
)

RULES = (GM201, GM202, GM203, GM204)
NAMES_BREAKS = 4


def _logger_receiver(node: ast.AST) -> bool:
    t = type(node)
    if t is ast.Name:
        return bool(_LOGGER_NAME.search(node.id))
    if t is ast.Attribute:
        return bool(_LOGGER_NAME.search(node.attr))
    if t is ast.Call:  # logging.getLogger(__name__).info(...)
        f = node.func
        return type(f) is ast.Attribute and f.attr in ("getLogger", "get_logger")
    return False


def _check_call(node: ast.Call, ctx) -> None:
    f = node.func
    tf = type(f)
    if tf is ast.Name:
        name = f.id
        if name == "print":
            if "print" not in ctx.fa.imports:
                ctx.report("GM201", node)
            return
        if name == "open":
            if "open" not in ctx.fa.imports and "open" not in ctx.env:
                ctx.report("GM204", node, variant="open")
            return
        qn = ctx.fa.imports.get(name)
        if qn in ("warnings.warn", "warnings.warn_explicit"):
            ctx.report("GM203", node, variant="imported", name=name)
        elif qn in _IO_CALLS:
            ctx.report("GM204", node, variant="imported", name=name, qualname=qn)
        return
    if tf is not ast.Attribute:
        return
    m = f.attr
    if m in _LOG_METHODS:
        recv = f.value
        qn = ctx.resolve(f)
        if qn is not None and qn.startswith("warnings."):
            ctx.report("GM203", node, variant="attribute", qualname=qn)
        elif (qn is not None and qn.startswith("logging.")) or (qn is None and _logger_receiver(recv)):
            ctx.report("GM202", node, method=m)
        return
    if m in ("write", "flush", "save", "load", "system"):
        qn = ctx.resolve(f)
        if qn in _IO_CALLS:
            ctx.report("GM204", node, variant="attribute", qualname=qn)


HOOKS = {ast.Call: (_check_call,)}
