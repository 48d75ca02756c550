"""GM4xx: validation guards on tensor values (`assert (x >= 0).all()`, `if ...: raise`).

A check on tensor data is a data-dependent branch whose failure path raises; Dynamo breaks
the graph to evaluate it eagerly.
"""

from __future__ import annotations

import ast

from rewrites.rules._util import is_raise_only, snippet
from rewrites.rules.base import Rule
from rewrites.tensors import LIMITS, TENSORISH

_TRAP = ("Split the statement on `torch.compiler.is_compiling()`: compiled code gets the check as a graph op, "
         "`torch._assert_async(cond, msg)` (checked on device, asynchronously), and eager code runs the original "
         "statement verbatim (`else: assert ...` / `elif cond: raise E(msg)`). Dynamo resolves `is_compiling()` "
         "while tracing, so the graph has no break. `if cond: raise E(\"literal\")` on a condition that is one "
         "tensor as written becomes one line, `_mend_raise_if(cond, E, \"literal\")`, a helper defined once in "
         "the file that makes the same split (eager code raises `E(\"literal\")` from inside it).")
_TRAP_CHANGES = ("What changes for the user: nothing in eager code (same exception type and message, a bare "
                 "`AssertionError()` for an assert without a message, `python -O` strips the assert as before). "
                 "Under `torch.compile` a failing check raises `RuntimeError` instead of the original type (on CUDA "
                 "at the next synchronisation), with the original message when it is a string literal and "
                 "`'assertion failed: <condition>'` (`'check failed: ...'` for a raise) when it is computed (an "
                 "f-string cannot be built inside the graph); `python -O` does not strip the compiled check. "
                 "`torch._check` gets no message under compile (a message closure is itself a graph break on "
                 "torch 2.9 and 2.11).")

GM401 = Rule(
    code="GM401", name="tensor-assert", category="validation",
    summary="`assert` on a tensor value.",
    why=("`assert cond` calls `bool(cond)` on a data-dependent value. Dynamo rewrites `assert <tensor>` with no "
         "message or a constant string message into `torch._assert_async` itself (no break); with a computed "
         "message (an f-string, a call) or a condition read into Python (`.item()`, `torch.equal`) it breaks "
         "the graph (or fails with `Data-dependent assertion failed`)."),
    fix=_TRAP + (" An `assert list(t.size()) == [a, b]` on which Dynamo broke (sizes read from data) becomes, "
                 "in compiled code, one `torch._check` per dimension, through a helper that uses `_assert_async` "
                 "when an item is a 0-dim tensor (a `.max()` of counts, as in Longformer's global attention). "
                 + _TRAP_CHANGES),
    preconditions=("The condition is a boolean tensor (or reduces to one with `.all()`). Refused: a message with "
                   "side effects (it would run in a different place)."),
    limits=("Asserts on shapes (`assert x.dim() == 3`) and tensor asserts with a constant message are not "
            "reported. " + LIMITS),
    gb_ids=("GB0034", "GB0170"),
    # torch 2.9: a torch._check whose message is a closure, on a symbolic size, breaks with
    # "Failed to convert args/kwargs to proxy", which names no check
    source_patterns=(r"\btorch\._check\(",),
    advice="torch._assert_async(cond, 'message')  (or torch._check for shape conditions)",
    message="`assert {test}` checks a tensor value", hint="torch._assert_async(cond, msg)",
    valid=("import torch\n\ndef f(x: torch.Tensor):\n    assert x.dim() == 3, 'need 3-d'\n    return x\n",
           "import torch\n\ndef f(x: torch.Tensor):\n    assert (x >= 0).all(), 'negative input'\n    return x.sqrt()\n"),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    assert (x >= 0).all(), f'negative input {x.min()}'\n    return x.sqrt()\n",
             "import torch\n\ndef f(a: torch.Tensor, b: torch.Tensor):\n    assert torch.equal(a, b)\n    return a\n"),
)

GM402 = Rule(
    code="GM402", name="tensor-check-raise", category="validation",
    summary="`if <tensor condition>: raise ...` (e.g. `if not torch.equal(a, b): raise`).",
    why="The `if` needs the tensor's value to decide whether to raise: a data-dependent branch, the graph breaks.",
    fix=_TRAP + " " + _TRAP_CHANGES,
    preconditions=("The `if` body is only the `raise`, with no `else`. Refused: an exception expression with side "
                   "effects."),
    limits=LIMITS, gb_ids=("GB0170",),
    advice="torch._assert_async(torch.logical_not(cond), 'message')",
    message="`if {test}: raise` checks a tensor value", hint="torch._assert_async(cond, msg) / torch._check",
    valid=("import torch\n\ndef f(x: torch.Tensor):\n    if x.shape[-1] != 4:\n        raise ValueError('bad')\n    return x\n",),
    invalid=("import torch\n\ndef f(a: torch.Tensor, b: torch.Tensor):\n    if not torch.equal(a, b):\n"
             "        raise ValueError('mismatch')\n    return a\n",
             "import torch\n\ndef f(x: torch.Tensor):\n    if (x < 0).any():\n        raise ValueError('negative')\n    return x\n"),
)

RULES = (GM401, GM402)
# a guard's condition is a condition (GM1) and often reads a value back (GM3)
OVERLAPS = ("GM1", "GM3")
# first to name a break no rule explained: a guard on its line is what the line is for
NAMES_BREAKS = 0


def _check_assert(node: ast.Assert, ctx) -> None:
    msg = node.msg
    if msg is None or (type(msg) is ast.Constant and isinstance(msg.value, str)):
        # Dynamo turns `assert <tensor>[, "constant"]` into torch._assert_async itself
        if ctx.kind(node.test) in TENSORISH:
            return
    if ctx.is_data_dependent(node.test):
        ctx.report("GM401", node, test=snippet(node.test))


def _check_if(node: ast.If, ctx) -> None:
    if is_raise_only(node.body) and not node.orelse and ctx.is_data_dependent(node.test):
        ctx.report("GM402", node.test, test=snippet(node.test))


HOOKS = {ast.Assert: (_check_assert,), ast.If: (_check_if,)}
