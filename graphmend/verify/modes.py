"""The behaviours a user can observe, one call at a time (imports torch lazily).

A *record* is what one call of the target showed in one mode: its outputs or its exception
(type and message), the caller's inputs afterwards (a side that mutates them differs), the
module's buffers and the RNG state after the call, and in train mode the input and
parameter gradients of a backward through every floating output. The original side makes
records; the patched side makes them again, in the same order from the same weights and
seeds, and ``compare_records`` says where they differ.

Modes (``eval`` and ``train`` are the run modes of ``graphmend.core.modes``):
* ``eval``: the module in ``.eval()``, under ``torch.no_grad()``;
* ``train``: the module in ``.train()``, grad on, floating inputs leaves that require
  grad (passed as copies, so in-place use of an input is legal as it is for a caller's
  tensor), then ``backward`` of the target's ``loss`` (else the sum of every floating
  output that requires grad);
* ``autocast``: ``eval`` under ``torch.autocast`` (bfloat16 on CPU, float16 on CUDA);
* ``autocast_train``: ``train`` with the forward under that autocast and the backward after
  it, as mixed-precision training runs (the example input only); the gradients are compared
  in the autocast dtype, as the outputs are;
* ``float64``: ``train`` with the module and the floating inputs cast to float64 (after
  the others, before ``bf16``: the cast is in place). It decides one question: a float32
  train-mode difference within the rounding of the tensor's scale (a backward that sums
  in another order) is rounding only if the same call agrees in float64;
* ``bf16``: ``eval`` with the module and the floating inputs cast to bfloat16 (run last:
  the cast is in place).

Ways a user runs the same module, each on the example input only (a fix's cost stays small;
the double backward also on every other input, as the float64 runs):
* ``hooks``: ``train`` with a forward pre-hook and a full backward hook on every submodule:
  which submodule ran (by qualified name), in which order and how often forward, how often
  backward (a rewrite may not call a module more or fewer times; a ``torch.cond`` arm runs
  its modules without their hooks); ``hooks_forward``: the forward hooks alone, where the
  original fails with full backward hooks (they wrap outputs a module then writes in place);
* ``double_backward``: ``train`` with the gradient taken with ``create_graph=True``, then a
  backward through the sum of its squares (a gradient penalty): first- and second-order
  gradients (``torch.cond`` and an op without a double-backward formula lose them); run in
  float64, with the ``float64`` mode (a second derivative amplifies float32 rounding);
* ``func_grad``: ``torch.func.grad`` of the loss over ``torch.func.functional_call`` (the
  parameters and the floating inputs); ``vmap``: ``torch.func.vmap`` over the batch dimension
  (each sample keeps a batch dimension of 1), in ``eval``;
* ``replicate``: ``train`` on a replica made as ``torch.nn.parallel.replicate`` makes one
  (``_replicate_for_data_parallel``, the parameters as non-leaf copies: it refuses CPU devices,
  and ``DataParallel`` on CPU runs the module itself), the gradients landing on the ORIGINAL's
  parameters;
* ``compiled``: ``train`` with the patched program under ``torch.compile(backend="aot_eager")``
  against the original in eager, on the example and on it with the batch one larger (a
  recompile with other shapes), each custom op in its graphs run against its fake as well
  (``worker._against_fake``). Where the patched program's compiled run differs, the original
  is compiled the same way (``graphmend.verify.worker.probe_compiled``, once per target): if it
  too differs from its eager self (the compiler's own rounding, say), the patched compiled
  calls are compared with the original's compiled ones instead, and where those differ as
  well the check cannot tell;
  ``compiled_eval``: the same in ``eval``, where train mode cannot serve (the original raises
  there, has nothing to train, or differs from run to run): the compiled program is still a
  way the user runs it.

Every record also holds, for each output tensor, whether it is one of the caller's inputs or
the module's tensors or shares storage with one (``aliases``: ``out is x`` and views must
stay so), and the state of every ``torch.Generator`` the module holds as an attribute.
"""

from __future__ import annotations

import random
import re
from typing import Any, Optional

