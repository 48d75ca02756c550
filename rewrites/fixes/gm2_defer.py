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
breaks twice: on the tensor condition and on the call. Guarding its condition::

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

from rewrites.fixes.base import (LOG_METHODS, Analysis, Case, Context, Edit, FunctionFacts, Helper, Plan, Refusal, Site,
                                 code, full_name, is_compiling_test, offer_unsafe, single, strip_item, strip_parens, tensorish)
from rewrites.tensors import META_ATTRS, META_METHODS

RULES = ("GM201", "GM202", "GM203")
UNSAFE_RULES = ("GM203",)  # a warning skipped under torch.compile: WARNING_CAVEAT
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
        lost = (f"this {'warning' if rule == 'GM203' else 'log message'} no longer fires in compiled code (eager "
                "code is unchanged): the message eager code emits when the tensor condition holds is lost under "
                "torch.compile")
        if not offer_unsafe(ctx, result, rule, start, what="Skipping the condition and the call under torch.compile",
                            cost=lost):
            continue
        site = Site(rule, start, end, "an `if` that only logs: condition and call skipped under torch.compile "
                    "(eager unchanged; unsafe: the message is lost in compiled code)", strategy="guard_if", caveat=lost)

        def build(updated: cst.If):
            inner = updated.test
            if isinstance(inner, _LOOSER_THAN_AND) and not inner.lpar:  # `c or d` must stay one operand
                inner = inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            guard = cst.BooleanOperation(left=cst.parse_expression("not torch.compiler.is_compiling()"),
                                         operator=cst.And(), right=inner)
            return updated.with_changes(test=guard)

        result.edits.append(Edit(node, build, site))
    return taken


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
    "    if (x > cap).any() or x.isnan().any():\n        logger.warning('bad input')\n    return x\n",
    "import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(x, cap):\n"
    "    if not torch.compiler.is_compiling() and ((x > cap).any() or x.isnan().any()):\n"
    "        logger.warning('bad input')\n    return x\n", unsafe=True,
)]

# left alone
CASES += [
    Case("import logging\nimport torch\nlogger = logging.getLogger(__name__)\ndef f(h):\n    if torch.isnan(h).any():\n"
         "        logger.warning('nan')\n    return h\n", reason="no longer fires in compiled code"),
    Case("import warnings\ndef f(x):\n    warnings.warn('deprecated')\n    return x * 2\n",
         reason="under `-W error`"),
    Case("print('module level')\n"),
    Case("def f(x):\n    y = print\n    return x\n"),
    Case("def f(x):\n    if x: logger.info('a')\n    return x\n"),
    Case("def f(x):\n    if not torch.compiler.is_compiling() and (x.any()):\n        logger.info('a')\n    return x\n"),
]
