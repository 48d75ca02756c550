"""GM2xx: side effects inside compiled code ([Defer]).

``print(...)`` (GM201) is routed through a module-level helper ``_mend_print`` that the
module registers in ``torch._dynamo.config.reorderable_logging_functions`` (torch >= 2.5;
on older torch the registration is skipped and the call breaks as before):

* eager: ``_mend_print`` calls ``print`` with the same arguments -- the output is
  byte-identical;
* under ``torch.compile``: Dynamo records the call instead of breaking the graph and
  replays it after the graph has run, with the same arguments (tensors printed with the
  values the graph computed). What the user sees: the same line, printed after the
  compiled region's other work instead of in the middle of it.

Dynamo replays only a print whose arguments are tensors or constants (and string
formatters); ``print("block input", x.shape)`` deferred breaks again ("attempted to reorder a
debugging function that can't actually be reordered": a ``torch.Size``, a size that is a
SymInt under dynamic shapes, a list or an f-string is none of these). A print with an
argument that is not a literal or an expression the inference knows to be a tensor gets the
``is_compiling()`` guard below instead, as logger calls do: eager prints byte-identically,
compiled code skips the print (the user loses that line from compiled runs; its text does
not depend on tensor values, only on shapes and Python values, which eager runs show).

Logger methods (GM202: ``logger.info/warning/...``, ``logging.warning``, transformers'
``logger.warning_once``) and ``warnings.warn`` (GM203) get a guard on their own line, the call
indented under it, as a reviewer would write it::

    if not torch.compiler.is_compiling():
        logger.warning("...")

* eager: the call runs exactly as before, with the same arguments (its log record or warning
  names the call's new line, one below the guard);
* under ``torch.compile``: the call is skipped -- the message is NOT emitted, on any call of
  the compiled function. What the user loses: that message (a deprecation notice, a "slow
  path" note) from compiled code; every message eager code emits is still emitted there.
  A log message or a print stays a safe fix because it does not depend on the data: it is
  the one message the region emits on every call, and the eager run shows it. A
  ``warnings.warn`` is UNSAFE (``--unsafe-fixes``; its ``Site.caveat`` says why): a warning
  is also control flow -- under ``-W error`` or a ``simplefilter("error")`` the original
  raises there, compiled as well (the call runs in the break), and the guarded call raises
  in eager code only; verification runs with the default filters and cannot see it.

Why not deferred like ``print``: Dynamo replays a function of
``reorderable_logging_functions`` only with Tensors, constants and string formatters as
arguments (``DebuggingVariable.can_reorder_logs`` in torch/_dynamo/variables/misc.py), and
only its positional ones; a logger's bound method is none of these, and a module-level
helper that logs for the caller would change the caller Python's logging and warnings
attribute the message to (function name, line, the warnings registry's once-per-location),
so eager output would differ. ``torch.compiler.is_compiling`` exists from torch 2.3, so
both forms work on 2.9 to 2.14.

An ``if`` whose body only logs or warns (``if (counts > cap).any(): logger.warning(...)``)
breaks twice: on the tensor condition and on the call. Where the body is one call of a string
literal (``warnings.warn("...")`` with Python's own warning class, or ``logger.<level>("...")``
of the module's own logger, ``logging.getLogger(__name__)``) and the condition is one tensor
(``not t`` becomes ``torch.logical_not(t)``; ``and`` / ``or`` / ``.item()`` leave Python deciding
part of it), the message keeps firing in compiled code, a SAFE fix::

    _mend_warn_if(torch.isnan(h).any(), "NaN in the hidden state", RuntimeWarning, 17)

* eager: ``if cond: warnings.warn(message, category, stacklevel=2)`` inside the helper: the same
  class, message and module, at the caller's line (a logger call the same, the same record);
* under ``torch.compile``: one graph; an effectful custom op (``mend::warn_if`` /
  ``mend::log_if``, registered ORDERED with torch's effects machinery, so the compiler keeps it
  where it stands though it returns nothing) reads the condition -- the host sync the break
  made, now inside the graph -- and warns (``warnings.warn_explicit``, the module's registry) or
  logs (a record made by the module's logger) naming line 17 of the original file. Under
  ``-W error`` the op raises the warning, as the original raises it. The runtime is
  rewrites/fixes/runtime/emit.py, copied into the file. Verification compares what each call
  warned and logged (graphmend/verify/modes.py), and fills inputs with NaN or infinity where a
  condition asks for one, so both arms run.

Any other such ``if`` gets its condition guarded::

    if not torch.compiler.is_compiling() and (counts > cap).any():
        logger.warning(...)

* eager: the condition is evaluated and the message emitted exactly as before;
* under ``torch.compile``: neither the condition nor the call runs -- no break, and no
  message: the warning eager code emits when the DATA says so (a NaN, an overflow) never
  fires in compiled code, which is what the user wanted to hear about. So this is an UNSAFE
  fix (``base.offer_unsafe``): planned only with ``unsafe=True`` (``--unsafe-fixes``), else a
  refusal saying "this warning no longer fires in compiled code".
"""

