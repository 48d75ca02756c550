"""The adversarial suite: verification that deserves the word.

``tests/adversarial/`` holds small everyday programs, each with a data-dependent branch or
host sync that torch.compile breaks on and whose obvious rewrite is unsound in some mode a
user can observe (NaN gradients through a non-total arm, module state, in-place writes,
RNG, autocast / bf16, exception types, rare arms, detaching, deferred logging), plus a few
whose fix IS sound. Each declares ``EXPECT`` ("fix" | "refuse"), ``ACCEPT_REASONS`` and
optionally ``NAIVE`` (see tests/adversarial/_adv.py).

One ``mend fix`` run (``graphmend.fixing.run_fix``) over a temporary copy of the folder;
then, for every program:

(a) a fix mend marks ``verified`` is checked by an oracle written here, independent of
    graphmend.verify: original and patched module imported under distinct names from temp
    files, targets built with the same seed, compared on the example and trigger inputs in
    eval (no_grad), train with backward (outputs, input and parameter grads NaN-aware, None
    vs tensor a difference, buffers, RNG state after forward and after backward), autocast
    bf16, the model cast to bf16; the caller's inputs after the call; exceptions (type and
    message); log records, warnings and stdout; which outputs are (or view) an input or a
    module tensor, and the module's own generators; then the other ways a user runs a module:
    with forward / backward hooks on every submodule (call order and counts), a gradient
    penalty (double backward), ``torch.func.grad`` over ``functional_call``, a DataParallel-
    style replica (gradients on the original's parameters), and the patched program under
    ``torch.compile(backend="aot_eager")`` against the original in eager on two batch sizes
    (in eval where train mode cannot run the original; each skipped where the original itself
    raises; the compiled one against the original compiled where that runs but differs from
    its eager run);
(b) a fix mend does not verify must give a reason holding one of ``ACCEPT_REASONS``
    (``EXPECT = "fix"`` programs accept none: mend should have found the sound fix);
(c) a summary (programs, sound fixes, refusals) is printed.

``test_oracle_detects_naive`` proves the oracle can fail: the ``NAIVE`` rewrite of every
program that has one differs from the original somewhere; ``test_oracle_self_agrees``
proves it does not fail for nothing (original against a copy of itself).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import itertools
import logging
import os
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Optional

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS_DIR = ROOT / "tests" / "adversarial"
PROGRAMS = sorted(p.stem for p in PROGRAMS_DIR.glob("*.py") if not p.name.startswith("_"))
SEED = 1234  # the global seed set before every call of either side
MODES = ("eval", "train", "autocast_bf16", "cast_bf16")
# ways of running the module that the original may not support: a family where it raises is
# not compared
FAMILIES = ("hooks", "double_backward", "func_grad", "replicate")
COMPILED = "compiled"
TRAIN_LIKE = ("train", "hooks", "double_backward", "replicate", COMPILED)

_counter = itertools.count()


# -- loading ---------------------------------------------------------------------------------

def load_program(text: str, tmp: Path, tag: str):
    """``text`` imported as a fresh module from a temp file under a unique name (the
    adversarial folder is on sys.path for ``_adv``)."""
    if str(PROGRAMS_DIR) not in sys.path:
        sys.path.insert(0, str(PROGRAMS_DIR))
    name = f"_adv_oracle_{tag}_{next(_counter)}"
    path = tmp / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def program_meta(stem: str):
    """The program's declarations, read from a fresh import of the file itself."""
    import importlib

    if str(PROGRAMS_DIR) not in sys.path:
        sys.path.insert(0, str(PROGRAMS_DIR))
    mod = importlib.import_module(stem)
    return mod


def _factory(mod):
    names = [n for n in dir(mod) if n.startswith("mend_target")]
    assert len(names) == 1, f"{mod.__name__}: one mend_target function expected, found {names}"
    return getattr(mod, names[0])


