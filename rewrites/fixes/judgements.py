"""The small static judgements the families' preconditions are built from: is this
expression a tensor (``tensorish``), is it pure enough to evaluate twice or speculatively
(``impurity``, ``pure_self_methods``), what calls leave torch; with the node builders they
share (``call``, ``paren``, ``strip_parens``). Conservative guesses from the source alone,
never imports."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import libcst as cst

from rewrites.tensors import BOOL_METHODS, TORCH_HOST_FUNCS, TORCH_NON_TENSOR_FUNCS, TORCH_NON_TENSOR_SUBMODULES

if TYPE_CHECKING:  # for annotations only: base is never imported at run time (no cycle)
    from rewrites.fixes.base import Analysis


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def full_name(node: cst.CSTNode) -> Optional[str]:
    try:
        return cst.helpers.get_full_name_for_node(node)
    except Exception:  # libcst raises for a node it cannot name (a call's result, a subscript): no name
        return None


TORCH_PREFIXES = ("torch.", "F.", "nn.functional.", "math.")
# Tensor methods that compute a new value (no mutation, no host sync).
PURE_METHODS = frozenset("""
abs add sub mul div neg exp log log1p sqrt rsqrt sigmoid tanh relu softmax log_softmax sum mean
max min amax amin argmax argmin prod std var norm clamp clamp_min clamp_max clip pow matmul bmm mm
transpose permute reshape view view_as expand expand_as contiguous flatten unsqueeze squeeze to float
half bfloat16 double int long bool type_as masked_fill where any all isnan isinf isfinite round
floor ceil sign cumsum cumprod flip roll t chunk split narrow select index_select gather repeat
new_zeros new_ones new_full new_empty zeros_like ones_like size dim numel eq ne lt le gt ge
logical_and logical_or logical_not detach clone float_power lerp baddbmm addmm softplus gelu
triu tril diagonal log2 log10 reciprocal acos asin atanh expm1 sin cos atan erf square nan_to_num
maximum minimum
""".split())
_SELF_NON_TENSOR = frozenset({"training", "config", "get_extended_attention_mask", "get_head_mask",
                              "dtype", "device"})
REDUCTIONS = frozenset("sum mean max min amax amin any all prod norm std var count_nonzero".split())
SIDE_EFFECT_CALLS = ("print", "logging.", "logger.", "log.", "warnings.", "_logger.", "LOGGER.", "open",
                     "sys.stdout", "sys.stderr")
LOG_METHODS = frozenset("debug info warning warn error exception critical log warning_once info_once".split())


# Python bools Dynamo resolves while tracing (never tensors)
COMPILE_FLAGS = frozenset({"torch.compiler.is_compiling", "torch._dynamo.is_compiling", "torch.jit.is_scripting",
                           "torch.jit.is_tracing", "torch.compiler.is_dynamo_compiling"})
IS_COMPILING = "torch.compiler.is_compiling()"


def is_compiling_test(test: cst.BaseExpression) -> bool:
    """``torch.compiler.is_compiling()`` exactly (the test of the compiled/eager split)."""
    t = strip_parens(test)
    return isinstance(t, cst.Call) and not t.args and full_name(t.func) == "torch.compiler.is_compiling"


def in_compile_split(an: "Analysis", node: cst.CSTNode) -> bool:
    """Is ``node`` inside an ``if torch.compiler.is_compiling(): ... else/elif ...`` a fix
    wrote (its eager or its compiled side)? Then it is already repaired: leave it."""
    p = an.parent(node)
    while p is not None and not isinstance(p, cst.FunctionDef):
        if isinstance(p, cst.If) and is_compiling_test(p.test):
            return True
        p = an.parent(p)
    return False


def _torch_non_tensor(fn: str) -> bool:
    """``torch.jit.isinstance``, ``torch.cuda.is_available``, ``torch.finfo``: torch calls
    that return no tensor (``rewrites.tensors``' lists, shared with the static scan)."""
    parts = fn.split(".")
    return len(parts) > 2 and parts[1] in _NO_TENSOR_SUBMODULES or len(parts) == 2 and parts[1] in _NO_TENSOR_FUNCS


# ... less those some of whose calls do return tensors (``torch.utils.checkpoint.checkpoint``,
# ``torch.autograd.grad``, ``torch.cond``)
_NO_TENSOR_SUBMODULES = TORCH_NON_TENSOR_SUBMODULES - {"utils", "autograd", "distributed", "amp", "export", "ao",
                                                       "quantization", "_inductor", "optim", "_C"}
_NO_TENSOR_FUNCS = (TORCH_NON_TENSOR_FUNCS | TORCH_HOST_FUNCS) - {"cond", "while_loop", "vmap"}


def module_call(node: cst.Call, modules: frozenset[str] = frozenset()) -> bool:
    """Is ``node`` a call of a submodule? ``self.proj(x)`` (any attribute of self but the
    few known non-tensor helpers), ``self.layers[i](x)``, or ``layer(x)`` with ``layer`` one
    of ``modules`` (``FunctionFacts.module_names``: bound by ``for layer in self.layers``).
    Its result counts as a tensor: what an ``nn.Module`` returns in model code. A module that
    returns a tuple or a number where a tensor was taken for granted makes the rewritten
    program raise or differ, which verification reports, so the guess is never trusted alone."""
    f = node.func
    fn = full_name(f) or ""
    if fn.startswith("self.") and fn.count(".") == 1 and fn[5:] not in _SELF_NON_TENSOR:
        return True
    if isinstance(f, cst.Subscript):
        held = full_name(f.value) or ""
        return held.startswith("self.") and held.count(".") == 1
    return isinstance(f, cst.Name) and f.value in modules


def tensorish(node: cst.BaseExpression, tensor_names: frozenset[str] = frozenset(),
              modules: frozenset[str] = frozenset()) -> bool:
    """Does ``node`` (probably) evaluate to a tensor? Conservative guesses, never imports.
    ``modules``: local names that hold submodules (``module_call``)."""
    if isinstance(node, cst.Call) and module_call(node, modules):
        return True  # a submodule call: ``self.proj(x)``, ``self.layers[i](x)``, ``layer(x)``
    if isinstance(node, cst.Call):
        fn = full_name(node.func) or ""
        if fn.startswith("torch.") and fn not in ("torch.equal", "torch.is_tensor", "torch.numel") \
                and fn not in COMPILE_FLAGS and not _torch_non_tensor(fn):
            return True
        if fn.startswith(("F.", "nn.functional.")):
            return True
        if isinstance(node.func, cst.Attribute):
            m = node.func.attr.value
            if m == "item" or m == "tolist" or m == "size" or m == "dim" or m == "numel":
                return False
            if m in PURE_METHODS or m in REDUCTIONS:
                return tensorish(node.func.value, tensor_names, modules) or m in REDUCTIONS or m in BOOL_METHODS
        return False
    if isinstance(node, cst.Name):
        return node.value in tensor_names
    if isinstance(node, cst.Comparison):
        return tensorish(node.left, tensor_names, modules) or any(
            tensorish(c.comparator, tensor_names, modules) for c in node.comparisons)
    if isinstance(node, cst.BinaryOperation):
        return tensorish(node.left, tensor_names, modules) or tensorish(node.right, tensor_names, modules)
    if isinstance(node, cst.UnaryOperation):
        return tensorish(node.expression, tensor_names, modules)
    if isinstance(node, cst.BooleanOperation):
        return tensorish(node.left, tensor_names, modules) and tensorish(node.right, tensor_names, modules)
    if isinstance(node, cst.Subscript):
        return tensorish(node.value, tensor_names, modules)
    if isinstance(node, cst.Attribute):
        return False
    return False


def has_item(node: cst.CSTNode) -> bool:
    found = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if isinstance(n.func, cst.Attribute) and n.func.attr.value == "item" and not n.args:
                found.append(n)

    node.visit(V())
    return bool(found)


def exact_in_half(node: cst.BaseExpression) -> bool:
    """Is ``node`` a number literal that float16 and bfloat16 (hence float32) hold exactly?
    A tensor compared with such a constant decides as Python's float comparison does; with
    another one (``0.3``) the constant is rounded to the tensor's dtype first, and the
    comparison flips at the values between (a bf16 ``h.max()`` of 0.30078125 vs 0.3)."""
    import struct

    n, sign = node, 1.0
    while isinstance(n, cst.UnaryOperation) and isinstance(n.operator, (cst.Minus, cst.Plus)):
        sign = -sign if isinstance(n.operator, cst.Minus) else sign
        n = n.expression
    if not isinstance(n, (cst.Integer, cst.Float)):
        return False
    try:
        v = sign * float(n.evaluated_value)
        half = struct.unpack("<e", struct.pack("<e", v))[0]
        f32 = struct.unpack("<f", struct.pack("<f", v))[0]
    except (OverflowError, ValueError, struct.error):
        return False
    bf16_bits = struct.unpack("<I", struct.pack("<f", v))[0]
    return half == v and f32 == v and bf16_bits & 0xFFFF == 0


def is_string_literal(node: Optional[cst.BaseExpression]) -> bool:
    """A string literal, concatenated or not, with no f-string part: a constant, read when the
    code is written, never when it runs."""
    if isinstance(node, cst.ConcatenatedString):
        return is_string_literal(node.left) and is_string_literal(node.right)
    return isinstance(node, cst.SimpleString)


def is_number_literal(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


def compare_in_double(test: cst.Comparison, is_scalar) -> cst.Comparison:
    """``s > 0.3`` with ``s`` (``is_scalar(s)``) a tensor that replaced a Python number:
    ``s.double() > 0.3``, so the constant is not rounded to a half-precision dtype first
    (Python compared two doubles). Constants every float dtype holds exactly stay as written."""
    if len(test.comparisons) != 1:
        return test
    left, right = test.left, test.comparisons[0].comparator

    def dbl(e):
        return cst.Call(func=cst.Attribute(value=paren(e), attr=cst.Name("double")), args=[])

    if is_scalar(left) and is_number_literal(right) and not exact_in_half(right):
        return test.with_changes(left=dbl(left))
    if is_scalar(right) and is_number_literal(left) and not exact_in_half(left):
        return test.with_changes(comparisons=[test.comparisons[0].with_changes(comparator=dbl(right))])
    return test


class _StripItem(cst.CSTTransformer):
    """In a condition: the comparison stays on the tensor (no ``.detach()`` needed: a
    comparison has no gradient), in float64 against an inexact float constant."""

    def __init__(self):
        super().__init__()
        self.stripped: set[int] = set()

    def leave_Call(self, original_node, updated_node):
        f = updated_node.func
        out = updated_node
        if isinstance(f, cst.Attribute) and f.attr.value == "item" and not updated_node.args:
            out = f.value
        else:
            fn = full_name(f)
            if fn in ("float", "bool") and len(updated_node.args) == 1 and tensorish(updated_node.args[0].value):
                out = updated_node.args[0].value
            elif fn == "int" and len(updated_node.args) == 1 and tensorish(updated_node.args[0].value):
                # int() truncates toward zero, as a cast to int64 does
                out = cst.Call(func=cst.Attribute(value=paren(updated_node.args[0].value), attr=cst.Name("long")),
                               args=[])
        if out is not updated_node:
            self.stripped.add(id(out))
        return out

    def leave_Comparison(self, original_node, updated_node):
        return compare_in_double(updated_node, lambda e: id(e) in self.stripped)


def strip_item(node: cst.BaseExpression) -> cst.BaseExpression:
    """``t.sum().item() > 0`` -> ``t.sum() > 0``: the comparison stays on the tensor;
    ``t.max().item() > 0.3`` -> ``t.max().double() > 0.3`` (``compare_in_double``)."""
    return node.visit(_StripItem())  # type: ignore[return-value]


# calls that draw from the RNG: evaluated speculatively (torch.where runs both arms) or
# re-run (torch.cond recomputes its branch in backward) they shift the random stream
RNG_CALLS = frozenset("""
dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout rand rand_like randn randn_like
randint randint_like randperm bernoulli multinomial normal poisson rrelu gumbel_softmax
""".split())
# module classes whose call changes state or draws random numbers
STATEFUL_MODULES = frozenset("""
BatchNorm1d BatchNorm2d BatchNorm3d SyncBatchNorm LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d InstanceNorm1d
InstanceNorm2d InstanceNorm3d Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout RReLU
""".split())


def rng_call(node: cst.Call) -> Optional[str]:
    """``F.dropout(...)``, ``torch.rand_like(x)``, ``x.bernoulli()``: the call's text, else None."""
    fn = full_name(node.func) or ""
    name = node.func.attr.value if isinstance(node.func, cst.Attribute) else fn
    if name.rstrip("_") in RNG_CALLS and (fn.startswith(TORCH_PREFIXES) or isinstance(node.func, cst.Attribute)
                                          and not fn.startswith("self.")):
        return code(node.func)
    return None


def impurity(node: cst.CSTNode) -> Optional[str]:
    """Why evaluating ``node`` twice or speculatively is not safe (None: pure enough).
    Calls to non-torch functions are reported separately by ``calls_outside_torch``."""
    why: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            fn = full_name(n.func) or ""
            kw = {a.keyword.value: a.value for a in n.args if a.keyword is not None}
            if fn == "print" or fn.startswith(SIDE_EFFECT_CALLS) and not fn.startswith("torch."):
                why.append(f"calls {fn}() (a side effect)")
            elif "inplace" in kw and not (isinstance(kw["inplace"], cst.Name) and kw["inplace"].value == "False"):
                why.append(f"mutates its input in place ({code(n.func)}(..., inplace={code(kw['inplace'])}))")
            elif "out" in kw and not (isinstance(kw["out"], cst.Name) and kw["out"].value == "None"):
                why.append(f"writes into an existing tensor ({code(n.func)}(..., out=...))")
            elif rng_call(n):
                why.append(f"draws random numbers ({rng_call(n)}): torch.where would run it on both paths and "
                           "torch.cond re-runs it in backward, either shifts the RNG stream")
            elif isinstance(n.func, cst.Attribute):
                m = n.func.attr.value
                if m.endswith("_") and not m.endswith("__") and m not in ("size_",):
                    why.append(f"mutates in place ({code(n.func)})")
                elif m in LOG_METHODS and fn.split(".")[0] in ("logger", "log", "logging", "_logger", "self"):
                    why.append(f"logs ({fn})")
                elif m in ("item", "tolist", "numpy", "cpu") and m != "cpu":
                    why.append(f"reads a host value ({m}())")

        def visit_NamedExpr(self, n) -> None:
            why.append("assigns with :=")

        def visit_Yield(self, n) -> None:
            why.append("yields")

        def visit_Await(self, n) -> None:
            why.append("awaits")

    node.visit(V())
    return why[0] if why else None


INPLACE_MODULE = "(inplace=True)"  # suffix module_attrs gives a module built with inplace=True


def module_attrs(an: "Analysis", node: cst.CSTNode) -> dict[str, str]:
    """``{attr: class name}`` for ``self.attr = nn.X(...)`` (or a class of this module) in the
    class enclosing ``node``: those attributes are modules, their calls module calls."""
    p = an.parent(node)
    while p is not None and not isinstance(p, cst.ClassDef):
        p = an.parent(p)
    if p is None:
        return {}
    local_classes = {c.name.value for c in an.module.body if isinstance(c, cst.ClassDef)}
    out: dict[str, str] = {}

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            if not isinstance(n.value, cst.Call):
                return
            ctor = full_name(n.value.func) or ""
            short = ctor.rsplit(".", 1)[-1]
            is_module = (ctor.startswith(("nn.", "torch.nn.")) and not ctor.startswith(("nn.functional", "torch.nn.functional"))
                         and short not in ("Parameter", "Buffer", "ParameterList", "ParameterDict")) or ctor in local_classes
            inplace = next((a.value for a in n.value.args if a.keyword is not None and a.keyword.value == "inplace"),
                           None)
            if inplace is not None and not (isinstance(inplace, cst.Name) and inplace.value == "False"):
                short += INPLACE_MODULE  # ``nn.ReLU(inplace=True)``: its call writes its input
            for t in n.targets:
                tgt = t.target
                if is_module and isinstance(tgt, cst.Attribute) and isinstance(tgt.value, cst.Name) \
                        and tgt.value.value == "self":
                    out[tgt.attr.value] = short

    p.visit(V())
    return out


def stateful_module_call(node: cst.CSTNode, modules: dict[str, str]) -> Optional[str]:
    """Why a call in ``node`` to a module attribute of self changes state or draws random
    numbers (``self.norm(h)`` with ``self.norm = nn.BatchNorm1d(...)``), else None."""
    found: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            fn = full_name(n.func) or ""
            if not fn.startswith("self.") or fn.count(".") != 1:
                return
            attr = fn[5:]
            cls = modules.get(attr)
            if cls is not None and cls.endswith(INPLACE_MODULE):
                found.append(f"`{fn}` is an nn.{cls}: it writes its input, so torch.where would run that write "
                             "on both paths, and torch.cond refuses the mutation")
            elif cls in STATEFUL_MODULES:
                what = ("draws random numbers in training" if "Dropout" in cls or cls == "RReLU" else
                        "updates its running statistics (buffers) in training")
                found.append(f"`{fn}` is an nn.{cls}, which {what}: torch.where would run it on both paths, "
                             "and torch.cond refuses the buffer mutation or re-runs it in backward")
            elif cls is None and "drop" in attr.lower():
                found.append(f"`{fn}` looks like a dropout module (random numbers in training): torch.where would "
                             "run it on both paths, and torch.cond re-runs it in backward")

    node.visit(V())
    return found[0] if found else None


def pure_self_methods(an: "Analysis", node: cst.CSTNode,
                      total: Optional[Callable[[cst.BaseExpression], bool]] = None) -> frozenset[str]:
    """``self.m`` for the methods ``m`` of the class enclosing ``node`` whose body is pure
    arithmetic (local assignments and a return of pure tensor expressions, calling only
    torch and other such methods): calling one twice or speculatively, as torch.where
    does, is safe. Undecorated methods of that class only; inherited ones are not seen.
    ``total``: also require each value to pass it (torch.where's arms must be total, and a
    method's insides cannot be fed a safe value at the call site)."""
    p = an.parent(node)
    while p is not None and not isinstance(p, cst.ClassDef):
        p = an.parent(p)
    if p is None or not isinstance(p.body, cst.IndentedBlock):
        return frozenset()
    methods = {f.name.value: f for f in p.body.body if isinstance(f, cst.FunctionDef) and not f.decorators}
    values: dict[str, list[cst.BaseExpression]] = {}
    for name, f in methods.items():
        exprs: list[cst.BaseExpression] = []
        ok = isinstance(f.body, cst.IndentedBlock)
        for i, st in enumerate(f.body.body if ok else []):
            if not (ok and isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1):
                ok = False
                break
            small = st.body[0]
            if isinstance(small, cst.Expr) and i == 0 and isinstance(small.value, cst.SimpleString):
                continue  # docstring
            if isinstance(small, cst.Assign) and all(isinstance(t.target, cst.Name) for t in small.targets):
                exprs.append(small.value)
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                exprs.append(small.value)
            elif isinstance(small, cst.Return) and small.value is not None:
                exprs.append(small.value)
            else:
                ok = False
                break
        if ok and exprs and not any(impurity(e) for e in exprs) and (total is None or all(total(e) for e in exprs)):
            values[name] = exprs
    pure = set(values)
    changed = True
    while changed:  # drop methods that call a non-pure one, until nothing changes
        changed = False
        for name in list(pure):
            calls = {c for e in values[name] for c in calls_outside_torch(e)}
            if any(not (c.startswith("self.") and c[5:] in pure) for c in calls):
                pure.discard(name)
                changed = True
    return frozenset(f"self.{m}" for m in pure)


def calls_outside_torch(node: cst.CSTNode) -> list[str]:
    """Names of calls that are not torch / tensor-method calls (modules, user functions)."""
    out: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            fn = full_name(n.func) or code(n.func)
            if fn.startswith(TORCH_PREFIXES):
                return
            # ``self.norm(h)`` is a module (or method) call, whatever its name spells; a
            # tensor method has a tensor receiver, never ``self`` itself
            if isinstance(n.func, cst.Attribute) and n.func.attr.value in PURE_METHODS \
                    and not (isinstance(n.func.value, cst.Name) and n.func.value.value == "self"):
                return
            if fn in ("float", "int", "min", "max", "abs", "len", "tuple", "list", "range", "isinstance", "getattr"):
                return
            out.append(fn)

    node.visit(V())
    return out


# the dense forms of the unsafe fixes hold every row: a reduction over rows would take in
# the rows the sparse program never computed
_ACROSS_ROWS = {"sum", "mean", "max", "min", "amax", "amin", "prod", "std", "var", "norm", "cumsum",
                "logsumexp", "softmax", "log_softmax", "sort", "argsort", "topk", "unique", "nonzero", "median"}


def reduction_over(node: cst.CSTNode, tainted) -> Optional[str]:
    """A method reduction (``v.sum(...)``) or ``torch.<reduction>(v, ...)`` of a value
    ``tainted(v)`` says came from the rows being densified; its code, or None."""
    found: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            f = n.func
            if isinstance(f, cst.Attribute) and f.attr.value in _ACROSS_ROWS:
                recv = f.value if full_name(f) != f"torch.{f.attr.value}" else (n.args[0].value if n.args else None)
                if recv is not None and tainted(recv):
                    found.append(code(n))

    node.visit(V())
    return found[0] if found else None


def call(func: str, *args: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.parse_expression(func), args=[cst.Arg(a) for a in args])


def paren(node: cst.BaseExpression) -> cst.BaseExpression:
    """Wrap in parentheses unless atomic (so it can be an operand)."""
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float,
                         cst.SimpleString, cst.List, cst.ListComp, cst.Dict, cst.DictComp, cst.Set,
                         cst.SetComp)) or node.lpar:  # displays are atoms too
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def strip_parens(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, cst.Tuple) and not node.elements:
        return node  # ``()`` is only valid with its parentheses
    if getattr(node, "lpar", None):
        return node.with_changes(lpar=[], rpar=[])
    return node