from __future__ import annotations

import libcst as cst

from rewrites.fixes.base import Analysis, Case, Context, Edit, Helper, Plan, Refusal, STATEMENT, Site, offer_unsafe, single
from rewrites.fixes.facts import FunctionFacts
from rewrites.fixes.judgements import (LOG_METHODS, code, full_name, is_compiling_test, is_string_literal, strip_item,
                                       strip_parens, tensorish)
from rewrites.fixes.runtime import custom_op_lacking, helper
from rewrites.tensors import META_ATTRS, META_METHODS

RULES = ("GM201", "GM202", "GM203")
# (GM203 also has a safe rewrite, the emit_if of an `if` that only warns: no rule here is unsafe only)
ORDER = 20

PRINT_HELPER = Helper('''def _mend_print(*args, **kwargs):
    # mend GM201: eager prints as before; torch.compile replays it after the graph
    print(*args, **kwargs)


try:
    import torch._dynamo as _mend_dynamo

    _mend_dynamo.config.reorderable_logging_functions.add(_mend_print)
except (ImportError, AttributeError):  # torch < 2.5: the print breaks
    pass
''')

_LOGGER_OBJECTS = ("logger", "log", "_logger", "LOGGER", "logging", "_LOGGER", "LOG")


def classify_call(call: cst.Call) -> str | None:
    fn = full_name(call.func) or ""
    if fn == "print":
        return "GM201"
    if fn in ("warnings.warn", "warn", "warnings.warn_explicit"):
        return "GM203"
    if isinstance(call.func, cst.Attribute):
        m = call.func.attr.value
        if m in ("warning_once", "info_once"):
            return "GM202"
        owner = fn.rsplit(".", 1)[0] if "." in fn else ""
        if m in LOG_METHODS and owner.split(".")[-1] in _LOGGER_OBJECTS:
            return "GM202"
    return None


def side_effect_call(stmt) -> tuple[cst.Call, str] | None:
    """(call, rule) when ``stmt`` is one line holding only a print/logging/warnings call."""
    s = single(stmt)
    if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call):
        rule = classify_call(s.value)
        if rule:
            return s.value, rule
    return None


def _replayable(arg: cst.BaseExpression, tnames: frozenset[str]) -> bool:
    """Can Dynamo replay ``arg`` after the graph? Only a tensor or a constant can
    (``DebuggingVariable.can_reorder_logs``): a literal, or an expression the inference
    knows is a tensor. A ``torch.Size``, a size read as a SymInt under dynamic shapes, a
    list or an unknown name is not: such a print breaks again when deferred."""
    a = strip_parens(arg)
    while isinstance(a, cst.UnaryOperation) and isinstance(a.operator, (cst.Minus, cst.Plus)):
        a = a.expression
    if isinstance(a, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)):
        return True
    if isinstance(a, cst.Name) and a.value in ("None", "True", "False"):
        return True
    return tensorish(a, tnames) and not _meta(a)


