"""``rewrites/fixes/total.py``'s table holds: every operation it lists is run on the edge
inputs a torch.where arm meets (an empty batch, one sample along the reduced dim, a
``channels_last`` map and a transposed view, a row all -inf), and is total there -- it raises
nothing, its value is finite and so is its derivative under the zero gradient ``where`` sends
an unselected arm -- exactly where its ``Totality`` record says so. A record that claims too
much or too little fails here."""

from __future__ import annotations

import warnings

import pytest

from rewrites.fixes.total import OPS

torch = pytest.importorskip("torch")
F = torch.nn.functional

# no tensor operand to be empty or strided: constructors and queries
NO_OPERAND = frozenset("zeros ones full arange linspace eye tensor as_tensor finfo iinfo size dim numel "
                       "is_floating_point is_complex".split())


def _o(x):  # a second operand of x's shape
    return x * 0.5 + 1.0


def _first(r):
    return r[0] if isinstance(r, (tuple, list)) else r


def _cat(r):
    return torch.cat([t.reshape(-1) for t in r])


# one call per operation on a 2-D float ``x``; reductions reduce dim 0 where they take a dim
# (one sample along it for the one-sample edge), else the whole tensor
RECIPES = {
    "abs": lambda x: x.abs(), "absolute": torch.absolute, "add": lambda x: x.add(_o(x)), "sub": lambda x: x.sub(_o(x)),
    "subtract": lambda x: torch.subtract(x, _o(x)), "mul": lambda x: x.mul(_o(x)),
    "multiply": lambda x: torch.multiply(x, _o(x)), "neg": lambda x: x.neg(), "negative": torch.negative,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu, "relu6": F.relu6, "leaky_relu": F.leaky_relu,
    "elu": F.elu, "selu": F.selu, "celu": F.celu, "gelu": F.gelu, "silu": F.silu, "mish": F.mish,
    "softplus": F.softplus, "softsign": F.softsign, "hardtanh": F.hardtanh, "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish, "logsigmoid": F.logsigmoid, "log_sigmoid": F.logsigmoid,
    "softmax": lambda x: x.softmax(-1), "log_softmax": lambda x: x.log_softmax(-1),
    "softmin": lambda x: F.softmin(-x, -1),  # (masked with +inf)
    "logsumexp": lambda x: x.logsumexp(-1),
    "sum": lambda x: x.sum(0), "nansum": lambda x: x.nansum(0), "mean": lambda x: x.mean(0),
    "max": lambda x: x.max(), "min": lambda x: x.min(), "amax": lambda x: x.amax(), "amin": lambda x: x.amin(),
    "argmax": lambda x: x.argmax(), "argmin": lambda x: x.argmin(),
    "maximum": lambda x: torch.maximum(x, _o(x)), "minimum": lambda x: torch.minimum(x, _o(x)),
    "fmax": lambda x: torch.fmax(x, _o(x)), "fmin": lambda x: torch.fmin(x, _o(x)),
    "clamp": lambda x: x.clamp(-1, 1), "clamp_min": lambda x: x.clamp_min(0), "clamp_max": lambda x: x.clamp_max(0),
    "clip": lambda x: x.clip(-1, 1), "matmul": lambda x: x @ x.t(), "bmm": lambda x: torch.bmm(x[None], x.t()[None]),
    "mm": lambda x: x.mm(x.t()), "mv": lambda x: x.mv(torch.ones(x.shape[1])),
    "dot": lambda x: torch.dot(x.reshape(-1), x.reshape(-1)),
    "baddbmm": lambda x: torch.baddbmm(x[None] @ x.t()[None], x[None], x.t()[None]),
    "addmm": lambda x: torch.addmm(x @ x.t(), x, x.t()), "addcmul": lambda x: torch.addcmul(x, x, _o(x)),
    "einsum": lambda x: torch.einsum("ij,ij->i", x, x), "linear": lambda x: F.linear(x, torch.ones(3, x.shape[1])),
    "bilinear": lambda x: F.bilinear(x, x, torch.ones(2, x.shape[1], x.shape[1])),
    "transpose": lambda x: x.transpose(0, 1), "permute": lambda x: x.permute(1, 0), "reshape": lambda x: x.reshape(-1),
    "view": lambda x: x.view(-1), "view_as": lambda x: x.view_as(torch.empty(x.numel())),
    "expand": lambda x: x[None].expand(2, -1, -1), "expand_as": lambda x: x[None].expand_as(torch.empty(2, *x.shape)),
    "contiguous": lambda x: x.contiguous(), "flatten": lambda x: x.flatten(), "unflatten": lambda x: x.unflatten(-1, (1, x.shape[-1])),
    "unsqueeze": lambda x: x.unsqueeze(0), "squeeze": lambda x: x[None].squeeze(0), "to": lambda x: x.to(torch.float64),
    "float": lambda x: x.float(), "half": lambda x: x.half(), "bfloat16": lambda x: x.bfloat16(),
    "double": lambda x: x.double(), "int": lambda x: x.int(), "long": lambda x: x.long(), "bool": lambda x: x.bool(),
    "short": lambda x: x.short(), "byte": lambda x: x.byte(), "char": lambda x: x.char(),
    "type": lambda x: x.type(torch.float64), "type_as": lambda x: x.type_as(torch.zeros(1, dtype=torch.float64)),
    "masked_fill": lambda x: x.masked_fill(x > 0, 0.0), "where": lambda x: torch.where(x > 0, x, _o(x)),
    "any": lambda x: (x > 0).any(), "all": lambda x: (x > 0).all(), "isnan": torch.isnan, "isinf": torch.isinf,
    "isfinite": torch.isfinite, "isneginf": torch.isneginf, "isposinf": torch.isposinf,
    "isclose": lambda x: torch.isclose(x, _o(x)), "round": torch.round, "floor": torch.floor, "ceil": torch.ceil,
    "trunc": torch.trunc, "frac": torch.frac, "sign": torch.sign, "sgn": torch.sgn, "signbit": torch.signbit,
    "cumsum": lambda x: x.cumsum(0), "cummax": lambda x: x.cummax(0).values, "cummin": lambda x: x.cummin(0).values,
    "prod": lambda x: x.prod(0), "cumprod": lambda x: x.cumprod(0), "norm": lambda x: x.norm(),
    "var": lambda x: x.var(0), "t": lambda x: x.t(), "chunk": lambda x: _cat(x.chunk(2, 1)),
    "split": lambda x: _cat(x.split(2, 1)), "narrow": lambda x: x.narrow(1, 0, 2), "select": lambda x: x.select(1, 0),
    "repeat": lambda x: x.repeat(2, 1), "tile": lambda x: x.tile(2), "movedim": lambda x: x.movedim(0, 1),
    "moveaxis": lambda x: x.moveaxis(0, 1), "swapaxes": lambda x: x.swapaxes(0, 1), "swapdims": lambda x: x.swapdims(0, 1),
    "new_zeros": lambda x: x.new_zeros(3), "new_ones": lambda x: x.new_ones(3), "new_full": lambda x: x.new_full((3,), 2.0),
    "new_tensor": lambda x: x.new_tensor([1.0, 2.0]), "zeros_like": torch.zeros_like, "ones_like": torch.ones_like,
    "full_like": lambda x: torch.full_like(x, 2.0), "cat": lambda x: torch.cat([x, x]),
    "concat": lambda x: torch.concat([x, x]), "concatenate": lambda x: torch.concatenate([x, x]),
    "stack": lambda x: torch.stack([x, x]), "hstack": lambda x: torch.hstack([x, x]), "vstack": lambda x: torch.vstack([x, x]),
    "eq": lambda x: x.eq(_o(x)), "ne": lambda x: x.ne(_o(x)), "lt": lambda x: x.lt(_o(x)), "le": lambda x: x.le(_o(x)),
    "gt": lambda x: x.gt(_o(x)), "ge": lambda x: x.ge(_o(x)), "greater": lambda x: torch.greater(x, _o(x)),
    "less": lambda x: torch.less(x, _o(x)), "equal": lambda x: torch.tensor(torch.equal(x, x)),
    "not_equal": lambda x: torch.not_equal(x, _o(x)), "logical_and": lambda x: torch.logical_and(x > 0, x < 1),
    "logical_or": lambda x: torch.logical_or(x > 0, x < 1), "logical_not": lambda x: torch.logical_not(x > 0),
    "logical_xor": lambda x: torch.logical_xor(x > 0, x < 1), "bitwise_and": lambda x: (x > 0) & (x < 1),
    "bitwise_or": lambda x: (x > 0) | (x < 1), "bitwise_not": lambda x: ~(x > 0), "bitwise_xor": lambda x: (x > 0) ^ (x < 1),
    "detach": lambda x: x.detach(), "clone": lambda x: x.clone(), "lerp": lambda x: torch.lerp(x, _o(x), 0.3),
    "triu": torch.triu, "tril": torch.tril, "diagonal": lambda x: x.diagonal(), "diag": lambda x: x.diag(),
    "diag_embed": torch.diag_embed, "sin": torch.sin, "cos": torch.cos, "atan": torch.atan, "arctan": torch.arctan,
    "erf": torch.erf, "erfc": torch.erfc, "square": torch.square, "nan_to_num": torch.nan_to_num,
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]), "group_norm": lambda x: F.group_norm(x, 2),
    "rms_norm": lambda x: F.rms_norm(x, x.shape[-1:]), "normalize": lambda x: F.normalize(x, dim=-1),
    "pad": lambda x: F.pad(x, (1, 1)), "interpolate": lambda x: F.interpolate(x[None], scale_factor=2.0),
    "glu": lambda x: F.glu(x, -1), "flip": lambda x: x.flip(0), "roll": lambda x: x.roll(1, 1),
    "broadcast_to": lambda x: torch.broadcast_to(x, (2, *x.shape)),
    "cross": lambda x: torch.linalg.cross(x[..., None].expand(*x.shape, 3), _o(x)[..., None].expand(*x.shape, 3)), "outer": lambda x: torch.outer(x.reshape(-1), x.reshape(-1)),
    "kron": lambda x: torch.kron(x, x), "trace": lambda x: x.trace(), "tensordot": lambda x: torch.tensordot(x, x, 2),
    "unbind": lambda x: sum((t.sum() for t in x.unbind(0)), x.sum() * 0),
}