def build(mod):
    """(callable, [(args, kwargs), ...]): the example input first, then the trigger inputs."""
    from graphmend import Target

    made = _factory(mod)()
    if isinstance(made, Target):
        extra = list(getattr(made, "inputs", None) or getattr(made, "perturb", None) or [])
        return made.fn, [(tuple(made.args), dict(made.kwargs))] + [(tuple(a), dict(k)) for a, k in extra]
    fn, args, *rest = made
    return fn, [(tuple(args) if isinstance(args, (tuple, list)) else (args,), dict(rest[0]) if rest else {})]


def modules_of(fn) -> list:
    if isinstance(fn, torch.nn.Module):
        return [fn]
    owner = getattr(fn, "__self__", None)
    return [owner] if isinstance(owner, torch.nn.Module) else []


# -- observing one call ------------------------------------------------------------------

def _map(obj, f):
    if isinstance(obj, torch.Tensor):
        return f(obj)
    if isinstance(obj, tuple):
        return tuple(_map(v, f) for v in obj)
    if isinstance(obj, list):
        return [_map(v, f) for v in obj]
    if isinstance(obj, dict):
        return {k: _map(v, f) for k, v in obj.items()}
    return obj


def flat(obj, path="out") -> list[tuple[str, Any]]:
    """(path, leaf) pairs: tensors detached and cloned, other leaves as they are."""
    if isinstance(obj, torch.Tensor):
        return [(path, obj.detach().clone())]
    if isinstance(obj, (tuple, list)):
        return [p for i, v in enumerate(obj) for p in flat(v, f"{path}[{i}]")] or [(path, type(obj).__name__ + "()")]
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in flat(v, f"{path}.{k}")] or [(path, "{}")]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [p for fd in dataclasses.fields(obj) for p in flat(getattr(obj, fd.name), f"{path}.{fd.name}")]
    if isinstance(obj, (int, float, bool, str, type(None))):
        return [(path, obj)]
    return [(path, type(obj).__name__)]


def _floats(obj) -> list:
    return [t for _, t in flat(obj) if isinstance(t, torch.Tensor)]


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[str, str]] = []

    def emit(self, record):
        self.seen.append((record.levelname, record.getMessage()))


def _exc(e: BaseException) -> tuple[str, str]:
    return (type(e).__name__, str(e))


def _replica(module):
    """What ``torch.nn.parallel.replicate`` hands its first device (it refuses the CPU): a
    shallow copy of every submodule whose parameters are non-leaf clones of the original's."""
    copies = {}
    for m in module.modules():
        copies[m] = m._replicate_for_data_parallel()
    clones: dict = {}
    for m, r in copies.items():
        for name, child in list(m._modules.items()):
            r._modules[name] = copies.get(child, child)
        for name, p in m._parameters.items():
            if p is not None:
                clones.setdefault(id(p), p.clone())
                object.__setattr__(r, name, clones[id(p)])
    return copies[module]


def _aliases(out, args, kwargs, mods) -> dict[str, str]:
    """Output path -> which input / module tensor it is or shares storage with."""
    known = [(f"input {p}", t) for p, t in _live_paths((args, kwargs), "")]
    known += [(f"{i}.{n}", t) for i, m in enumerate(mods) for n, t in [*m.named_parameters(), *m.named_buffers()]]
    found = {}
    for path, o in _live_paths(out, "out"):
        for name, t in known:
            if o is t:
                found[path] = f"is {name}"
                break
            if o.numel() and t.numel() and _storage(o) is not None and _storage(o) == _storage(t):
                found[path] = f"shares storage with {name}"
                break
    return found


def _storage(t):
    try:
        return t.untyped_storage().data_ptr()
    except (NotImplementedError, RuntimeError):  # a functorch wrapper a module kept: no storage
        return None


def _live_paths(obj, path) -> list:
    if isinstance(obj, torch.Tensor):
        return [(path, obj)]
    if isinstance(obj, (tuple, list)):
        return [p for i, v in enumerate(obj) for p in _live_paths(v, f"{path}[{i}]")]
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _live_paths(v, f"{path}.{k}")]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [p for fd in dataclasses.fields(obj) for p in _live_paths(getattr(obj, fd.name), f"{path}.{fd.name}")]
    return []


