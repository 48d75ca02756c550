"""GM301: integer arithmetic done in torch on Python numbers and read back with ``.item()``.

transformers 4.x CANINE computes a remainder of two Python ints through two 0-dim tensors::

    remainder_length = torch.fmod(torch.tensor(char_seq_length), torch.tensor(rate)).item()

and uses it as a size. Dynamo builds the tensors into the graph and breaks at ``.item()``
(``capture_scalar_outputs=False``). On ints the value is plain integer arithmetic, which
Dynamo folds, so the call goes to a helper that computes it on the host when both operands
are ints and runs the original torch expression otherwise::

    remainder_length = _mend_int_item("fmod", char_seq_length, rate)

The int path gives what torch gives on int64 tensors: ``fmod`` takes the dividend's sign
(C's ``%``), ``remainder`` the divisor's (Python's ``%``), ``floor_divide`` rounds down;
``add`` / ``sub`` / ``mul`` / ``maximum`` / ``minimum`` are the Python operators. Floats
(float32 tensors under torch's default dtype, float64 on the host), bools, a zero divisor
and values past int64 (where torch wraps or raises) keep the torch call, so those results
and errors are torch's own. Rewritten only where Dynamo broke, and only for
``torch.tensor(x)`` with no dtype or device. Each operand is still evaluated once, in
the same order.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst
import libcst.matchers as m

from rewrites.fixes.base import Analysis, Case, Context, Edit, Helper, Plan, Site
from rewrites.fixes.judgements import call, full_name

RULES = ("GM301", "GM303")
ORDER = 40

OPS = ("fmod", "remainder", "floor_divide", "add", "sub", "mul", "maximum", "minimum")
HELPER = Helper('''def _mend_int_item(op, a, b):
    # mend GM301: torch.<op>(torch.tensor(a), torch.tensor(b)).item() on the host when a and b
    # are ints and the result fits int64 (the same value, no tensor read back); floats, bools,
    # a zero divisor and overflow keep the torch call
    r = None
    ints = isinstance(a, int) and isinstance(b, int)
    if ints and not isinstance(a, bool) and not isinstance(b, bool):
        if op == "fmod" and b != 0:
            r = abs(a) % abs(b)
            r = -r if a < 0 else r
        elif op == "remainder" and b != 0:
            r = a % b
        elif op == "floor_divide" and b != 0:
            r = a // b
        elif op == "add":
            r = a + b
        elif op == "sub":
            r = a - b
        elif op == "mul":
            r = a * b
        elif op == "maximum":
            r = max(a, b)
        elif op == "minimum":
            r = min(a, b)
    if r is not None and all(-(2**63) <= v < 2**63 for v in (a, b, r)):
        return r
    return getattr(torch, op)(torch.tensor(a), torch.tensor(b)).item()
''')


ROUNDED = ("log2", "log10", "log", "sqrt")  # math has each, under the same name
ROUNDINGS = ("round", "floor", "ceil")
ROUND_LIMIT = 2**16  # the ints tests/rewrites/test_fix_host_math.py checks every one of
ROUND_HELPER = Helper('''def _mend_host_round(fn, rnd, s):
    # mend GM303: torch.tensor(s).<fn>().<rnd>() read back, on the host when s is an int in
    # [1, 2**16]: torch computes in float32, math in float64, and on every such int the
    # two round to the same integer; else (floats, bigger ints) the torch call as before
    if isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= 2**16:
        v = getattr(math, fn)(s)
        return float(round(v) if rnd == "round" else getattr(math, rnd)(v))
    return getattr(getattr(torch.tensor(s), fn)(), rnd)().item()
''')


def _rounded(node: cst.BaseExpression) -> Optional[tuple[str, str, cst.BaseExpression]]:
    """``torch.tensor(s).<fn>().<rnd>()`` -> (fn, rnd, s)."""
    if not (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in ROUNDINGS):
        return None
    inner = node.func.value
    if not (isinstance(inner, cst.Call) and not inner.args and isinstance(inner.func, cst.Attribute)
            and inner.func.attr.value in ROUNDED):
        return None
    s = _host_value(inner.func.value)
    return None if s is None else (inner.func.attr.value, node.func.attr.value, s)


def host_rounded(node: cst.Call) -> Optional[tuple[str, str, str, cst.BaseExpression]]:
    """``float(<rounded>)`` / ``int(<rounded>)`` / ``<rounded>.item()`` -> (rule, fn, rnd, s)."""
    if full_name(node.func) in ("float", "int") and len(node.args) == 1 and node.args[0].keyword is None \
            and not node.args[0].star and (hit := _rounded(node.args[0].value)):
        return ("GM303", *hit)
    f = node.func
    if not node.args and isinstance(f, cst.Attribute) and f.attr.value == "item" and (hit := _rounded(f.value)):
        return ("GM301", *hit)
    return None


def _host_value(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``torch.tensor(x)`` with nothing but ``x`` -> x."""
    if isinstance(node, cst.Call) and full_name(node.func) == "torch.tensor" and len(node.args) == 1 \
            and node.args[0].keyword is None and not node.args[0].star:
        return node.args[0].value
    return None