from graphmend.core.modes import EVAL, TRAIN, training_loss
from graphmend.verify import NOTHING_TO_TRAIN
from graphmend.verify.compare import to_plain
from graphmend.verify.inputs import map_tensors, tensors

AUTOCAST, AUTOCAST_TRAIN, BF16, F64 = "autocast", "autocast_train", "bf16", "float64"
HOOKS, DOUBLE, FUNC_GRAD, VMAP, REPLICA, COMPILED = ("hooks", "double_backward", "func_grad", "vmap",
                                                     "replicate", "compiled")
COMPILED_EVAL = "compiled_eval"
COMPILED_RUNS = (COMPILED, COMPILED_EVAL)  # the patched program under torch.compile
# forward hooks alone, where a full backward hook makes the original raise (it wraps each
# module's outputs, and a module that writes into one in place then fails)
HOOKS_FORWARD = "hooks_forward"
ALIASING, GENERATORS, ATTRIBUTES = "aliasing", "generators", "attributes"  # recorded by every call, in every mode
COMPILE_BACKEND = "aot_eager"  # AOTAutograd's graphs run eagerly: the semantics of compile, at CPU cost
# the names reports give the checks (what was proven); "inputs", "exceptions" and "arms"
# are compared in every mode that ran
CHECK_NAMES = {EVAL: "eval", TRAIN: "train+grad", AUTOCAST: "autocast", AUTOCAST_TRAIN: "train+grad autocast",
               BF16: "bf16", F64: "train+grad float64", HOOKS: "module hooks", HOOKS_FORWARD: "module forward hooks", DOUBLE: "double backward",
               FUNC_GRAD: "torch.func.grad", VMAP: "torch.func.vmap", REPLICA: "replicate",
               COMPILED: f"compiled ({COMPILE_BACKEND}, two shapes)",
               COMPILED_EVAL: f"compiled eval ({COMPILE_BACKEND}, two shapes)", ALIASING: "output aliasing",
               GENERATORS: "module generators", ATTRIBUTES: "module attributes"}
# the module in train(), grad on, a backward after the call
GRAD_MODES = (TRAIN, F64, AUTOCAST_TRAIN, HOOKS, HOOKS_FORWARD, DOUBLE, REPLICA, COMPILED)
TRAIN_MODES = GRAD_MODES + (FUNC_GRAD,)  # the module in train()
AMP_MODES = (AUTOCAST, AUTOCAST_TRAIN)  # the forward under torch.autocast
_MSG = 500  # characters of an exception message compared


def device_of(module, args, kwargs) -> str:
    found = [t.device.type for t in tensors((args, kwargs))]
    if module is not None:
        found += [p.device.type for p in module.parameters()][:1]
    return next((d for d in found if d != "cpu"), "cpu")


def autocast_dtype(device: str):
    import torch

    return torch.float16 if device == "cuda" else torch.bfloat16


def exception_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()[:_MSG]}"