def _meta(node: cst.BaseExpression) -> bool:
    """A shape / size read (``x.shape``, ``x.size(0)``, ``x.shape[0]``): not a tensor."""
    n = node
    while isinstance(n, cst.Subscript):
        n = n.value
    if isinstance(n, cst.Attribute):
        return n.attr.value in META_ATTRS
    return isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in META_METHODS


def _unreplayable(call_node: cst.Call, tnames: frozenset[str]) -> str | None:
    """The first argument of ``print(...)`` Dynamo could not replay (its code), else None."""
    for a in call_node.args:
        if a.star or not _replayable(a.value, tnames):
            return code(a.value) if not a.star else code(a)
    return None


def _under_eager_guard(an: Analysis, node: cst.CSTNode) -> bool:
    """Is ``node`` in the body of an ``if not torch.compiler.is_compiling():`` (a guard this
    family, or the user, wrote)?"""
    child, p = node, an.parent(node)
    while p is not None and not isinstance(p, cst.FunctionDef):
        if isinstance(p, cst.If) and child is p.body:
            t = strip_parens(p.test)
            if isinstance(t, cst.UnaryOperation) and isinstance(t.operator, cst.Not) \
                    and is_compiling_test(t.expression):
                return True
        child, p = p, an.parent(p)
    return False


def _only_logs(block) -> bool:
    """Every statement of ``block`` is a logger/warnings call (not print: GM201 keeps it)."""
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return False
    return all((side_effect_call(st) or (None, ""))[1] in ("GM202", "GM203") for st in block.body)


def _plan_logging_ifs(an: Analysis, ctx: Context, result: Plan) -> set[int]:
    """Guard the condition of ``if`` statements that only log; returns the ids of the calls
    they hold (handled here, not one by one)."""
    ifs: list[cst.If] = []

    class V(cst.CSTVisitor):
        def visit_If(self, n: cst.If) -> None:
            if n.orelse is None and _only_logs(n.body):
                ifs.append(n)

    an.visit_covering(V(), ctx)
    taken: set[int] = set()
    for node in ifs:
        start, end = an.span(node)
        calls, rules = zip(*(side_effect_call(st) for st in node.body.body))
        rule = "GM202" if "GM202" in rules else "GM203"
        if not ctx.wants(rule) or not ctx.covers(start, end) or an.enclosing_function(node) is None:
            continue
        if isinstance(an.parent(node), cst.If):  # an ``elif``: guarding it would change the chain
            continue
        if "is_compiling" in an.module.code_for_node(node.test):
            taken.update(id(c) for c in calls)
            continue  # already guarded (a second run changes nothing)
        ts, te = an.span(node.test)
        if not (tensorish(strip_item(node.test), FunctionFacts(an, an.enclosing_function(node)).tensor_names(start))
                or set(range(ts, te + 1)) & ctx.tensor_lines):
            continue  # a Python condition (``if self.size_average is not None``): Dynamo decides it while
            # tracing, and each call in it gets the guard a lone call gets
        taken.update(id(c) for c in calls)
        emit = _emitter(an, node, calls[0]) if len(calls) == 1 and _as_tensor(node.test) is not None else None
        if emit is not None and not isinstance(emit, str):
            _plan_emit(an, node, rule, emit, result)
            continue
        lost = (f"this {'warning' if rule == 'GM203' else 'log message'} no longer fires in compiled code (eager "
                "code is unchanged): the message eager code emits when the tensor condition holds is lost under "
                "torch.compile")
        if not offer_unsafe(ctx, result, rule, start, what="Skipping the condition and the call under torch.compile",
                            cost=lost):
            continue
        site = Site(rule, start, end, "an `if` that only logs: condition and call skipped under torch.compile "
                    "(eager unchanged; unsafe: the message is lost in compiled code)", strategy="guard_if", caveat=lost,
                    claims=STATEMENT)

        def build(updated: cst.If):
            inner = updated.test
            if isinstance(inner, _LOOSER_THAN_AND) and not inner.lpar:  # `c or d` must stay one operand
                inner = inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            guard = cst.BooleanOperation(left=cst.parse_expression("not torch.compiler.is_compiling()"),
                                         operator=cst.And(), right=inner)
            return updated.with_changes(test=guard)

        result.edits.append(Edit(node, build, site))
    return taken