def _total_on(recipe, x, nan_only: bool = False) -> tuple[bool, str]:
    """(total, why not): no raise, a finite value, a finite derivative under a zero gradient.
    ``nan_only``: an infinite value counts (``log_softmax`` of a masked entry is -inf)."""
    x = x.detach().clone().requires_grad_(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = recipe(x)
    except Exception as exc:  # noqa: BLE001 - raising IS the finding
        return False, f"raises {type(exc).__name__}"
    if y.is_floating_point() and not bool((~torch.isnan(y) if nan_only else torch.isfinite(y)).all()):
        return False, "not finite"
    if y.is_floating_point() and y.requires_grad:
        (g,) = torch.autograd.grad(y, x, torch.zeros_like(y), allow_unused=True)
        if g is not None and not bool(torch.isfinite(g).all()):
            return False, "derivative not finite"
    return True, ""


def _masked(all_row: bool):
    x = torch.randn(2, 4)
    x[0, :2] = float("-inf")
    if all_row:
        x[0] = float("-inf")
    return x


OPERATIONS = sorted(set(OPS) - NO_OPERAND)


def test_every_operation_has_a_recipe():
    assert NO_OPERAND <= set(OPS)
    assert set(OPERATIONS) == set(RECIPES), sorted(set(OPERATIONS) ^ set(RECIPES))


@pytest.mark.parametrize("name", OPERATIONS)
def test_the_table_says_where_an_operation_is_total(name):
    rec, recipe = OPS[name], RECIPES[name]
    torch.manual_seed(0)
    assert _total_on(recipe, torch.randn(2, 4)) == (True, ""), f"{name}: the recipe fails on a plain input"
    # an empty batch, an empty reduced dim
    ok, why = _total_on(recipe, torch.randn(0, 4))
    if ok:
        ok, why = _total_on(recipe, torch.randn(4, 0))
    assert ok != rec.empty, f"{name}: on an empty operand {'total' if ok else why}, the table says empty={rec.empty}"
    # one sample along the reduced dim
    ok, why = _total_on(recipe, torch.randn(1, 4))
    assert ok != rec.one, f"{name}: with one sample {'total' if ok else why}, the table says one={rec.one}"
    # strides a view cannot follow: a transposed view; channels_last where the recipe takes 4-D
    ok, why = _total_on(recipe, torch.randn(4, 2).t())
    assert ok != rec.layout, f"{name}: on a transposed view {'total' if ok else why}, the table says layout={rec.layout}"
    four = torch.randn(2, 3, 4, 5)
    if _total_on(recipe, four)[0]:
        ok, why = _total_on(recipe, four.contiguous(memory_format=torch.channels_last))
        assert ok != rec.layout, f"{name}: on channels_last {'total' if ok else why}, the table says layout={rec.layout}"
    # a row all -inf, beside rows only partly masked: an op of masked rows is NaN-free on the
    # second and not on the first; an op that is NaN on -inf anyway makes no such claim
    row = _total_on(recipe, _masked(False), True)[0] and not _total_on(recipe, _masked(True), True)[0]
    assert row == rec.masked_row, f"{name}: on an all -inf row {row}, the table says masked_row={rec.masked_row}"
