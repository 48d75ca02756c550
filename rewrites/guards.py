"""Code that never runs under ``torch.compile``, as the static detectors must recognise it.

Dynamo resolves the compile flags below to the constant True while it traces, so an arm they
rule out is never traced and holds no graph break:

* ``if not torch.compiler.is_compiling(): <eager only>`` (the guard ``mend fix`` writes in front
  of a logging call), ``if torch.compiler.is_compiling(): <compiled> else: <eager only>`` (its
  validation split), ``while not ...``, ``assert is_compiling() or <eager only>``;
* an early exit: ``if torch.compiler.is_compiling(): return y`` (or ``raise`` / ``continue`` /
  ``break``) leaves the rest of the block to eager code;
* the operands ``and`` / ``or`` never evaluate past a flag: ``not is_compiling() and (<eager
  only>)`` (the guard written into the condition of an ``if`` that only logs),
  ``is_compiling() or <eager only>``; likewise a ternary's ruled-out side.

And the helper functions ``mend fix`` defines at module level (``_mend_print`` ...): their bodies
are the repaired form, not a break to report again. mend owns the ``_mend_`` prefix of the
names it writes into user files; every ``rewrites.fixes.base.Helper`` carries it.

Stdlib only: the static scan imports neither torch nor libcst.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

# Every spelling of "is Dynamo tracing this?" user code writes by hand, and the one mend writes.
IS_COMPILING = frozenset({
    "torch.compiler.is_compiling",
    "torch.compiler.is_dynamo_compiling",
    "torch._dynamo.is_compiling",
    "torch._dynamo.external_utils.is_compiling",
    "torch._utils.is_compiling",
    "transformers.utils.is_torchdynamo_compiling",
    "transformers.utils.import_utils.is_torchdynamo_compiling",
})
# The flags' own names, however they were imported: transformers' modeling files reach
# ``is_torchdynamo_compiling`` through relative imports (``from ...utils import``) that do not
# resolve when one file is scanned, and libraries re-export the torch flag from their utils.
FLAG_NAMES = frozenset({"is_compiling", "is_dynamo_compiling", "is_torchdynamo_compiling"})


def is_compile_flag(name: Optional[str]) -> bool:
    """``name`` (a callee's dotted name, as ``name_of`` gives it) is one of the flags."""
    return bool(name) and (name in IS_COMPILING or name.rsplit(".", 1)[-1] in FLAG_NAMES)


def flag_wrapper(fn: ast.AST, name_of: Callable[[ast.AST], Optional[str]]) -> bool:
    """A function without parameters whose body (a docstring aside) is ``return <flag>()``:
    ``def _compiling(): return torch.compiler.is_compiling()``."""
    body = [s for s in fn.body if not (type(s) is ast.Expr and type(s.value) is ast.Constant)]
    a = fn.args
    if len(body) != 1 or type(body[0]) is not ast.Return or a.args or a.posonlyargs or a.kwonlyargs:
        return False
    return body[0].value is not None and compiled_value(body[0].value, name_of) is True


def terminates(stmts: list[ast.stmt]) -> bool:
    """The block never falls through: its last statement returns, raises, continues or breaks."""
    return bool(stmts) and type(stmts[-1]) in (ast.Return, ast.Raise, ast.Continue, ast.Break)

MEND_HELPER_PREFIX = "_mend_"
# mend's helpers that take NumPy arrays and run NumPy operations Dynamo traces
# (rewrites/fixes/runtime/interp.py): a tensor's ``.numpy()`` passed to one stays in the graph
NUMPY_HELPERS = frozenset({"_mend_interp"})


def compiled_value(node: ast.AST, name_of: Callable[[ast.AST], Optional[str]], first: bool = True) -> Optional[bool]:
    """What ``node`` evaluates to (as a condition) under torch.compile when the compile flags
    decide it; None when they do not. ``first``: only when they decide it before any other
    operand is read (``x.any() and not is_compiling()`` is False under compile, but reads a
    tensor first). ``name_of`` maps a callee to its dotted name through the file's imports
    (``is_compiling`` imported from ``torch.compiler``)."""
    t = type(node)
    if t is ast.Call:
        if node.args or node.keywords:
            return None
        return True if is_compile_flag(name_of(node.func)) else None
    if t is ast.UnaryOp and type(node.op) is ast.Not:
        v = compiled_value(node.operand, name_of, first)
        return None if v is None else not v
    if t is ast.BoolOp:
        stop = type(node.op) is ast.Or  # `or` stops at the first True, `and` at the first False
        undecided = False
        for v in node.values:
            d = compiled_value(v, name_of, first)
            if d is stop:
                return stop
            if d is None:
                if first:
                    return None
                undecided = True
        return None if undecided else not stop
    return None


def eager_operands(node: ast.BoolOp, name_of: Callable[[ast.AST], Optional[str]]) -> int:
    """Index of the first operand of ``node`` that compiled code never evaluates (len when
    every one may be): ``and`` stops after an operand that is False under compile, ``or``
    after one that is True."""
    stop = type(node.op) is ast.Or
    values = node.values
    for i, v in enumerate(values[:-1]):
        if compiled_value(v, name_of) is stop:
            return i + 1
    return len(values)


def is_mend_helper(node: ast.AST) -> bool:
    """A module-level ``def`` of one of mend's helpers."""
    return type(node) is ast.FunctionDef and node.name.startswith(MEND_HELPER_PREFIX)
