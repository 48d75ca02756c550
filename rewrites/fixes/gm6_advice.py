"""Advice for breaks no automatic rewrite can be shown to fix: concrete replacement code
per rule. Every finding or break without a verified fix gets one of these in ``mend fix``.

GM6xx has no automatic rewrite: none of the candidates (``copy.deepcopy(t)`` ->
``t.clone()``, a generator -> a list) is the same program in general (``deepcopy``
copies ``requires_grad`` and shared storage structure; a generator is lazy).
"""

from __future__ import annotations

from rewrites.fixes.base import Analysis, Context, Plan

RULES = ("GM6",)
ORDER = 110

ADVICE: dict[str, str] = {
    "GM101": "x = torch.where(cond, a, b)   # both sides pure;  or torch.cond(cond, lambda: f(x), lambda: g(x))",
    "GM102": "torch.where(cond, a, b) instead of `a if cond else b`",
    "GM103": "torch.logical_and(c1, c2) / torch.logical_or / torch.logical_not instead of and/or/not on tensors",
    "GM104": "a `while` on a tensor: bound the loop by a Python count, or torch._higher_order_ops.while_loop",
    "GM201": "move print out of the compiled region, or `if not torch.compiler.is_compiling(): print(...)`",
    "GM202": "`if not torch.compiler.is_compiling(): logger.warning(...)` (skipped under compile)",
    "GM203": "`if not torch.compiler.is_compiling(): warnings.warn(...)` (skipped under compile)",
    "GM204": "do I/O outside the compiled function",
    "GM301": "keep the value a tensor (drop .item()); or torch._dynamo.config.capture_scalar_outputs = True "
             "(unbacked symbols: later guards on the value may fail to compile)",
    "GM302": "keep tensors (no .tolist()); loop over tensor ops instead of Python lists",
    "GM303": "keep the tensor (no int()/float()/bool()); use t.to(dtype) for a cast",
    "GM304": "use torch ops instead of .numpy()",
    "GM401": "torch._assert_async(cond, 'message')  (or torch._check for shape conditions)",
    "GM402": "torch._assert_async(torch.logical_not(cond), 'message')",
    "GM501": "a fixed-shape formulation (torch.where(mask, x, 0), masked sums); or "
             "torch._dynamo.config.capture_dynamic_output_shape_ops = True (unbacked sizes: guards on them may fail, recompiles)",
    "GM502": "masked arithmetic: (x * mask).sum() / torch.where(mask, x, 0); or "
             "torch._dynamo.config.capture_dynamic_output_shape_ops = True (cost: unbacked sizes, possible guard failures)",
    "GM503": "torch._dynamo.config.capture_dynamic_output_shape_ops = True, or precompute the unique values outside the compiled region",
    "GM504": "pass the repeats as a Python int list known ahead, or capture_dynamic_output_shape_ops = True",
    "GM505": "torch.where(mask, x, 0) keeps the shape fixed",
    "GM601": "build the copy outside the compiled region, or t.clone() for a plain tensor",
    "GM602": "materialise the generator as a list before the compiled region",
    "GM603": "set requires_grad outside the compiled function",
    "GM604": "use the torch equivalent of the numpy call",
    "GM605": "the callee is skipped or not traceable: torch.compiler.allow_in_graph, or a custom op (torch.library.custom_op)",
    "GM900": "see Dynamo's explanation and hints in the report",
    "GM901": "see Dynamo's explanation: the whole frame was skipped",
}


def advice_for(rule: str) -> str:
    return ADVICE.get(rule) or ADVICE.get(rule[:3] + "0" + rule[4:], "") or "no automatic fix; see `mend rules " + rule + "`"


def plan(an: Analysis, ctx: Context) -> Plan:
    return Plan()


CASES: list = []