def _generators(mods) -> dict:
    return {f"{i}.{q}.{a}": g.get_state() for i, m in enumerate(mods) for q, sub in m.named_modules()
            for a, g in vars(sub).items() if isinstance(g, torch.Generator)}


def _func_grad(fn, mods, args, kwargs):
    """torch.func.grad of the summed floating outputs w.r.t. the parameters (through
    functional_call when ``fn`` is the module) and the floating inputs."""
    from torch.func import functional_call, grad

    module = mods[0] if mods and fn is mods[0] else None
    params = {n: p.detach() for n, p in module.named_parameters()} if module is not None else {}
    floats = [t for _, t in _live_paths((args, kwargs), "") if t.is_floating_point()]

    def loss(ps, fl):
        it = iter(fl)
        a, k = _map((args, kwargs), lambda t: next(it) if t.is_floating_point() else t)
        out = functional_call(module, ps, a, k) if module is not None else fn(*a, **k)
        return sum(t.float().sum() for t in _live_tensors(out) if t.is_floating_point())

    return grad(loss, argnums=(0, 1))(params, tuple(floats))


def observe(fn, args: tuple, kwargs: dict, mode: str) -> dict[str, Any]:
    """Everything a caller can see of one call of ``fn`` in ``mode`` (``compiled``: ``fn``
    is already compiled or not, and runs as in ``train``)."""
    # a compiled target's modules are those of what was compiled
    mods = modules_of(getattr(fn, "_orig_mod", None) or getattr(fn, "_torchdynamo_orig_callable", None) or fn)
    obs: dict[str, Any] = {}
    args, kwargs = _map((args, kwargs), lambda t: t.detach().clone())
    leaves: list = []
    if mode == "cast_bf16":
        for m in mods:
            m.to(torch.bfloat16)
        args, kwargs = _map((args, kwargs), lambda t: t.to(torch.bfloat16) if t.is_floating_point() else t)
    for m in mods:
        m.train(mode in TRAIN_LIKE or mode == "func_grad")
    call = fn
    if mode == "replicate":
        if not mods or fn is not mods[0]:
            return {"unsupported": "no module to replicate"}
        call = _replica(mods[0])
    hooks: list = []
    fwd: list = []
    bwd: list = []
    if mode == "hooks":
        if not mods:
            return {"unsupported": "no module to hook"}
        for n, sub in mods[0].named_modules():
            hooks.append(sub.register_forward_pre_hook(lambda mod, inp, n=n: fwd.append(n)))
            hooks.append(sub.register_full_backward_hook(lambda mod, gi, go, n=n: bwd.append(n)))
    if mode in TRAIN_LIKE:
        def lift(t):
            if not t.is_floating_point():
                return t
            leaf = t.detach().clone().requires_grad_(True)
            leaves.append(leaf)
            return leaf.clone()  # not a leaf: the callee may write it in place, as callers allow
        args, kwargs = _map((args, kwargs), lift)
    grad_ctx = contextlib.nullcontext() if mode in TRAIN_LIKE or mode == "func_grad" else torch.no_grad()
    amp_ctx = torch.autocast("cpu", dtype=torch.bfloat16) if mode == "autocast_bf16" else contextlib.nullcontext()
    handler, root = _Records(), logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    stdout = io.StringIO()
    out = None
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(stdout):
            warnings.simplefilter("always")
            torch.manual_seed(SEED)
            try:
                with grad_ctx, amp_ctx:
                    out = _func_grad(fn, mods, args, kwargs) if mode == "func_grad" else call(*args, **kwargs)
                obs["raised"] = None
            except Exception as e:  # noqa: BLE001 - the exception IS the behaviour
                obs["raised"] = _exc(e)
            obs["rng"] = torch.get_rng_state()
            if mode in TRAIN_LIKE and obs["raised"] is None:
                floats = [t for t in _floats(out) if t.is_floating_point()]
                # the live outputs, not the clones flat() makes
                live = [t for t in _live_tensors(out) if t.is_floating_point() and t.requires_grad]
                try:
                    if live and mode == "double_backward":  # a gradient penalty, WGAN-GP style
                        wrt = leaves + [p for m in mods for p in m.parameters() if p.requires_grad]
                        first = torch.autograd.grad(sum(t.sum() for t in live), wrt, create_graph=True,
                                                    allow_unused=True)
                        obs["first_grads"] = [None if g is None else g.detach().clone() for g in first]
                        second = [g for g in first if g is not None and g.requires_grad]
                        obs["second_order"] = bool(second)
                        if second:
                            sum((g ** 2).sum() for g in second).backward()
                    elif live:
                        sum(t.sum() for t in live).backward()
                    obs["backward_raised"] = None
                except Exception as e:  # noqa: BLE001
                    obs["backward_raised"] = _exc(e)
                obs["rng_after_backward"] = torch.get_rng_state()
                obs["input_grads"] = [None if l.grad is None else l.grad.clone() for l in leaves]
                obs["param_grads"] = {f"{i}.{n}": None if p.grad is None else p.grad.clone()
                                      for i, m in enumerate(mods) for n, p in m.named_parameters()}
                del floats
        obs["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for h in hooks:
            h.remove()
    if mode == "hooks":
        obs["calls_forward"] = fwd
        obs["calls_backward"] = sorted(bwd)  # counts: the engine's order is its own scheduling
    obs["aliases"] = _aliases(out, args, kwargs, mods) if obs["raised"] is None else {}
    obs["generators"] = _generators(mods)
    obs["out"] = flat(out) if obs["raised"] is None else None
    obs["inputs_after"] = flat((args, kwargs), "inputs")
    obs["buffers"] = {f"{i}.{n}": b.detach().clone() for i, m in enumerate(mods) for n, b in m.named_buffers()}
    obs["logs"] = handler.seen
    obs["stdout"] = stdout.getvalue()
    return obs


def _live_tensors(obj) -> list:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for v in obj for t in _live_tensors(v)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _live_tensors(v)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [t for fd in dataclasses.fields(obj) for t in _live_tensors(getattr(obj, fd.name))]
    return []


# -- comparing -------------------------------------------------------------------------------

def diff_value(a, b, what: str) -> Optional[str]:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{what}: {'None' if a is None else type(a).__name__} vs {'None' if b is None else type(b).__name__}"
        if a.shape != b.shape:
            return f"{what}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
        if a.dtype != b.dtype:
            return f"{what}: dtype {a.dtype} vs {b.dtype}"
        if a.dtype == torch.uint8 or not (a.is_floating_point() or a.is_complex()):
            return None if torch.equal(a, b) else f"{what}: {a.dtype} values differ"
        try:
            torch.testing.assert_close(b, a, equal_nan=True)
        except AssertionError as e:
            nan_a, nan_b = int(torch.isnan(a).sum()), int(torch.isnan(b).sum())
            extra = f" (NaNs: original {nan_a}, patched {nan_b})" if nan_a != nan_b else ""
            return f"{what}: values differ{extra}: {str(e).splitlines()[1] if len(str(e).splitlines()) > 1 else e}"
        return None
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return None
    return None if a == b else f"{what}: {a!r} vs {b!r}"


def diff_obs(a: dict, b: dict) -> list[str]:
    """What differs between the original's observation ``a`` and the patched one's ``b``."""
    out = []
    if a["raised"] != b["raised"]:
        out.append(f"exception: original {a['raised'] or 'returned'}, patched {b['raised'] or 'returned'}")
    if a["out"] is not None and b["out"] is not None:
        pa, pb = [p for p, _ in a["out"]], [p for p, _ in b["out"]]
        if pa != pb:
            out.append(f"output structure: {pa} vs {pb}")
        else:
            out += [d for (p, x), (_, y) in zip(a["out"], b["out"]) if (d := diff_value(x, y, p))]
    for key, label in (("rng", "RNG state after the call"), ("rng_after_backward", "RNG state after backward")):
        if key in a and key in b and not torch.equal(a[key], b[key]):
            out.append(label + " differs")
    if a.get("backward_raised") != b.get("backward_raised"):
        out.append(f"backward: original {a.get('backward_raised') or 'ran'}, patched {b.get('backward_raised') or 'ran'}")
    for i, (x, y) in enumerate(zip(a.get("input_grads", []), b.get("input_grads", []))):
        if d := diff_value(x, y, f"input grad {i}"):
            out.append(d)
    for k in sorted(set(a.get("param_grads", {})) | set(b.get("param_grads", {}))):
        if d := diff_value(a.get("param_grads", {}).get(k), b.get("param_grads", {}).get(k), f"param grad {k}"):
            out.append(d)
    for k in sorted(set(a["buffers"]) | set(b["buffers"])):
        if d := diff_value(a["buffers"].get(k), b["buffers"].get(k), f"buffer {k}"):
            out.append(d)
    for (p, x), (_, y) in zip(a["inputs_after"], b["inputs_after"]):
        if d := diff_value(x, y, f"caller's {p} after the call"):
            out.append(d)
    for key in ("calls_forward", "calls_backward", "aliases", "second_order"):
        if a.get(key) != b.get(key):
            out.append(f"{key}: {a.get(key)!r} vs {b.get(key)!r}")
    for i, (x, y) in enumerate(zip(a.get("first_grads", []), b.get("first_grads", []))):
        if d := diff_value(x, y, f"first-order grad {i}"):
            out.append(d)
    for k in sorted(set(a.get("generators", {})) | set(b.get("generators", {}))):
        if d := diff_value(a["generators"].get(k), b.get("generators", {}).get(k), f"generator {k} state"):
            out.append(d)
    for key in ("logs", "warnings", "stdout"):
        if key in a and a[key] != b.get(key):
            out.append(f"{key}: {a[key]!r} vs {b.get(key)!r}")
    return out


def _unusable(obs: dict) -> bool:
    """The original cannot be run this way: the family is not compared."""
    return bool(obs.get("unsupported") or obs.get("raised") or obs.get("backward_raised")
                or obs.get("second_order") is False)


def _grown(args, kwargs):
    """The inputs with the batch one larger: tensors whose first dimension is the first
    tensor's batch get their first row again."""
    sized = [t for _, t in _live_paths((args, kwargs), "") if t.dim()]
    if not sized:
        return None
    n = sized[0].shape[0]
    return _map((args, kwargs), lambda t: torch.cat([t, t[:1]]) if t.dim() and t.shape[0] == n else t)


def _compiled_diffs(original: str, patched: str, tmp: Path, args, kwargs,
                    mode: str = COMPILED) -> Optional[list[str]]:
    """The patched program under torch.compile(aot_eager) against the original in eager,
    train mode (``mode``: or eval, where the original cannot run in train mode: None), on
    ``args`` and on them with the batch one larger (the same compiled object: the second call
    recompiles). Where the original compiled differs from its own eager run, against the
    original compiled.
    Logs, warnings and stdout are left out: a fix may skip logging under compile by design."""
    grown = _grown(args, kwargs)
    shapes = [(args, kwargs)] + ([grown] if grown else [])
    sides = {}
    for tag, text, compiled in (("eager", original, False), ("self", original, True), ("patched", patched, True)):
        if tag == "patched" and text == original:  # a copy compiles to what the original compiled
            sides[tag] = sides["self"]
            continue
        fn, _ = build(load_program(text, tmp, f"compiled_{tag}"))
        torch._dynamo.reset()
        run = torch.compile(fn, backend="aot_eager") if compiled else fn
        try:
            sides[tag] = [observe(run, a, k, mode) for a, k in shapes]
        finally:
            torch._dynamo.reset()
        if tag == "eager" and mode == COMPILED and _unusable(sides[tag][0]):
            return None
    found = []
    for i, (want, itself, got) in enumerate(zip(sides["eager"], sides["self"], sides["patched"])):
        quiet = lambda o: {k: v for k, v in o.items() if k not in ("logs", "warnings", "stdout")}  # noqa: E731
        if _unusable(want) or _unusable(itself):  # the original compiled raises: nothing to keep
            break
        if diff_obs(quiet(want), quiet(itself)):  # the original compiled is the reference then
            found += [f"shape {i}, against the original compiled: {d}" for d in diff_obs(quiet(itself), quiet(got))]
            continue
        found += [f"shape {i}: {d}" for d in diff_obs(quiet(want), quiet(got))]
    return found


def oracle(original: str, patched: str, tmp: Path, modes=MODES) -> list[str]:
    """Every difference between ``original`` and ``patched`` (module sources) that a caller
    can observe, on the example and trigger inputs, in every mode; [] when none."""
    ref_fn, inputs = build(load_program(original, tmp, "inputs"))
    del ref_fn
    found = []
    for i, (args, kwargs) in enumerate(inputs):
        name = "example" if i == 0 else f"trigger {i - 1}"
        for mode in modes:
            # fresh targets (same seed inside the factory: same weights) for every call
            a_fn, _ = build(load_program(original, tmp, "orig"))
            b_fn, _ = build(load_program(patched, tmp, "patched"))
            try:
                a, b = observe(a_fn, args, kwargs, mode), observe(b_fn, args, kwargs, mode)
            except Exception as e:  # noqa: BLE001 - the oracle itself failing is a finding
                found.append(f"{name}, {mode}: the oracle could not run: {type(e).__name__}: {e}")
                continue
            found += [f"{name}, {mode}: {d}" for d in diff_obs(a, b)]
        for family in FAMILIES:
            a_fn, _ = build(load_program(original, tmp, "orig"))
            b_fn, _ = build(load_program(patched, tmp, "patched"))
            try:
                a = observe(a_fn, args, kwargs, family)
                if _unusable(a):
                    continue
                b = observe(b_fn, args, kwargs, family)
            except Exception as e:  # noqa: BLE001
                found.append(f"{name}, {family}: the oracle could not run: {type(e).__name__}: {e}")
                continue
            found += [f"{name}, {family}: {d}" for d in diff_obs(a, b)]
    # the compiled run on the example only: a compile per side and shape is the cost; in eval
    # where train mode cannot run the original (a rewrite may change only what compiles)
    try:
        diffs = _compiled_diffs(original, patched, tmp, *inputs[0])
        label = COMPILED
        if diffs is None:
            diffs, label = _compiled_diffs(original, patched, tmp, *inputs[0], mode="eval"), f"{COMPILED} eval"
        found += [f"example, {label} {d}" for d in diffs or []]
    except Exception as e:  # noqa: BLE001
        found.append(f"example, {COMPILED}: the oracle could not run: {type(e).__name__}: {e}")
    return found


# -- the mend run ----------------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    program: str
    expect: str
    status: str  # verified | rejected | unverified | advice | none (mend proposed nothing)
    reason: str
    oracle: list[str] = dataclasses.field(default_factory=list)  # differences of a verified patch

    @property
    def refused(self) -> bool:
        return self.status != "verified"


def _fixes_for(run, path: str) -> list:
    real = os.path.realpath(path)
    return [f for f in run.report.fixes if os.path.realpath(f.file) == real]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Outcome]:
    from graphmend.core.config import load_config
    from graphmend.fixing import FixOptions, run_fix

    work = tmp_path_factory.mktemp("adversarial-run")
    folder = work / "adversarial"
    shutil.copytree(PROGRAMS_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    started = time.monotonic()
    # the first call only: each program's break and its fix are the question here; what a fix
    # does to recompiles has its own tests (tests/rewrites/test_fix_state.py)
    run = run_fix([str(folder)], load_config([str(folder)]), FixOptions(jobs=2, calls=1))
    elapsed = time.monotonic() - started
    oracle_tmp = tmp_path_factory.mktemp("adversarial-oracle")
    result: dict[str, Outcome] = {}
    for stem in PROGRAMS:
        path = folder / f"{stem}.py"
        meta = program_meta(stem)
        fixes = _fixes_for(run, str(path))
        patched = run.patches.get(os.path.realpath(path)) or run.patches.get(str(path))
        if patched is not None:
            verified = [f for f in fixes if f.status == "verified"]
            o = Outcome(stem, meta.EXPECT, "verified", "; ".join(f"{f.rule} line {f.line}: {f.reason}" for f in verified))
            o.oracle = oracle(path.read_text(encoding="utf-8"), patched, oracle_tmp)
        elif fixes:
            o = Outcome(stem, meta.EXPECT, ",".join(sorted({f.status for f in fixes})),
                        "; ".join(f"{f.rule} line {f.line} {f.status}: {f.reason}"
                                  + (f" (lacks: {'; '.join(f.partial)})" if f.partial else "") for f in fixes))
        else:
            o = Outcome(stem, meta.EXPECT, "none", "mend proposed nothing for this program")
        result[stem] = o
    result["__elapsed__"] = elapsed  # type: ignore[assignment]
    return result


# like tests/test_corpus_models.py: selectable with -m "not slow"; runs by default
@pytest.mark.slow
@pytest.mark.parametrize("program", PROGRAMS)
def test_program(outcomes, program):
    o = outcomes[program]
    meta = program_meta(program)
    if o.status == "verified":
        assert not o.oracle, (f"{program}: mend verified a fix ({o.reason}) that the oracle tells apart from the "
                              f"original:\n  " + "\n  ".join(o.oracle[:12]))
        return
    accept = tuple(meta.ACCEPT_REASONS)
    assert o.status != "none", f"{program}: mend proposed nothing (the program does not exercise mend)"
    assert accept, f"{program}: EXPECT={meta.EXPECT!r}: mend should find the sound fix, but {o.status}: {o.reason}"
    # the program's own name (in file and target names) is not a reason
    reason = o.reason.lower().replace(program.lower(), "<program>")
    assert any(r in reason for r in accept), (
        f"{program}: {o.status}, but for a reason none of {accept} names: {o.reason}")


@pytest.mark.slow
def test_summary(outcomes, capsys):
    rows = [outcomes[p] for p in PROGRAMS]
    sound = [o for o in rows if o.status == "verified" and not o.oracle]
    unsound = [o for o in rows if o.status == "verified" and o.oracle]
    refused = [o for o in rows if o.refused]
    lines = [f"adversarial suite: {len(rows)} programs, {len(sound)} sound fixes, {len(unsound)} unsound "
             f"verified fixes, {len(refused)} refusals (mend run {outcomes['__elapsed__']:.0f}s)"]
    for o in rows:
        verdict = "SOUND" if o in sound else "UNSOUND" if o in unsound else "refused"
        lines.append(f"  {o.program:28} EXPECT={o.expect:6} {o.status:10} {verdict:8} {o.reason[:110]}")
        if o.oracle:
            lines.append(f"  {'':28} oracle: {o.oracle[0][:140]}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert len(rows) >= 30


# -- the oracle itself ------------------------------------------------------------------------

def _source(stem: str) -> str:
    return (PROGRAMS_DIR / f"{stem}.py").read_text(encoding="utf-8")


# a NAIVE form of a program whose sound fix exists need not be wrong: only the refuse ones
NAIVE_PROGRAMS = [p for p in PROGRAMS if "\nNAIVE = " in _source(p) and '\nEXPECT = "refuse"' in _source(p)]


@pytest.mark.parametrize("program", NAIVE_PROGRAMS)
def test_oracle_detects_naive(program, tmp_path):
    """The programs are adversarial: the naive rewrite differs where the oracle looks."""
    meta = program_meta(program)
    assert meta.NAIVE is not None and meta.NAIVE != _source(program), f"{program}: NAIVE did not apply"
    assert meta.EXPECT == "refuse"
    found = oracle(_source(program), meta.NAIVE, tmp_path)
    assert found, f"{program}: the oracle finds no difference between the original and its naive rewrite"


@pytest.mark.parametrize("program", PROGRAMS)
def test_oracle_self_agrees(outcomes, program, tmp_path):
    """No false alarms: the original against a copy of itself differs nowhere, and the
    program is well formed (declarations, one target, inputs that run). A program whose
    verified fix the oracle found equal to the original has shown that already (the same
    comparison, against the patched program): it runs again only where something differed,
    to tell a false alarm from an unsound fix."""
    meta = program_meta(program)
    assert meta.EXPECT in ("fix", "refuse")
    assert all(r == r.lower() for r in meta.ACCEPT_REASONS)
    assert meta.EXPECT == "fix" or meta.ACCEPT_REASONS, f"{program}: a refusal needs accepted reasons"
    _, inputs = build(load_program(_source(program), tmp_path, "check"))
    assert len(inputs) >= 2, f"{program}: give the trigger inputs through Target(inputs=...)"
    o = outcomes[program]
    if o.status != "verified" or o.oracle:
        assert oracle(_source(program), _source(program), tmp_path) == []


def test_detach_naive_is_a_gradient_difference(tmp_path):
    """The detach program's NAIVE form (.item() dropped, no .detach()) differs only where
    gradients are compared: the oracle's train mode (and the other ways of running it that
    take gradients) is what catches it, never a forward-only mode."""
    meta = program_meta("detach_item_scale")
    found = oracle(_source("detach_item_scale"), meta.NAIVE, tmp_path)
    assert any(", train:" in d for d in found), found
    assert not [d for d in found if any(f", {m}:" in d for m in ("eval", "autocast_bf16", "cast_bf16"))], found
    assert any("grad" in d for d in found), found


# each pair differs only where a way of running the module beyond calling it looks: the
# oracle's family for it sees it, the plain modes (what it compared before) do not
_PAIR = '''
import torch
from torch import nn

VARIANT = 0


class OldStyle(torch.autograd.Function):  # ctx in forward: torch.func cannot run it
    @staticmethod
    def forward(ctx, h):
        ctx.save_for_backward(h)
        return h.tanh()

    @staticmethod
    def backward(ctx, g):  # recomputed from the saved input: twice differentiable
        (h,) = ctx.saved_tensors
        return g * (1 - h.tanh() ** 2)


class OnceTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h):
        out = torch.tanh(h)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * (1 - out * out)


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if VARIANT == 1:  # hooks: a layer called once more, its result dropped
            self.fc(x)
        if VARIANT == 2:  # double backward: no second derivative
            return OnceTanh.apply(h)
        if VARIANT == 3:  # torch.func.grad
            return OldStyle.apply(h)
        if VARIANT == 4:  # replicate: module internals a replica keeps elsewhere
            return torch.nn.functional.linear(x, self.fc._parameters["weight"], self.fc.bias).tanh()
        if VARIANT == 5 and torch.compiler.is_compiling():  # compiled
            return h.tanh() * 2
        return h.tanh()


def mend_target_pair():
    torch.manual_seed(0)
    return M(), (torch.randn(3, 4),)
'''


@pytest.mark.parametrize("variant,family", [(1, "hooks"), (2, "double_backward"), (3, "func_grad"),
                                            (4, "replicate"), (5, "compiled")])
def test_oracle_families_see_what_only_they_observe(variant, family, tmp_path):
    patched = _PAIR.replace("VARIANT = 0", f"VARIANT = {variant}")
    found = oracle(_PAIR, patched, tmp_path)
    assert any(f", {family}" in d for d in found), found
    assert not [d for d in found if any(f", {m}:" in d for m in MODES)], found


def test_oracle_sees_output_aliasing(tmp_path):
    same = _PAIR.replace("def mend_target_pair", "def ident(x):\n    return x if x.sum() > -1e9 else x\n\n\n"
                         "def mend_target_pair").replace("return M(), (torch.randn(3, 4),)",
                                                         "return ident, (torch.randn(3, 4),)")
    fresh = same.replace("return x if x.sum() > -1e9 else x", "return x.clone()")
    found = oracle(same, fresh, tmp_path)
    assert found and all("aliases" in d for d in found), found
