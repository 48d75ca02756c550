"""Which operations are total, and the double-where form for those that are not.

``torch.where(c, A, B)`` evaluates BOTH arms, forward and backward. An arm that eager code
only runs under condition C may hold an operation that is not total -- undefined, raising,
overflowing, or with a non-finite derivative -- on the inputs where C is false:
``torch.sqrt(h)`` at ``h < 0`` (or its derivative at 0), ``s / m.sum()`` at an empty mask,
``x.exp()`` past 88, ``F.embedding(ids, w)`` with an out-of-range id (eager then raises).
The forward value is still right (``where`` drops it), but the gradient is not: ``where``
sends the unselected arm a zero gradient, and ``0 * inf`` is NaN.

``guard(expr, cond)`` rewrites such an arm so that it computes on a SAFE value wherever it
is not selected: the dangerous operand ``v`` of each non-total operation becomes
``torch.where(cond, v, SAFE)``. Where ``cond`` holds the operand is ``v`` itself (value and
gradient unchanged); elsewhere the operation sees SAFE, its derivative is finite, and the
zero gradient stays zero. The safe values:

* 1: ``sqrt rsqrt log log2 log10 reciprocal``, the base of ``pow`` / ``**`` with an exponent
  that is not a non-negative integer literal, a tensor divisor of ``/ // %`` (``div``,
  ``true_divide``, ``floor_divide``, ``remainder``, ``fmod``)
* 0: ``log1p acos asin atanh erfinv`` and ``exp expm1 exp2 sinh cosh`` (they overflow: an
  arm guarded by ``if h.max() < 80: y = h.exp()`` is exactly where that matters), the
  tensor exponent of ``2 ** x``, and indices: of ``F.embedding``, ``gather``,
  ``index_select``, ``take``, ``take_along_dim``, ``one_hot`` and of a subscript ``x[idx]``
  unless the index is a literal, ``len(...)``, a slice or a mask (a comparison, ``~m``,
  ``.any()``...); index 0 exists whenever the indexed dimension is not empty

A divisor that holds a Python number (``numbers``: ``self.penalty`` bound to ``__init__``'s
``penalty: float``) is fed the safe value only when it is zero,
``x / (self.penalty or torch.where(cond, self.penalty, 1))``: Dynamo folds the ``or`` at
trace time, and a nonzero number divides as written, in ``x``'s own dtype, where
``torch.where`` would have made it a float32 tensor (a float64 ``x`` then divides by
1.2999999523 for 1.3).

* 0 as well: the operand of ``softmax log_softmax logsumexp softmin``: a row all -inf (an
  attention row with every key masked, an empty sequence of a padded batch) is NaN there,
  and so is its derivative

Shapes and layouts (``OPS``: a ``Totality`` record per operation, tested op by op):
``view`` / ``view_as`` raise on strides they cannot follow (``channels_last``, a transposed
view) and are written ``reshape`` / ``reshape_as``; an unbiased ``var`` of one sample is NaN
whatever the operand (a batch of one) and is refused unless ``correction=0`` is spelled; a
full ``max min amax amin argmax argmin`` raises on an empty operand and is refused. Over a
dim, or NaN rather than raising (``mean``, ``logsumexp``, ``x[:, 0]``, ``select``,
``reshape(b, -1)`` of an empty batch), mend cannot tell from the source whether the operand
can be empty: verification's edge inputs (graphmend/verify/inputs.py ``SHAPES``) show it.

A Python-number divisor (``x / 2``, ``x / math.sqrt(d)``), slices and literal subscripts
(``x[:, 0]``: a shape property, the same on both paths, except on an empty dim) are total. An operation not known
either way raises ``Partial`` naming it: the caller refuses the rewrite. ``std`` (its derivative at zero spread is not
finite and no operand value makes it so) is refused, too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from rewrites.fixes.judgements import call, code, full_name
from rewrites.fixes.runtime import helper
from rewrites.tensors import BOOL_RESULTS, TORCH_HOST_FUNCS

@dataclass(frozen=True)
class Totality:
    """On which inputs an operation is total: finite, raising nothing, with a finite
    derivative. Values are finite throughout; the fields name the shapes, layouts and
    masked rows where it is not (tests/rewrites/test_total_table.py runs every operation on those
    edges and holds each field to what it does)."""

    empty: bool = False  # raises, or is not finite, on an empty operand (an image with no boxes)
    one: bool = False  # NaN with one element along the reduced dim (unbiased variance, a batch of one)
    layout: bool = False  # raises where the operand's strides cannot be viewed (channels_last, a transposed view)
    masked_row: bool = False  # NaN on a row that is all -inf (an attention row whose every key is masked)


ANY = Totality()  # total on every finite input, every shape and layout

# elementwise arithmetic, reductions, layout, comparisons, activations, normalisations with an eps
_ANY_NAMES = """
abs absolute add sub subtract mul multiply neg negative sigmoid tanh relu relu6 leaky_relu elu selu celu gelu
silu mish softplus softsign hardtanh hardsigmoid hardswish logsigmoid log_sigmoid
sum nansum maximum minimum fmax fmin clamp clamp_min clamp_max
clip matmul bmm mm mv dot baddbmm addmm addcmul einsum linear  transpose permute reshape
expand expand_as contiguous flatten unflatten unsqueeze squeeze to float half bfloat16 double int long bool
short byte char type type_as masked_fill where any all isnan isinf isfinite isneginf isposinf isclose
round floor ceil trunc frac sign sgn signbit cumsum cummax cummin prod cumprod norm t chunk
split   repeat tile movedim moveaxis swapaxes swapdims new_zeros new_ones new_full new_tensor
zeros_like ones_like full_like zeros ones full arange linspace eye tensor as_tensor cat concat concatenate
stack hstack vstack eq ne lt le gt ge greater less equal not_equal logical_and logical_or logical_not
logical_xor bitwise_and bitwise_or bitwise_not bitwise_xor detach clone lerp triu tril diagonal diag
diag_embed sin cos atan arctan erf erfc square nan_to_num layer_norm group_norm rms_norm normalize
pad  glu size dim numel finfo iinfo is_floating_point is_complex flip roll
broadcast_to cross outer kron trace tensordot unbind
""".split()

# name -> where it is not total. How a torch.where arm stays sound for each field:
#   masked_row: the operand is fed 0 where the arm is not selected (``softmax`` of a row that is
#     all -inf is NaN, and so is its derivative: the double-where form below);
#   layout: ``view`` / ``view_as`` are written ``reshape`` / ``reshape_as`` (the same values
#     and gradient on every layout; the arm's result is torch.where's new tensor either way);
#   one: refused at plan time (no operand value makes one sample's unbiased variance finite),
#     unless ``correction=0`` / ``unbiased=False`` is spelled;
#   empty: a full reduction that raises (``x.max()``, no dim) is refused at plan time; over a
#     dim (``x.max(-1)``), or NaN rather than raising (``mean``, ``logsumexp``), mend cannot
#     tell from the source whether the operand can be empty, and relies on verification's
#     edge inputs (an empty batch, a batch of one: graphmend/verify/inputs.py) to show it.
OPS: dict[str, Totality] = {name: ANY for name in _ANY_NAMES} | {
    "softmax": Totality(masked_row=True), "log_softmax": Totality(masked_row=True),
    "softmin": Totality(masked_row=True), "logsumexp": Totality(empty=True, masked_row=True),
    "max": Totality(empty=True), "min": Totality(empty=True), "amax": Totality(empty=True),
    "amin": Totality(empty=True), "argmax": Totality(empty=True), "argmin": Totality(empty=True),
    "mean": Totality(empty=True), "var": Totality(empty=True, one=True),
    "view": Totality(layout=True), "view_as": Totality(layout=True),
    # an index past an empty dim (``x[:, 0]`` of an empty sequence), a resize of nothing
    "select": Totality(empty=True), "narrow": Totality(empty=True), "interpolate": Totality(empty=True),
    "bilinear": Totality(empty=True),
}
TOTAL = frozenset(OPS)
# full reductions that raise on an empty operand (no dim given): refused at plan time
RAISES_EMPTY = frozenset("max min amax amin argmax argmin".split())
LAYOUT_FREE = {"view": "reshape", "view_as": "reshape_as"}
TOTAL_BUILTINS = frozenset("float int min max abs len tuple list range isinstance getattr round bool".split())

SAFE_ONE = frozenset("sqrt rsqrt log log2 log10 reciprocal".split())
SAFE_ZERO = frozenset("log1p acos arccos asin arcsin atanh arctanh erfinv exp expm1 exp2 sinh cosh".split())
DIVISION = frozenset("div divide true_divide floor_divide remainder fmod".split())
POWER = frozenset("pow float_power".split())
# name -> position of the index argument in the function form (``torch.gather(x, dim, idx)``)
# and in the method form (``x.gather(dim, idx)``); -1: no such form
INDEXING = {"embedding": (0, -1), "gather": (2, 1), "index_select": (2, 1), "take": (1, 0),
            "take_along_dim": (1, 0), "one_hot": (0, -1)}
_INDEX_KEYWORDS = ("index", "indices", "input")
_INDEX_HELPER = helper("index").name  # GM303's ``x[i]`` (rewrites/fixes/runtime/index.py): a subscript
REFUSED = {"std": "its derivative at zero spread is not finite, whatever the operand",
           "std_mean": "its derivative at zero spread is not finite, whatever the operand"}

_FUNCTION_PREFIXES = ("torch.", "F.", "nn.functional.", "torch.nn.functional.", "torch.special.", "torch.linalg.")


class Partial(Exception):
    """An operation of the arm is not known to be total (the message names it)."""


def _safe(cond: cst.BaseExpression, operand: cst.BaseExpression, value: str) -> cst.Call:
    return call("torch.where", cond, operand, cst.Integer(value))


def _is_number(node: cst.BaseExpression) -> bool:
    n = node
    while isinstance(n, cst.UnaryOperation) and isinstance(n.operator, (cst.Minus, cst.Plus)):
        n = n.expression
    return isinstance(n, (cst.Integer, cst.Float))


def _nonneg_int(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer)


def _mask_like(node: cst.BaseExpression) -> bool:
    """A boolean index (a mask): no index out of range to fear."""
    if isinstance(node, cst.Comparison):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        return True
    if isinstance(node, cst.Call):
        fn = full_name(node.func) or ""
        m = node.func.attr.value if isinstance(node.func, cst.Attribute) else ""
        # a boolean tensor, or a Python bool (``torch.equal``): neither indexes out of range
        return bool({m, fn.split(".")[-1]} & (BOOL_RESULTS | TORCH_HOST_FUNCS))
    return False


def _uncorrected(args) -> bool:
    """``correction=0`` or ``unbiased=False`` spelled: the biased variance, finite for one sample."""
    for a in args:
        if a.keyword is not None and a.keyword.value in ("correction", "unbiased") \
                and code(a.value) in ("0", "0.0", "False"):
            return True
    return False


def _python_index(node: cst.BaseExpression) -> bool:
    """An index that is a Python value as written: a literal, ``None``, ``...``, ``len(...)``."""
    if _is_number(node) or isinstance(node, (cst.SimpleString, cst.Ellipsis)):
        return True
    if isinstance(node, cst.Name) and node.value in ("None", "True", "False"):
        return True
    return isinstance(node, cst.Call) and (full_name(node.func) or "") in ("len", "int")


class _Guard(cst.CSTTransformer):
    def __init__(self, cond: cst.BaseExpression, tnames: frozenset[str], pure_self: frozenset[str],
                 numbers: frozenset[str] = frozenset()):
        super().__init__()
        self.cond = cond
        self.tnames = tnames
        self.pure_self = pure_self
        self.numbers = numbers

    def _wrap(self, node: cst.BaseExpression, value: str) -> cst.BaseExpression:
        if _is_number(node) or (isinstance(node, cst.Call) and (full_name(node.func) or "").startswith("math.")):
            return node  # a Python number: the same on both paths
        if value == "1" and code(node) in self.numbers:
            return cst.BooleanOperation(left=node, operator=cst.Or(), right=_safe(self.cond, node, value),
                                        lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return _safe(self.cond, node, value)

    def leave_BinaryOperation(self, original_node, updated):
        op = updated.operator
        if isinstance(op, (cst.Divide, cst.FloorDivide, cst.Modulo)):
            return updated.with_changes(right=self._wrap(updated.right, "1"))
        if isinstance(op, cst.Power):
            if _nonneg_int(updated.right):
                return updated
            if _is_number(updated.left):  # ``2 ** x``: overflows like exp
                return updated.with_changes(right=_safe(self.cond, updated.right, "0"))
            return updated.with_changes(left=_safe(self.cond, updated.left, "1"))
        return updated

    def leave_Subscript(self, original_node, updated):
        elems = list(updated.slice)
        changed = False
        for i, el in enumerate(elems):
            if not isinstance(el.slice, cst.Index):
                continue
            v = el.slice.value
            if _mask_like(v) or _python_index(v):
                continue  # a mask, or a Python int (a shape property, the same on both paths)
            elems[i] = el.with_changes(slice=el.slice.with_changes(value=_safe(self.cond, v, "0")))
            changed = True
        return updated.with_changes(slice=elems) if changed else updated

    def leave_Call(self, original_node, updated):
        fn = full_name(updated.func) or ""
        if fn in TOTAL_BUILTINS or fn.startswith("math.") or fn in self.pure_self:
            return updated
        if fn == _INDEX_HELPER and len(updated.args) == 2:  # its index guarded as a subscript's is
            x, i = updated.args
            return updated if _mask_like(i.value) or _python_index(i.value) else \
                updated.with_changes(args=[x, i.with_changes(value=_safe(self.cond, i.value, "0"))])
        is_fn = fn.startswith(_FUNCTION_PREFIXES)
        if not is_fn and not isinstance(updated.func, cst.Attribute):
            raise Partial(f"`{code(updated.func)}` is not known to be total")
        name = fn.rsplit(".", 1)[-1] if is_fn else updated.func.attr.value
        args = list(updated.args)
        pos = [i for i, a in enumerate(args) if a.keyword is None and a.star == ""]

        def arg(i: int) -> Optional[int]:  # index in ``args`` of positional i
            return pos[i] if i < len(pos) else None

        def wrap_arg(i: Optional[int], value: str):
            if i is None:
                return updated
            args[i] = args[i].with_changes(value=self._wrap(args[i].value, value))
            return updated.with_changes(args=args)

        def wrap_receiver(value: str):
            return updated.with_changes(func=updated.func.with_changes(value=self._wrap(updated.func.value, value)))

        if name in REFUSED:
            raise Partial(f"`{name}`: {REFUSED[name]}")
        if name in SAFE_ONE or name in SAFE_ZERO:
            value = "1" if name in SAFE_ONE else "0"
            return wrap_arg(arg(0), value) if is_fn else wrap_receiver(value)
        if name in DIVISION:
            return wrap_arg(arg(1) if is_fn else arg(0), "1")
        if name in POWER:
            base, expo = (arg(0), arg(1)) if is_fn else (None, arg(0))
            if expo is not None and _nonneg_int(args[expo].value):
                return updated
            return wrap_arg(base, "1") if is_fn else wrap_receiver("1")
        if name in INDEXING:
            i = INDEXING[name][0 if is_fn else 1]
            kw = [j for j, a in enumerate(args) if a.keyword is not None and a.keyword.value in _INDEX_KEYWORDS
                  and (name != "embedding" or a.keyword.value == "input")]
            if kw:
                return wrap_arg(kw[0], "0")
            if i < 0:
                raise Partial(f"`{code(updated.func)}` indexes with an operand mend cannot find")
            return wrap_arg(arg(i), "0")
        rec = OPS.get(name)
        if rec is None:
            raise Partial(f"`{code(updated.func)}` is not known to be total (finite, with a finite derivative, "
                      "on every input)")
        if rec.one and not _uncorrected(args):
            raise Partial(f"`{code(updated.func)}` is NaN with one sample along the reduced dim (a batch of one), "
                          "and so is its gradient; no operand value avoids that (`correction=0` would)")
        if rec.empty and name in RAISES_EMPTY and len(pos) == (1 if is_fn else 0) \
                and not any(a.keyword is not None and a.keyword.value == "dim" for a in args):
            raise Partial(f"`{code(updated)}` raises on an empty tensor (an empty batch, an image with no boxes), "
                          "and mend cannot tell from the source that it is never empty")
        if rec.layout and not is_fn and not (len(args) == 1 and (full_name(args[0].value) or "").startswith("torch.")):
            # ``x.view(torch.int32)`` reinterprets the dtype: no reshape spells it
            return updated.with_changes(func=updated.func.with_changes(attr=cst.Name(LAYOUT_FREE[name])))
        if rec.masked_row:
            return wrap_arg(arg(0), "0") if is_fn else wrap_receiver("0")
        return updated


def guard(expr: cst.BaseExpression, cond: cst.BaseExpression, tnames: frozenset[str] = frozenset(),
          pure_self: frozenset[str] = frozenset(), numbers: frozenset[str] = frozenset()) -> cst.BaseExpression:
    """``expr`` with the dangerous operand of each non-total operation fed a safe value where
    ``cond`` is false (module docstring); raises ``Partial`` for an unknown operation.
    ``numbers``: expressions (as source) that hold Python numbers."""
    return expr.visit(_Guard(cond, tnames, pure_self, numbers))  # type: ignore[return-value]


_PLACEHOLDER = cst.Name("_mend_selected")


def is_total(expr: cst.BaseExpression, tnames: frozenset[str] = frozenset(),
             pure_self: frozenset[str] = frozenset()) -> Optional[str]:
    """None when ``expr`` is total as written (no operand would need a safe value), else why not."""
    try:
        out = guard(expr, _PLACEHOLDER, tnames, pure_self)
    except Partial as exc:
        return str(exc)
    return None if out.deep_equals(expr) else f"`{code(expr)}` is not total"


def check(expr: cst.BaseExpression, tnames: frozenset[str] = frozenset(),
          pure_self: frozenset[str] = frozenset()) -> None:
    """Raise ``Partial`` when ``guard`` could not make ``expr`` safe."""
    guard(expr, _PLACEHOLDER, tnames, pure_self)


def negate(cond: cst.BaseExpression) -> cst.BaseExpression:
    return call("torch.logical_not", cond)


def both(a: Optional[cst.BaseExpression], b: cst.BaseExpression) -> cst.BaseExpression:
    return b if a is None else call("torch.logical_and", a, b)