def _match(node: cst.Call) -> Optional[tuple[str, cst.BaseExpression, cst.BaseExpression]]:
    """``torch.<op>(torch.tensor(a), torch.tensor(b)).item()`` -> (op, a, b)."""
    f = node.func
    if node.args or not isinstance(f, cst.Attribute) or f.attr.value != "item" or not isinstance(f.value, cst.Call):
        return None
    inner = f.value
    name = full_name(inner.func) or ""
    if not name.startswith("torch.") or name[6:] not in OPS or len(inner.args) != 2 \
            or any(a.keyword is not None or a.star for a in inner.args):
        return None
    a, b = (_host_value(x.value) for x in inner.args)
    if a is None or b is None:
        return None
    return name[6:], a, b


def plan(an: Analysis, ctx: Context) -> Plan:
    result = Plan()
    _plan_rounded(an, ctx, result)
    if not ctx.wants("GM301"):
        return result
    found = [(n, hit) for n in an.findall(m.Call(func=m.Attribute(attr=m.Name("item"))), ctx)
             if (hit := _match(n)) is not None]
    for node, (op, a, b) in found:
        start, end = an.span(node)
        if ctx.lines is None or not ctx.covers(start, end):
            continue  # only where Dynamo broke: elsewhere the scalar may be a traced value already
        site = Site("GM301", start, end, f"torch.{op}(torch.tensor(a), torch.tensor(b)).item() -> {HELPER.name}: the "
                    "same value on the host when a and b are ints (no tensor read back)", strategy="host_int")

        def build(_updated: cst.Call, op=op, a=a, b=b):
            return call(HELPER.name, cst.SimpleString(f'"{op}"'), a, b)

        result.edits.append(Edit(node, build, site, helpers=(HELPER,)))
    return result


def _plan_rounded(an: Analysis, ctx: Context, result: Plan) -> None:
    for node in an.findall(m.Call(), ctx):
        hit = host_rounded(node)
        if hit is None or not ctx.wants(hit[0]):
            continue
        rule, fn, rnd, s = hit
        start, end = an.span(node)
        if ctx.lines is None or not ctx.covers(start, end):
            continue  # only where Dynamo broke, as above
        site = Site(rule, start, end, f"torch.tensor(s).{fn}().{rnd}() read back -> {ROUND_HELPER.name}: math on the "
                    "host for an int s in [1, 2**16] (the same integer), the torch call otherwise", strategy="host_int")

        def build(updated: cst.Call, fn=fn, rnd=rnd, s=s):
            host = call(ROUND_HELPER.name, cst.SimpleString(f'"{fn}"'), cst.SimpleString(f'"{rnd}"'), s)
            return updated.with_changes(args=[cst.Arg(host)]) if full_name(updated.func) in ("float", "int") else host

        result.edits.append(Edit(node, build, site, helpers=(ROUND_HELPER,), imports=("math",)))


_CANINE = '''import torch


class Upsample(torch.nn.Module):
    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def forward(self, molecules, char_seq_length: int):
        rate = self.rate
        repeated = torch.repeat_interleave(molecules[:, 1:, :], repeats=rate, dim=-2)
        last = molecules[:, -1:, :]
        remainder_length = torch.fmod(torch.tensor(char_seq_length), torch.tensor(rate)).item()
        extra = torch.repeat_interleave(last, repeats=remainder_length + rate, dim=-2)
        return torch.cat([repeated, extra], dim=-2)
'''

# at the line Dynamo broke on
CASES = [
    Case(_CANINE, _CANINE.replace("import torch\n", "import torch\n\n\n" + HELPER.source, 1)
         .replace("torch.fmod(torch.tensor(char_seq_length), torch.tensor(rate)).item()",
                  '_mend_int_item("fmod", char_seq_length, rate)'), lines={13}),
]
# left alone at Dynamo's line
CASES += [
    # a dtype on the tensor changes what torch computes
    Case(_CANINE.replace("torch.tensor(rate))", "torch.tensor(rate, dtype=torch.float64))"), lines={13}),
    # not an op the host helper knows
    Case(_CANINE.replace("torch.fmod(", "torch.atan2("), lines={13}),
    # a tensor argument that is not built from a host value
    Case(_CANINE.replace("torch.tensor(rate))", "molecules.new_tensor(rate))"), lines={13}),
]


_OCTAVES = '''import torch


class Sampler(torch.nn.Module):
    def forward(self, x):
        octaves = float(torch.tensor(self.steps).log2().round())
        return x * octaves
'''

# Python-number arithmetic routed through torch and read back (at the line Dynamo broke on)
CASES += [
    Case(_OCTAVES, _OCTAVES.replace("import torch\n", "import torch\nimport math\n\n\n" + ROUND_HELPER.source, 1)
         .replace("torch.tensor(self.steps).log2().round()", '_mend_host_round("log2", "round", self.steps)'),
         lines={6}),
    # a dtype changes what torch computes; an op not in ROUNDED (a value used as a size, so
    # gm3_scalars cannot keep it a tensor either)
    Case(_OCTAVES.replace("torch.tensor(self.steps)", "torch.tensor(self.steps, dtype=torch.float64)")
         .replace("x * octaves", "x.view(-1, int(octaves))"), lines={6}),
    Case(_OCTAVES.replace(".log2()", ".exp()").replace("x * octaves", "x.view(-1, int(octaves))"), lines={6}),
]