# the warning classes a rewritten call may name: Python's own (the op finds them by name)
_WARNINGS = frozenset("Warning UserWarning DeprecationWarning PendingDeprecationWarning SyntaxWarning RuntimeWarning "
                      "FutureWarning ImportWarning UnicodeWarning BytesWarning ResourceWarning".split())
# logger methods a rewritten call may use, and how a module names its own logger
_EMIT_METHODS = frozenset("debug info warning warn error critical".split())
_OWN_LOGGER = ("logging.getLogger(__name__)", "logging.get_logger(__name__)", "getLogger(__name__)",
               "get_logger(__name__)")
EMIT = helper("emit")


def effects_lacking() -> str | None:
    """Why the installed torch cannot keep an effectful custom op in a graph, or None: read
    from torch when the process has imported it, else from its version (the planner imports
    no torch; custom ops and their effects registry came in 2.4)."""
    import sys

    if sys.modules.get("torch") is None:
        return custom_op_lacking("the op that warns or logs")
    try:
        from torch._higher_order_ops.effects import _EffectType, _register_effectful_op  # noqa: F401
    except ImportError:
        return "this torch cannot keep an effectful custom op in the graph (torch._higher_order_ops.effects)"
    return custom_op_lacking("the op that warns or logs")


def _module_logger(an: Analysis, name: str) -> bool:
    """``name`` is bound at module level, once, to the module's own logger (named after it)."""
    found = [st for st in an.module.body if isinstance(single(st), cst.Assign)
             and any(isinstance(t.target, cst.Name) and t.target.value == name for t in single(st).targets)]
    return len(found) == 1 and code(single(found[0]).value).replace(" ", "") in _OWN_LOGGER


def _emitter(an: Analysis, node: cst.If, call: cst.Call):
    """How the one call of an ``if`` that only warns or logs keeps firing under compile:
    ("warn", message, category) / ("log", logger, method, message); a string (why not) for a
    call of another form."""
    fn = full_name(call.func) or ""
    if fn in ("warnings.warn", "warn"):
        args = list(call.args)
        if not args or args[0].keyword is not None or not is_string_literal(args[0].value):
            return "the warning's message is not a string literal"
        category = "UserWarning"
        for a in args[1:]:
            if (a.keyword is None and a is args[1] or a.keyword is not None and a.keyword.value == "category") \
                    and isinstance(a.value, cst.Name) and a.value.value in _WARNINGS:
                category = a.value.value
            else:
                return f"`{code(a)}` is not one of Python's warning classes"
        return ("warn", args[0].value, category)
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in _EMIT_METHODS \
            and isinstance(call.func.value, cst.Name):
        if len(call.args) != 1 or call.args[0].keyword is not None or not is_string_literal(call.args[0].value):
            return "the log call is not one string literal"
        if not _module_logger(an, call.func.value.value):
            return f"`{call.func.value.value}` is not this module's own logger (logging.getLogger(__name__))"
        return ("log", call.func.value, call.func.attr.value, call.args[0].value)
    return "not a warnings.warn or a logger call"


def _as_tensor(test: cst.BaseExpression):
    """The condition as one tensor the op can take (``not t`` -> ``torch.logical_not(t)``); None
    where Python decides part of it (``and`` / ``or``, a chained comparison, a value read back
    with ``.item()`` / ``bool()`` / ``int()``)."""
    t = strip_parens(test)
    if isinstance(t, cst.UnaryOperation) and isinstance(t.operator, cst.Not):
        inner = _as_tensor(t.expression)
        return None if inner is None else cst.Call(cst.parse_expression("torch.logical_not"), [cst.Arg(inner)])
    if isinstance(t, (cst.BooleanOperation, cst.IfExp, cst.NamedExpr)) \
            or isinstance(t, cst.Comparison) and len(t.comparisons) != 1:
        return None
    bad = [n for n in names_in_calls(t) if n in ("item", "tolist", "bool", "int", "float", "len", "any", "all")
           and not _tensor_method(t, n)]
    return None if bad else t