def _seed(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import sys

        np = sys.modules.get("numpy")
        if np is not None:
            np.random.seed(seed % (2 ** 32))
    except Exception:  # a NumPy stub or a half-imported one: its generator goes unseeded
        pass


class NotApplicable(Exception):
    """The call cannot be made in this way at all (no module to replicate, no batch
    dimension): the original raises it, so the check is skipped with its message."""


def module_generators(module) -> dict:
    """``{qualified attribute name: torch.Generator}`` the module and its submodules hold as
    attributes (their draws are what a user sees of them)."""
    import torch

    found: dict = {}
    if module is None:
        return found
    for qual, m in module.named_modules():
        for attr, value in vars(m).items():
            if isinstance(value, torch.Generator):
                found[f"{qual}.{attr}" if qual else attr] = value
    return found


def _state(module) -> tuple[dict, dict]:
    """Buffers (values) and parameters' gradients of ``module`` (None where there is none)."""
    if module is None:
        return {}, {}
    buffers = {k: v.detach().clone().cpu() for k, v in module.named_buffers()}
    grads = {k: (None if p.grad is None else p.grad.detach().clone().cpu()) for k, p in module.named_parameters()}
    return buffers, grads


def attributes(module) -> dict[str, Any]:
    """{"submodule.name": value} of the Python numbers and strings a user reads off each
    submodule: its plain attributes and the properties its own class defines (one that
    raises is left out). A fix may move such a number into a tensor, never change what a
    call does to it."""
    if module is None:
        return {}
    out: dict[str, Any] = {}
    for qual, m in module.named_modules(remove_duplicate=False):
        names = [k for k, v in vars(m).items() if not k.startswith("__")]
        names += [k for k, v in vars(type(m)).items() if isinstance(v, property)]
        for k in dict.fromkeys(names):
            try:
                v = getattr(m, k)
            except Exception:  # a property that cannot be read now: nothing to compare
                continue
            if isinstance(v, (bool, int, float, str, type(None))):
                out[f"{qual}.{k}" if qual else k] = v
    return out


def run_call(fn: Any, module, args: tuple, kwargs: dict, mode: str, seed: int, loss=None) -> dict:
    """Call ``fn`` once in ``mode`` and return its record (plain containers of CPU tensors);
    ``loss`` is the target's own (``Target.loss``), else train mode backwards the sum of
    the floating outputs. In ``compiled`` mode ``fn`` is what runs (eager or compiled: the
    caller decides)."""
    import contextlib

    import torch

    rec: dict[str, Any] = {"mode": mode, "seed": seed}
    read_before = attributes(module)
    flags = [(m, m.training) for m in module.modules()] if module is not None else []
    leaves: list = []
    if module is not None:
        module.train(mode in TRAIN_MODES)
    if mode in GRAD_MODES:
        if module is not None:
            module.zero_grad(set_to_none=True)

        def leaf(t):
            if t.is_floating_point():
                lt = t.detach().clone().requires_grad_(True)
                leaves.append(lt)
                return lt.clone()  # the caller's tensor: not a leaf, so in-place use stays legal
            return t.clone()

        args, kwargs = map_tensors(args, leaf), map_tensors(kwargs, leaf)
    else:
        args, kwargs = map_tensors(args, lambda t: t.clone()), map_tensors(kwargs, lambda t: t.clone())
    ctx = torch.enable_grad() if mode in TRAIN_MODES else torch.no_grad()
    amp = contextlib.nullcontext()
    if mode in AMP_MODES:
        device = device_of(module, args, kwargs)
        rec["precision"] = str(autocast_dtype(device)).replace("torch.", "")
        amp = torch.autocast(device_type=device, dtype=autocast_dtype(device))
    hooks = _CallLog(module, mode == HOOKS) if mode in (HOOKS, HOOKS_FORWARD) else contextlib.nullcontext()
    said = _Said()
    _seed(seed)
    out = None
    try:
        with ctx, hooks, said:
            if mode == FUNC_GRAD:
                out = _func_grad(fn, module, args, kwargs, loss)
            elif mode == VMAP:
                out = _vmap(fn, args, kwargs)
            else:
                call = _replica_call(fn, module) if mode == REPLICA else fn
                with amp:
                    out = call(*args, **kwargs)
            if mode in GRAD_MODES:  # after autocast, as mixed-precision training does
                scalar = training_loss(out, loss)
                rec["differentiable"] = scalar is not None
                if scalar is not None and mode == DOUBLE:
                    rec["grads_first"], rec["second_order"] = _penalty_backward(scalar, leaves, module)
                elif scalar is not None:
                    scalar.backward()
        rec["status"] = "ok"
        rec["out"] = to_plain(out)
    except Exception as exc:
        rec["status"] = "raised"
        rec["exc"] = exception_text(exc)
    finally:
        for m, was in flags:
            m.training = was
    if mode in (HOOKS, HOOKS_FORWARD):
        rec["calls"] = hooks.calls
    rec["said"] = said.said
    rec["inputs_after"] = to_plain((args, kwargs))
    rec["rng"] = torch.get_rng_state()
    rec["aliases"] = aliases(out, (args, kwargs), module) if rec["status"] == "ok" else {}
    rec["generators"] = {k: g.get_state() for k, g in module_generators(module).items()}
    buffers, grads = _state(module)
    rec["buffers"] = buffers
    after = attributes(module)
    # what the call did to them: (before, after) of each one it changed
    rec["attributes"] = {k: (read_before.get(k), v) for k, v in after.items()
                         if k not in read_before or not same_value(read_before[k], v)}
    if mode in GRAD_MODES:
        rec["grads_in"] = [None if t.grad is None else t.grad.detach().clone().cpu() for t in leaves]
        rec["grads_param"] = grads
        if module is not None:
            module.zero_grad(set_to_none=True)
    return rec


class _Said:
    """What a call says besides its result: each warning (its class and message) and each log
    record (logger, level, message), in order. Warnings are all recorded (``always``), none
    raised; where the call names them (file, line) is left out: a rewrite moves lines."""

    _ADDRESS = re.compile(r"0x[0-9a-fA-F]+")

    def __init__(self) -> None:
        self.said: list[str] = []

    def __enter__(self):
        import logging
        import warnings

        self._warnings = warnings.catch_warnings(record=True)
        self._caught = self._warnings.__enter__()
        warnings.simplefilter("always")
        said = self

        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                try:
                    text = record.getMessage()
                except Exception:  # the record's own formatting fails: its template
                    text = str(record.msg)
                said.said.append(f"log {record.name} {record.levelname}: {said._plain(text)}")

        self._handler = Handler(level=logging.NOTSET)
        logging.getLogger().addHandler(self._handler)
        return self

    def __exit__(self, *exc) -> None:
        import logging

        logging.getLogger().removeHandler(self._handler)
        self._warnings.__exit__(*exc)
        # warnings first, then log records: their interleaving is not kept (two channels)
        self.said[:0] = [f"warning {w.category.__name__}: {self._plain(str(w.message))}" for w in self._caught]

    def _plain(self, text: str) -> str:
        return self._ADDRESS.sub("0x?", text)[:300]


def _paths(obj: Any, path: str) -> list[tuple[str, Any]]:
    """(path, tensor) for every tensor in ``obj`` (as ``to_plain`` walks it)."""
    import dataclasses

    import torch

    if isinstance(obj, torch.Tensor):
        return [(path, obj)]
    if isinstance(obj, (list, tuple)):
        return [p for i, v in enumerate(obj) for p in _paths(v, f"{path}[{i}]")]
    if isinstance(obj, dict) or (hasattr(obj, "keys") and hasattr(obj, "__getitem__") and not isinstance(obj, type)):
        try:
            return [p for k in obj.keys() for p in _paths(obj[k], f"{path}.{k}")]
        except Exception:  # a user mapping whose keys() or [] raises: no paths inside it
            return []
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [p for f in dataclasses.fields(obj) for p in _paths(getattr(obj, f.name), f"{path}.{f.name}")]
    return []


def aliases(out: Any, inputs: Any, module) -> dict[str, str]:
    """For each output tensor that is a tensor of the caller's or of the module, or shares
    storage with one (a view, ``x[:, 0]``, ``x.view(...)``): what it is (``is input[0][1]``,
    ``views parameter fc.weight``). A caller that writes into the output, or into the input
    afterwards, sees the other change: a rewrite must keep both ``is`` and the sharing."""
    a, k = inputs
    named = [(f"the caller's {p}", t) for p, t in _paths(a, "args") + _paths(k, "kwargs")]
    if module is not None:
        named += [(f"parameter {k}", t) for k, t in module.named_parameters()]
        named += [(f"buffer {k}", t) for k, t in module.named_buffers()]
    storages = {}
    for name, t in named:
        if t.numel() and storage_of(t) is not None:
            storages.setdefault(storage_of(t), name)
    found: dict[str, str] = {}
    for path, o in _paths(out, "output"):
        same = next((name for name, t in named if o is t), None)
        if same:
            found[path] = f"is {same}"
        elif o.numel() and storage_of(o) in storages:
            found[path] = f"views {storages[storage_of(o)]}"
    return found


def storage_of(t) -> Optional[int]:
    """The address of ``t``'s storage; None for a tensor without one (a torch.func wrapper a
    module kept as an attribute when a transform ran it)."""
    try:
        return t.untyped_storage().data_ptr()
    except (NotImplementedError, RuntimeError):  # a torch.func wrapper a module kept: no storage
        return None


class _CallLog:
    """A forward pre-hook and (``backward``) a full backward hook on every submodule while
    active: ``calls`` lists ("forward" | "backward", qualified name) in the order they fired
    (a forward recomputed in backward fires its forward hooks then)."""

    def __init__(self, module, backward: bool = True) -> None:
        self.module = module
        self.backward = backward
        self.calls: list[tuple[str, str]] = []
        self.handles: list = []

    def __enter__(self) -> "_CallLog":
        if self.module is None:
            raise NotApplicable("the target has no module to hook")
        for name, m in self.module.named_modules():
            name = name or "(root)"
            self.handles.append(m.register_forward_pre_hook(
                lambda mod, inp, name=name: self.calls.append(("forward", name))))
            if self.backward:
                self.handles.append(m.register_full_backward_hook(
                    lambda mod, gin, gout, name=name: self.calls.append(("backward", name))))
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


def _penalty_backward(scalar, leaves: list, module) -> tuple[list, bool]:
    """The gradient of ``scalar`` with ``create_graph=True`` (inputs, then parameters), then a
    backward through the sum of its squares; returns the first-order gradients and whether
    any depends on the inputs or parameters (a second derivative exists)."""
    import torch

    params = [p for p in module.parameters() if p.requires_grad] if module is not None else []
    wrt = leaves + params
    grads = torch.autograd.grad(scalar, wrt, create_graph=True, allow_unused=True) if wrt else ()
    first = [None if g is None else g.detach().clone().cpu() for g in grads]
    twice = [g for g in grads if g is not None and g.requires_grad]
    if twice:
        sum((g.float() ** 2).sum() for g in twice).backward()
    return first, bool(twice)


def _func_grad(fn, module, args: tuple, kwargs: dict, loss) -> dict:
    """``torch.func.grad`` of the loss w.r.t. the parameters (through ``functional_call``
    where the target is the module's forward) and the floating inputs."""
    from torch.func import functional_call, grad

    floats = tuple(t for t in tensors((args, kwargs)) if t.is_floating_point())
    functional = module is not None and (fn is module or (getattr(fn, "__self__", None) is module
                                                           and getattr(fn, "__name__", "") == "forward"))
    params = ({k: p.detach() for k, p in module.named_parameters() if p.requires_grad} if functional else {})
    if not params and not floats:
        raise NotApplicable("no parameters and no floating-point input to take gradients of")

    def scalar(ps, fl):
        it = iter(fl)
        a, k = map_tensors((args, kwargs), lambda t: next(it) if t.is_floating_point() else t)
        out = functional_call(module, ps, tuple(a), dict(k), strict=False) if functional else fn(*a, **k)
        value = training_loss(out, loss)
        if value is None:
            raise NotApplicable("no floating-point output requires grad")
        return value

    gp, gi = grad(scalar, argnums=(0, 1))(params, floats)
    return {"parameters": dict(gp), "inputs": list(gi)}


def resized(args: tuple, kwargs: dict) -> Optional[tuple[tuple, dict, int]]:
    """The inputs with the batch one larger (every tensor whose first dimension is the
    first tensor's gets its first row again at the end), and that batch; None when no
    tensor has a dimension."""
    import torch

    sized = [t for t in tensors((args, kwargs)) if t.dim() >= 1]
    if not sized:
        return None
    batch = sized[0].shape[0]

    def grow(t):
        return torch.cat([t, t[:1]]) if t.dim() >= 1 and t.shape[0] == batch and batch else t.clone()

    return map_tensors(args, grow), map_tensors(kwargs, grow), batch + 1


def _vmap(fn, args: tuple, kwargs: dict) -> Any:
    """``fn`` under ``torch.func.vmap`` over the batch dimension: each sample a batch of one."""
    from torch.func import vmap

    sized = [t for t in tensors((args, kwargs)) if t.dim() >= 1]
    if not sized:
        raise NotApplicable("no input has a batch dimension")
    batch = sized[0].shape[0]

    def batched(t):
        return t.dim() >= 1 and t.shape[0] == batch

    per_sample = [t.unsqueeze(1) for t in tensors((args, kwargs)) if batched(t)]

    def one(*samples):
        it = iter(samples)
        a, k = map_tensors((args, kwargs), lambda t: next(it) if batched(t) else t)
        return fn(*a, **k)

    return vmap(one)(*per_sample)


def replicate(module):
    """A replica of ``module`` as ``torch.nn.parallel.replicate`` makes one for its first
    device (which it refuses to do on CPU): every submodule ``_replicate_for_data_parallel``,
    each parameter a non-leaf copy (gradients flow back to the original's), buffers shared."""
    memo = {m: m._replicate_for_data_parallel() for m in module.modules()}
    copies: dict[int, Any] = {}
    for m, r in memo.items():
        for name, child in m._modules.items():
            r._modules[name] = memo.get(child, child)
        for name, p in m._parameters.items():
            if p is None:
                r._parameters[name] = None
                continue
            if id(p) not in copies:  # tied parameters stay tied
                copies[id(p)] = p.clone() if p.requires_grad else p.detach()
            setattr(r, name, copies[id(p)])  # not a Parameter: a plain attribute, as replicate does
            if hasattr(r, "_former_parameters"):
                r._former_parameters[name] = copies[id(p)]
    return memo[module]


def _replica_call(fn, module):
    import types

    if module is None:
        raise NotApplicable("the target has no module to replicate")
    if fn is module:
        return replicate(module)
    if getattr(fn, "__self__", None) is module:
        return types.MethodType(fn.__func__, replicate(module))
    raise NotApplicable("the target calls its module from a function: there is no replica to call")


def train_unusable(rec: dict, module, has_leaves: bool) -> Optional[str]:
    """Why the original's first train-mode call cannot serve as a train check, or None."""
    if rec.get("status") == "raised":
        return f"the original raises in train mode: {rec['exc'][:200]}"
    if module is None and not has_leaves:
        return NOTHING_TO_TRAIN
    if not rec.get("differentiable"):
        return "no floating-point output requires grad"
    return None


def observer_unusable(rec: dict, mode: str, module, has_leaves: bool) -> Optional[str]:
    """Why the original's call in one of the example-only ways of running it (``hooks``,
    ``double_backward``, ``func_grad``, ``vmap``, ``replicate``, ``compiled``, ``compiled_eval``) cannot serve as
    a check, or None."""
    if rec.get("status") == "raised":
        if rec["exc"].startswith(f"{NotApplicable.__name__}: "):
            return rec["exc"].split(": ", 1)[1]
        return f"the original raises under {CHECK_NAMES[mode]}: {rec['exc'][:200]}"
    if mode in GRAD_MODES:
        why = train_unusable(rec, module, has_leaves)
        if why:
            return why
    if mode == DOUBLE and not rec.get("second_order"):
        return "the original's gradient does not depend on its inputs or parameters (no second derivative)"
    return None


# why a check was skipped although the original runs that way: nothing was compared there
NOT_DETERMINISTIC = "the original is not deterministic in this mode"
COMPILED_DIFFERS = f"the original under torch.compile(backend={COMPILE_BACKEND!r}) differs from eager"
OBSERVER_CHECKS = {CHECK_NAMES[m] for m in (HOOKS, HOOKS_FORWARD, DOUBLE, FUNC_GRAD, VMAP, REPLICA) + COMPILED_RUNS}


def proof_gap(check: str, why: str) -> bool:
    """Whether skipping ``check`` (a CHECK_NAMES value) for ``why`` leaves the proof partial.
    A way of running the module that the original itself does not support (it raises there:
    under vmap, autocast, bf16; has nothing to train; no second derivative, no module to
    hook) is no gap: there is no behaviour of the original to keep. One the original runs
    but that could not be compared is: it is not deterministic, its compiled form differs
    from its eager one, or (a core mode) no floating-point output requires grad, so train
    mode was never compared at all."""
    if why == NOTHING_TO_TRAIN or why.startswith("the original raises"):
        return False
    if check in OBSERVER_CHECKS:
        return why.startswith((NOT_DETERMINISTIC, COMPILED_DIFFERS))
    return True


def same_value(a: Any, b: Any) -> bool:
    """Two numbers or strings a user reads off a module are the same (NaN equal to NaN)."""
    return type(a) is type(b) and (a == b or a != a and b != b)
