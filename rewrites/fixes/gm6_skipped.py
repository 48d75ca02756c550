"""GM605: ``torch.jit.isinstance(x, T)``, a call Dynamo skips, where Python's own
``isinstance`` says the same.

TorchScript-era code (detection heads, torchvision-style utilities) checks types with
``torch.jit.isinstance``; Dynamo does not trace it ("Attempted to call function marked as
skipped") and the graph breaks at the call. For a plain class, or a tuple of plain
classes, ``torch.jit.isinstance`` ends in ``isinstance(obj, target_type)``
(``torch._jit_internal._isinstance``), so the rewrite is the same test, which Dynamo
decides while tracing::

    if torch.jit.isinstance(image_size, float):  ->  if isinstance(image_size, float):

Left alone: a subscripted typing generic (``List[int]``, ``Dict[str, Tensor]``:
``torch.jit.isinstance`` checks the elements, ``isinstance`` raises) and the bare typing
names (``List``, ``Optional``, ...: ``torch.jit.isinstance`` raises where ``isinstance``
answers), and any call with other than two positional arguments.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst
import libcst.matchers as m

from rewrites.fixes.base import Analysis, Case, Context, Edit, Plan, Refusal, Site
from rewrites.fixes.judgements import code, full_name

RULES = ("GM605",)
ORDER = 95

_TYPING = frozenset({"List", "Dict", "Tuple", "Optional", "Union", "Any", "Sequence", "Mapping", "Iterable",
                     "Callable", "Type", "Set", "FrozenSet", "NamedTuple"})


def _not_plain(t: cst.BaseExpression) -> Optional[str]:
    """Why ``t`` is not a plain class (or tuple of them) for ``isinstance``, else None."""
    if isinstance(t, cst.Tuple):
        return next((w for w in (_not_plain(e.value) for e in t.elements) if w), None)
    if isinstance(t, cst.Subscript):
        return f"`{code(t)}` is a typing generic: torch.jit.isinstance checks its elements"
    name = full_name(t)
    if name is None:
        return f"`{code(t)}` is not a class name"
    if name.split(".")[-1] in _TYPING:
        return f"`{name}` is a typing name: torch.jit.isinstance raises on it where isinstance answers"
    return None


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    if not ctx.wants("GM605"):
        return result
    for node in an.findall(m.Call(), ctx):
        if full_name(node.func) != "torch.jit.isinstance":
            continue
        start, end = an.span(node)
        if not ctx.covers(start, end):
            continue
        if len(node.args) != 2 or any(a.keyword is not None or a.star for a in node.args):
            result.refusals.append(Refusal("GM605", start, "torch.jit.isinstance with other than two positional "
                                           "arguments"))
            continue
        why = _not_plain(node.args[1].value)
        if why:
            result.refusals.append(Refusal("GM605", start, why))
            continue
        site = Site("GM605", start, end, "torch.jit.isinstance -> isinstance (the same test for a plain class; "
                    "Dynamo decides it while tracing)", strategy="isinstance")
        result.edits.append(Edit(node, lambda u: u.with_changes(func=cst.Name("isinstance")), site,
                                 needs_torch=False))
    return result


_HEAD = '''import torch


def clip(boxes, size):
    if torch.jit.isinstance(size, {t}):
        return boxes.clamp(0, size)
    return boxes
'''

CASES = [
    Case(_HEAD.format(t="float"), _HEAD.format(t="float").replace("torch.jit.isinstance", "isinstance")),
    Case(_HEAD.format(t="(int, float)"), _HEAD.format(t="(int, float)").replace("torch.jit.isinstance", "isinstance")),
    Case(_HEAD.format(t="torch.Tensor"), _HEAD.format(t="torch.Tensor").replace("torch.jit.isinstance", "isinstance")),
]
# left alone
CASES += [
    Case(_HEAD.format(t="List[int]"), reason="typing generic"),
    Case(_HEAD.format(t="Optional"), reason="typing name"),
]