def names_in_calls(node: cst.CSTNode) -> list[str]:
    """The names called in ``node``: ``f(...)`` -> f, ``x.m(...)`` -> m."""
    out: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if isinstance(n.func, cst.Name):
                out.append(n.func.value)
            elif isinstance(n.func, cst.Attribute):
                out.append(n.func.attr.value)

    node.visit(V())
    return out


def _tensor_method(node: cst.CSTNode, name: str) -> bool:
    """Every call of ``name`` in ``node`` is a method (``t.any()``), not Python's builtin."""
    found: list[bool] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if isinstance(n.func, cst.Name) and n.func.value == name:
                found.append(False)
            elif isinstance(n.func, cst.Attribute) and n.func.attr.value == name:
                found.append(name not in ("item", "tolist"))

    node.visit(V())
    return all(found)


def _plan_emit(an: Analysis, node: cst.If, rule: str, emit: tuple, result: Plan) -> None:
    """``if <tensor>: warnings.warn("...")`` (or a module logger's call) -> one call of
    ``_mend_warn_if`` / ``_mend_log_if``: the message fires in compiled code too."""
    start, end = an.span(node)
    missing = effects_lacking()
    if missing:
        result.refusals.append(Refusal(rule, start, f"not kept firing under torch.compile: {missing}"))
        return
    line = an.span(node.body.body[0])[0]
    what = "warning" if emit[0] == "warn" else "log message"
    site = Site(rule, start, end, f"the {what} fires in compiled code too: an effectful custom op reads the condition "
                "(a host sync there) and emits it", conditions=[an.rng(node.test)], strategy="emit_if")

    def build(updated: cst.If, emit=emit, line=line):
        cond = _as_tensor(updated.test)
        if emit[0] == "warn":
            args = [cond, emit[1], cst.Name(emit[2]), cst.Integer(str(line))]
            fn = "_mend_warn_if"
        else:
            args = [cond, emit[1], cst.SimpleString(f'"{emit[2]}"'), emit[3], cst.Integer(str(line))]
            fn = "_mend_log_if"
        call = cst.Call(cst.Name(fn), [cst.Arg(a) for a in args])
        return cst.SimpleStatementLine([cst.Expr(call)], leading_lines=updated.leading_lines)

    result.edits.append(Edit(node, build, site, helpers=(EMIT,)))


# what a guarded warnings.warn changes that no check sees (the checks run the default filters)
WARNING_CAVEAT = ("this warning no longer fires in compiled code: under `-W error` (or a filter that raises) the "
                  "original raises there, the guarded call only in eager code")


# operands that bind looser than (or as loose as) ``and``: parenthesised behind ``not is_compiling() and``
_LOOSER_THAN_AND = (cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.NamedExpr)


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    in_ifs = _plan_logging_ifs(an, ctx, result)
    stmts: list[tuple[cst.SimpleStatementLine, cst.Call, str]] = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, n: cst.SimpleStatementLine) -> None:
            found = side_effect_call(n)
            if found:
                stmts.append((n, *found))

    an.visit_covering(V(), ctx)
    for stmt, callnode, rule in stmts:
        if not ctx.wants(rule) or id(callnode) in in_ifs:
            continue
        start, end = an.span(stmt)
        fn = an.enclosing_function(stmt)
        if not ctx.covers(start, end) or fn is None or fn.name.value == PRINT_HELPER.name:
            continue
        if _under_eager_guard(an, stmt):
            continue  # ``if not torch.compiler.is_compiling():`` already: dead under compile
        unreplayable = None
        if rule == "GM201":
            unreplayable = _unreplayable(callnode, FunctionFacts(an, fn).tensor_names(start))
        if rule == "GM201" and unreplayable is None:
            site = Site(rule, start, end, "print -> _mend_print (replayed after the graph under torch.compile)",
                        strategy="defer")

            def build(updated: cst.SimpleStatementLine):
                c = updated.body[0].value
                return updated.with_changes(body=[updated.body[0].with_changes(
                    value=c.with_changes(func=cst.Name(PRINT_HELPER.name)))])

            result.edits.append(Edit(stmt, build, site, needs_torch=False, helpers=(PRINT_HELPER,)))
        else:
            if not isinstance(an.parent(stmt), cst.IndentedBlock):
                result.refusals.append(Refusal(rule, start, "the call shares a line with other code"))
                continue
            what = "warnings.warn" if rule == "GM203" else (full_name(callnode.func) or "logging call")
            why = "" if unreplayable is None else (f" (`{unreplayable}` is not a tensor or a constant: Dynamo "
                                                   "cannot replay the print after the graph)")
            caveat = WARNING_CAVEAT if rule == "GM203" else ""
            if caveat and not offer_unsafe(ctx, result, rule, start, caveat, "Skipping the warning under torch.compile"):
                continue
            site = Site(rule, start, end, f"{what} skipped under torch.compile (eager unchanged){why}",
                        strategy="guard", caveat=caveat)

            def build_guard(updated: cst.SimpleStatementLine):
                # the guard takes the call's place (and the comments above it); the call, its
                # trailing comment kept, goes one level in
                return cst.If(
                    test=cst.parse_expression("not torch.compiler.is_compiling()"),
                    body=cst.IndentedBlock(body=[updated.with_changes(leading_lines=())]),
                    leading_lines=updated.leading_lines,
                )

            result.edits.append(Edit(stmt, build_guard, site))
    return result


CASES = [
    Case(
        "import torch\n\n\ndef f(x):\n    y = x + 1\n    print('y is', y)  # tell\n    return y\n",
        "import torch\n\n\ndef _mend_print(*args, **kwargs):\n"
        "    # mend GM201: eager prints as before; torch.compile replays it after the graph\n"
        "    print(*args, **kwargs)\n\n\ntry:\n    import torch._dynamo as _mend_dynamo\n\n"
        "    _mend_dynamo.config.reorderable_logging_functions.add(_mend_print)\n"
        "except (ImportError, AttributeError):  # torch < 2.5: the print breaks\n    pass\n\n\n"
        "def f(x):\n    y = x + 1\n    _mend_print('y is', y)  # tell\n    return y\n",
    ),
    Case(
        "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(x):\n"
        "    logger.warning_once('slow path %s', 3)\n    return x * 2\n",
        "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(x):\n"
        "    if not torch.compiler.is_compiling():\n        logger.warning_once('slow path %s', 3)\n"
        "    return x * 2\n",
    ),
    Case(  # unsafe: the warning (an exception under -W error) is lost in compiled code
        "import warnings\ndef f(x):\n    warnings.warn('deprecated')\n    return x * 2\n",
        "import warnings\nimport torch\n\ndef f(x):\n    if not torch.compiler.is_compiling():\n        warnings.warn('deprecated')\n"
        "    return x * 2\n", unsafe=True,
    ),
    Case(  # an ``if`` that only warns on a Python value: Dynamo decides it; the call gets the lone guard
        "import warnings\ndef f(self, x):\n    if self.size_average is not None:\n"
        "        warnings.warn('deprecated', FutureWarning)\n    return x * 2\n",
        "import warnings\nimport torch\n\ndef f(self, x):\n    if self.size_average is not None:\n"
        "        if not torch.compiler.is_compiling():\n            warnings.warn('deprecated', FutureWarning)\n"
        "    return x * 2\n", unsafe=True,
    ),
    Case(  # the comment above the call stays above the guard; the call keeps its own comment
        "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(x):\n    y = x + 1\n\n"
        "    # say where we are\n    logger.info('step %d', 3)  # noisy\n    return y\n",
        "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(x):\n    y = x + 1\n\n"
        "    # say where we are\n    if not torch.compiler.is_compiling():\n        logger.info('step %d', 3)  # noisy\n"
        "    return y\n",
    ),
]

CASES += [
    Case(  # a torch.Size cannot be replayed after the graph: the guard instead, on its own line
        "import torch\n\n\ndef forward(self, x):\n    print(\"block input\", x.shape)\n    return x * 2\n",
        "import torch\n\n\ndef forward(self, x):\n    if not torch.compiler.is_compiling():\n"
        "        print(\"block input\", x.shape)\n    return x * 2\n",
    ),
    Case(  # a size, an f-string, an unknown name: guarded; the comment stays with the call
        "import torch\n\n\ndef f(x, step):\n    for i in range(2):\n"
        "        print(f\"step {step}\", x.size(0), i)  # progress\n    return x\n",
        "import torch\n\n\ndef f(x, step):\n    for i in range(2):\n"
        "        if not torch.compiler.is_compiling():\n"
        "            print(f\"step {step}\", x.size(0), i)  # progress\n    return x\n",
    ),
]

# with --unsafe-fixes only: the message is lost under compile
CASES += [Case(
    "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(x, cap):\n"
    "    if (x > cap).any():  # overflow\n        logger.warning('over %d', int((x > cap).sum()))\n"
    "        warnings.warn('over')\n    return x.clamp(max=cap)\n",
    "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(x, cap):\n"
    "    if not torch.compiler.is_compiling() and (x > cap).any():  # overflow\n"
    "        logger.warning('over %d', int((x > cap).sum()))\n"
    "        warnings.warn('over')\n    return x.clamp(max=cap)\n", unsafe=True,
), Case(  # an `or` condition stays one operand of the guard's `and`
    "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(x, cap):\n"
    "    if (x > cap).any() or x.isnan().any():\n        logger.warning('bad input: %d', len(x))\n    return x\n",
    "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(x, cap):\n"
    "    if not torch.compiler.is_compiling() and ((x > cap).any() or x.isnan().any()):\n"
    "        logger.warning('bad input: %d', len(x))\n    return x\n", unsafe=True,
)]

# a literal message under a tensor condition keeps firing in compiled code: one call of the
# helper, whose effectful op reads the condition (safe: eager code warns and logs as before)
_NAN_LOG = "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(h):\n    if torch.isnan(h).any():\n" \
    "        logger.warning('nan')\n    return h\n"
_NAN_WARN = "import warnings\nimport torch\ndef f(h):\n    if not torch.isfinite(h).all():\n" \
    "        warnings.warn('not finite', RuntimeWarning)\n    return h\n"
CASES += [
    Case(_NAN_LOG, _NAN_LOG.replace("import torch\n", "import torch\n\n\n" + EMIT.source + "\n\n")
         .replace("    if torch.isnan(h).any():\n        logger.warning('nan')\n",
                  "    _mend_log_if(torch.isnan(h).any(), logger, \"warning\", 'nan', 6)\n")),
    Case(_NAN_WARN, _NAN_WARN.replace("import torch\n", "import torch\n\n\n" + EMIT.source + "\n\n")
         .replace("    if not torch.isfinite(h).all():\n        warnings.warn('not finite', RuntimeWarning)\n",
                  "    _mend_warn_if(\n        torch.logical_not(torch.isfinite(h).all()),\n        'not finite',\n"
                  "        RuntimeWarning,\n        5,\n    )\n")),
]

# left alone
CASES += [
    # a logger not named after the module, an f-string: the message may differ, only unsafe
    Case(_NAN_LOG.replace("getLogger(__name__)", "getLogger('other')"), reason="no longer fires in compiled code"),
    Case(_NAN_WARN.replace("'not finite'", "f'not finite: {h.shape}'"), reason="no longer fires in compiled code"),
    Case(_NAN_LOG.replace("torch.isnan(h).any()", "h.isnan().any() or h.max().item() > 9"),
         reason="no longer fires in compiled code"),  # Python decides part of the condition
    Case("import warnings\ndef f(x):\n    warnings.warn('deprecated')\n    return x * 2\n",
         reason="under `-W error`"),
    Case("print('module level')\n"),
    Case("def f(x):\n    y = print\n    return x\n"),
    Case("def f(x):\n    if x: logger.info('a')\n    return x\n"),
    Case("def f(x):\n    if not torch.compiler.is_compiling() and (x.any()):\n        logger.info('a')\n    return x\n"),
]
