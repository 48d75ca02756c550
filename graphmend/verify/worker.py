"""One side of a verification: ``python -m graphmend.verify.worker PAYLOAD RESULT``.

PAYLOAD: ``spec`` (TargetSpec dict), ``mode`` ("original" | "patched" | "probe": the
original's compiled calls against its eager ones, from ``state``, and against ``patched``, a
patched side's compiled calls where that side's differed from eager), ``patches``
({abs path: source}, served through the overlay), ``conditions`` ({abs path: [[l, c, el, ec],
...]}, original mode: instrumented to record arms), ``constants`` (numbers the rewritten
conditions compare against: inputs filled with them are tried), ``state`` (a file: the
original side writes weights, the inputs it ran and its records there with torch.save; the
patched side reads it), ``seed``, ``retrace`` (patched side: capture breaks under Dynamo
afterwards, on the target loaded afresh), ``probe_dtype`` (both sides, last: trace once more with the model and inputs
cast to that dtype; a ``torch.cond`` whose branches return float32 on one side and the
model's dtype on the other traces in float32 and fails in half precision).

The original side runs the target's example, its own ``Target.inputs`` / ``perturb``, the
example's edge shapes and layouts where a condition was rewritten (``inputs.SHAPES``) and
perturbed variants, each in every mode of ``graphmend.verify.modes`` (eval, train with
backward, autocast; train in float64, then bf16, for every input at the end), until every rewritten condition has
gone both ways (at least ``MIN_VARIANTS`` inputs). The patched side loads the same weights,
runs exactly that sequence and compares record by record.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Optional

from graphmend.core.cache import reading
from graphmend.core.worker import worker_main
from graphmend.verify.modes import (ALIASING, ATTRIBUTES, AUTOCAST, AUTOCAST_TRAIN, BF16, CHECK_NAMES, COMPILE_BACKEND,
                                   COMPILED, COMPILED_DIFFERS, COMPILED_EVAL, COMPILED_RUNS, DOUBLE, EVAL, F64, FUNC_GRAD,
                                   GENERATORS, HOOKS, HOOKS_FORWARD, NOT_DETERMINISTIC, REPLICA, TRAIN, VMAP)

MIN_VARIANTS = 3  # example, negated, random: always, even when every arm is covered sooner
PER_INPUT = (EVAL, TRAIN, AUTOCAST)
EXAMPLE_ONLY = (AUTOCAST_TRAIN,)  # mixed-precision training: once, on the example
# other ways a user runs the module, once each on the example (after the per-input modes,
# before the in-place casts); the compiled run last of them, on two shapes; the double
# backward with the float64 runs (a second derivative amplifies float32 rounding)
OBSERVERS = (HOOKS, FUNC_GRAD, VMAP, REPLICA)
# their float32 gradients differ in rounding where train+grad's do: the float64 run decides
ROUNDING_MODES = (TRAIN, HOOKS, HOOKS_FORWARD, FUNC_GRAD, REPLICA, COMPILED)
CHECK_ORDER = (EVAL, TRAIN, AUTOCAST, AUTOCAST_TRAIN, F64, BF16, HOOKS, HOOKS_FORWARD, DOUBLE, FUNC_GRAD, VMAP, REPLICA,
               COMPILED, COMPILED_EVAL)


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    import torch

    from graphmend.core.overlay import install_overlay
    from graphmend.core.sources import read_source
    from graphmend.core.targets import TargetError, load_target
    from graphmend.verify.arms import ArmRecorder, instrument
    from graphmend.core.modes import module_of
    from graphmend.verify.modes import module_generators

    spec, mode, seed = payload["spec"], payload["mode"], int(payload.get("seed", 0))
    patches: dict[str, str] = dict(payload.get("patches") or {})
    conditions: dict[str, list] = payload.get("conditions") or {}
    recorder = ArmRecorder()
    keys: list[str] = []
    if mode == "original":
        for path, conds in conditions.items():
            # as the fix stage read it: declared encoding, BOM dropped, endings "\n"
            patches[path] = instrument(read_source(path), [tuple(c) for c in conds])
            keys += [f"{os.path.realpath(path)}:{c[0]}:{c[1]}" for c in conds]
        recorder.install()
    finder = install_overlay(patches) if patches else None
    # one thread: a parallel kernel's reductions and its error messages ("Target -62 is out of
    # bounds" names whichever bad element a thread met first) then come out the same each run
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    try:
        loaded = load_target(spec)
    except TargetError as exc:
        return {"error": str(exc)}
    module = module_of(loaded.fn)
    # the weights and buffers BEFORE any run: a stateful module (a KV cache) changes its
    # buffers as it runs, and the patched side must start where the original started
    initial = {k: v.detach().clone() for k, v in module.state_dict().items()} if module is not None else None
    tolerance = getattr(loaded.target, "tolerance", None)
    result: dict[str, Any] = {"served": list(finder.served) if finder else []}
    if mode == "original":
        plan, records, skipped = _run_original(loaded, module, keys, recorder, seed, payload.get("constants") or [])
        torch.save({"plan": plan, "records": _savable(records), "weights": initial, "skipped": skipped},
                   payload["state"])
        ran = sorted({m for m, _ in plan} - set(skipped))
        # every call compares its outputs' aliasing; the generators where the module holds one
        extra = [ALIASING] if records else []
        if module is not None and module_generators(module):
            extra.append(GENERATORS)
        if any(r.get("attributes") for r in records):
            extra.append(ATTRIBUTES)
        result.update(ran=[name for name in dict.fromkeys(n for _, n in plan)], inputs=_inputs_names(plan),
                      checks=[CHECK_NAMES[m] for m in CHECK_ORDER if m in ran] + [CHECK_NAMES[m] for m in extra],
                      skipped={CHECK_NAMES[m]: why for m, why in skipped.items()},
                      arms={k: sorted(v) for k, v in recorder.seen.items()},
                      unexercised=recorder.missing(keys, reached_only=True),
                      example_ok=bool(records) and records[0]["status"] == "ok")
        if payload.get("probe_dtype"):
            result["probe"] = _probe_dtype(loaded, payload["probe_dtype"])
        return result
    # patched side (or the original's compiled probe): the same calls, in the same order,
    # from the same weights
    state = torch.load(payload["state"], weights_only=False)
    if module is not None and state.get("weights") is not None:
        module.load_state_dict(state["weights"], strict=False)
    if mode == "probe":
        why, probes = probe_compiled(loaded, module, state["records"], payload["state"] + ".compiled")
        result["compiled_differs"] = why
        if why and payload.get("patched"):
            result["agrees"] = _agrees_compiled(probes, torch.load(payload["patched"], weights_only=False),
                                                tolerance)
        return result
    mismatches = _run_patched(loaded, module, state, seed, tolerance, result, spec, payload.get("retrace", True),
                              payload.get("run_mode") or EVAL, int(payload.get("calls") or 1), payload["state"])
    result["mismatches"] = mismatches
    result["inputs_run"] = len(_inputs_names(state["plan"]))
    if payload.get("probe_dtype"):
        result["probe"] = _probe_dtype(loaded, payload["probe_dtype"])
    return result


def _inputs_names(plan) -> list[str]:
    return list(dict.fromkeys(n for _, n in plan))


class _Window:
    """The arms the rewritten conditions took since an edge input began (``inputs.edge_inputs``)."""

    def __init__(self, recorder, keys) -> None:
        self.recorder, self.keys, self.at = recorder, keys, 0

    def start(self) -> None:
        self.at = len(self.recorder.log)

    def one_way(self) -> bool:
        return self.recorder.one_way_since(self.at, self.keys)

    def never_flipped(self) -> bool:
        return self.recorder.one_way_since(0, self.keys)


def _candidates(loaded, seed: int, constants: list, recorder=None, keys=()):
    """(name, args, kwargs, required): the example, the target's own inputs, with ``keys``
    (rewritten conditions: both arms now run) the example's edge shapes and layouts, each
    with value variants in its layout while its calls have met one arm only (always run),
    then perturbed variants (run while a rewritten condition has not gone both ways)."""
    from graphmend.verify.inputs import VARIANTS, edge_inputs, filled, variant

    target = loaded.target
    yield ("example", *variant("example", loaded.args, loaded.kwargs, seed), True)
    for i, (a, k) in enumerate(list(getattr(target, "inputs", None) or [])):
        yield (f"input_{i}", tuple(a), dict(k), True)
    if keys:
        for name, a, k in edge_inputs(loaded.args, loaded.kwargs, seed, _Window(recorder, keys)):
            yield (name, a, k, True)
    for name in VARIANTS[1:]:
        yield (name, *variant(name, loaded.args, loaded.kwargs, seed), False)
    for i, (a, k) in enumerate(list(getattr(target, "perturb", None) or [])):
        yield (f"user_{i}", tuple(a), dict(k), False)
    for c in constants:
        yield (f"filled_{c:g}", *filled(c, loaded.args, loaded.kwargs), False)


def _run_original(loaded, module, keys, recorder, seed: int, constants: list):
    from graphmend.verify.modes import device_of, observer_unusable, run_call, train_unusable
    from graphmend.verify.records import compare_outcome

    plan: list[tuple[str, str]] = []  # (mode, input name), in the order they ran
    records: list[dict] = []
    inputs: dict[str, tuple] = {}
    skipped: dict[str, str] = {}
    optional = 0
    for name, a, k, required in _candidates(loaded, seed, constants, recorder, keys):
        if not required:
            # enough inputs once every condition went both ways (or there is none to watch)
            if optional >= MIN_VARIANTS - 1 and not (keys and recorder.missing(keys, reached_only=True)):
                break
            optional += 1
        inputs[name] = (a, k)
        for m in PER_INPUT + (EXAMPLE_ONLY if name == "example" else ()):
            if m in skipped or m == AUTOCAST_TRAIN and (TRAIN in skipped or AUTOCAST in skipped):
                continue
            snap = _snapshot(module)
            rec = run_call(loaded.fn, module, a, k, m, seed + len(records), _loss(loaded))
            plan.append((m, name))
            records.append(rec)

            def repeat() -> dict:
                """The same call again, from the state it started in (a counter or a cache in
                the module moved on), with the same seed; the patched side repeats it too."""
                _restore(module, snap)
                again = dict(run_call(loaded.fn, module, a, k, m, rec["seed"], _loss(loaded)), repeat=True)
                plan.append((m, name))
                records.append(again)
                return again

            if rec["status"] == "raised":
                # a message that names what a parallel kernel found first ("Target -18 is out
                # of bounds") can change from run to run; then only the type counts
                again = repeat()
                if again.get("exc") != rec["exc"]:
                    rec["exc_type_only"] = again["exc_type_only"] = True
            if name != "example":
                continue
            why = (train_unusable(rec, module, _has_float(a, k)) if m in (TRAIN, AUTOCAST_TRAIN) else
                   f"the original raises under {m}: {rec['exc'][:200]}" if rec["status"] == "raised" and m != EVAL
                   else None)
            if why and m == AUTOCAST_TRAIN:
                why = why.replace("in train mode", "in train mode under autocast")
            if why is None:
                # the same call again, same seed: a mode in which the original itself differs from
                # run to run (a seed drawn from the OS, as Reformer's train-mode dropout does)
                # cannot tell a patched program from it
                again = repeat()
                if compare_outcome(rec, again, None) is not None:
                    why = f"{NOT_DETERMINISTIC} ({compare_outcome(rec, again, None)})"
            if why:
                skipped[m] = why
    _run_observers(loaded, module, seed, inputs["example"], plan, records, skipped)
    # the casts are in place: every input once more in train mode in float64, then in
    # bfloat16, last
    from graphmend.verify.inputs import convert, prepare_callable

    import torch

    device = device_of(module, loaded.args, loaded.kwargs)
    if TRAIN not in skipped and any(m == TRAIN for m, _ in plan):
        fn = prepare_callable(loaded.fn, device, torch.float64)
        for name, (a, k) in inputs.items():
            rec = run_call(fn, module, convert(a, device, torch.float64), convert(k, device, torch.float64), F64,
                           seed + len(records), _loss(loaded))
            plan.append((F64, name))
            records.append(rec)
            why = train_unusable(rec, module, _has_float(a, k)) if name == "example" else None
            if why:
                skipped[F64] = why.replace("in train mode", "in train mode in float64")
                break
        a, k = inputs["example"]
        _observe(loaded, fn, module, convert(a, device, torch.float64), convert(k, device, torch.float64), DOUBLE,
                 seed, plan, records, skipped)
        # and on every other input, as the float64 train runs: a second derivative differs
        # only on the arm that input takes (a clamp's backward reads no operand a relu's does:
        # rewritten as torch.where, the penalty reaches a bias the original's never did)
        for name, (a, k) in inputs.items():
            if DOUBLE in skipped or name == "example":
                continue
            snap = _snapshot(module)
            rec = run_call(fn, module, convert(a, device, torch.float64), convert(k, device, torch.float64), DOUBLE,
                           seed + len(records), _loss(loaded))
            if observer_unusable(rec, DOUBLE, module, _has_float(a, k)) is None:
                plan.append((DOUBLE, name))
                records.append(rec)
            else:  # the original cannot serve on this input: not compared, its state change undone
                _restore(module, snap)
    fn = prepare_callable(loaded.fn, device, torch.bfloat16)
    for name, (a, k) in inputs.items():
        rec = run_call(fn, module, convert(a, device, torch.bfloat16), convert(k, device, torch.bfloat16), BF16,
                       seed + len(records))
        plan.append((BF16, name))
        records.append(rec)
        if name == "example" and rec["status"] == "raised":
            skipped[BF16] = f"the original raises in bfloat16: {rec['exc'][:200]}"
            break
    for rec, (_, name) in zip(records, plan):  # the patched side replays from these
        rec["input"] = name
        if "args" not in rec:  # (the resized example of the compiled run carries its own)
            rec["args"], rec["kwargs"] = inputs[name]
    return plan, records, skipped


def _run_observers(loaded, module, seed: int, example: tuple, plan: list, records: list, skipped: dict) -> None:
    """The example once in each of ``OBSERVERS`` (and repeated: a way the original itself
    differs in from run to run is skipped), then the compiled run on two shapes."""
    from graphmend.verify.modes import observer_unusable, resized, run_call

    a, k = example
    for m in OBSERVERS:
        if TRAIN in skipped and m != VMAP:  # train-mode ways of running: train+grad's entry says why
            continue
        _observe(loaded, loaded.fn, module, a, k, m, seed, plan, records, skipped)
        if m == HOOKS and skipped.get(HOOKS, "").startswith("the original raises"):
            _observe(loaded, loaded.fn, module, a, k, HOOKS_FORWARD, seed, plan, records, skipped)
    # where train mode cannot serve, the compiled program is compared in eval: a rewrite can
    # still change what the compiled program computes (a row indexed as a copy, not a view)
    compiled = COMPILED_EVAL if TRAIN in skipped else COMPILED
    # the eager original is the reference. The original compiled the same way must agree with
    # it (compiled dropout draws its own numbers, say), else the check cannot tell; that probe
    # costs two more compiles, so it runs only where a patched program's compiled run differs
    # (``probe_compiled``, from the state each call started in, kept here)
    grown = resized(a, k)
    shapes = [("example", a, k)] + ([(f"example, batch {grown[2]}", grown[0], grown[1])] if grown else [])
    for name, sa, sk in shapes:
        before = _snapshot(module)
        rec = dict(run_call(loaded.fn, module, sa, sk, compiled, seed + len(records), _loss(loaded)),
                   args=sa, kwargs=sk, before=before)
        plan.append((compiled, name))
        records.append(rec)
        if compiled not in skipped:
            why = observer_unusable(rec, compiled, module, _has_float(sa, sk))
            if why:
                skipped[compiled] = why


def probe_compiled(loaded, module, records: list, saved: str) -> tuple[Optional[str], list]:
    """Why the original under the compiled check's compile does not show what it shows in
    eager (raises, or differs on one of its calls), or None; and its compiled calls' records:
    the compiled calls of ``records`` again, each from the state it started in, compiled.
    Kept in the file ``saved`` once made: later attempts compare against them without
    compiling the original again."""
    from graphmend.verify.modes import run_call
    from graphmend.verify.records import compare_records

    import torch

    if os.path.exists(saved):
        kept = torch.load(saved, weights_only=False)
        return kept["why"], kept["probes"]
    why, probes = None, []
    compiled = _compiled(loaded.fn)
    try:
        for rec in records:
            if rec["mode"] not in COMPILED_RUNS:
                continue
            _restore(module, rec["before"])
            probe = run_call(compiled, module, rec["args"], rec["kwargs"], rec["mode"], rec["seed"], _loss(loaded))
            probes.append(probe)
            if why is not None:
                continue
            if probe["status"] == "raised" and rec["status"] != "raised":
                why = f"the original raises under torch.compile(backend={COMPILE_BACKEND!r}): {probe['exc'][:200]}"
            else:
                diff = compare_records(rec, probe, f"on input {rec['input']}", None)
                if diff is not None:
                    why = f"{COMPILED_DIFFERS} {diff}"
    finally:
        torch._dynamo.reset()
    torch.save({"why": why, "probes": _savable(probes)}, saved)
    return why, probes


def _agrees_compiled(probes: list, patched: list, tolerance) -> Optional[str]:
    """None where the patched program's compiled calls show what the original's compiled
    calls showed (the compiler's own difference from eager, made the same way by both),
    else the first difference."""
    from graphmend.verify.records import compare_records

    if len(probes) != len(patched):
        return f"{len(patched)} compiled calls, where the original made {len(probes)}"
    for want, got in zip(probes, patched):
        why = compare_records(want, got, f"against the original compiled, on input {got['input']}", tolerance)
        if why is not None:
            return why
    return None


def _observe(loaded, fn, module, a, k, m: str, seed: int, plan: list, records: list, skipped: dict) -> None:
    """The example once in mode ``m`` and, where the original can serve, once more from the
    same state (a mode it differs in from run to run is skipped)."""
    from graphmend.verify.modes import observer_unusable, run_call
    from graphmend.verify.records import compare_outcome

    snap = _snapshot(module)
    rec = run_call(fn, module, a, k, m, seed + len(records), _loss(loaded))
    plan.append((m, "example"))
    records.append(rec)
    why = observer_unusable(rec, m, module, _has_float(a, k))
    if why is None:
        _restore(module, snap)
        again = dict(run_call(fn, module, a, k, m, rec["seed"], _loss(loaded)), repeat=True)
        plan.append((m, "example"))
        records.append(again)
        diff = compare_outcome(rec, again, None)
        if diff is not None:
            why = f"{NOT_DETERMINISTIC} ({diff})"
    if why:
        skipped[m] = why


def _compiled(fn):
    """``fn`` under ``torch.compile`` (one object for both shapes: the second call recompiles)."""
    import torch

    torch._dynamo.reset()
    return torch.compile(fn, backend=_checked_backend())


def _checked_backend():
    """``COMPILE_BACKEND`` whose graphs run every custom op (not aten's or prims') against its
    fake (``_against_fake``). A fix's op with a wrong fake passes aot_eager, which never looks
    at the fake's layout, and fails under Inductor, which asserts it. The plain backend where
    this torch lacks the pieces (torch's debugging backends)."""
    import torch

    try:
        from torch._dynamo.backends.common import aot_autograd
        from torch._dynamo.backends.debugging import boxed_nop
        from torch._functorch.partitioners import min_cut_rematerialization_partition
    except ImportError:
        return COMPILE_BACKEND

    def checked(gm, example_inputs):
        for node in gm.graph.nodes:
            # the graph's own calls, not a dispatch mode: higher-order ops (torch.cond, an
            # effectful call's with_effects) run as they are, on every torch
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and \
                    node.target.namespace not in ("aten", "prims", "prim"):
                node.target = _against_fake(node.target)
        gm.recompile()
        return boxed_nop(gm, example_inputs)

    # aot_eager's own settings (torch/_dynamo/backends/debugging.py), its graphs checked
    return aot_autograd(fw_compiler=checked, bw_compiler=checked, partition_fn=min_cut_rematerialization_partition,
                        keep_inference_input_mutations=True)


def _against_fake(op):
    """``op``, which on each call also runs its fake on the same arguments and raises where a
    tensor the fake gives differs from the op's in shape, dtype or the strides of dimensions
    longer than one (what Inductor asserts of a custom op's outputs)."""
    import torch
    from torch._prims_common import check_significant_strides
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.utils import _pytree as pytree

    def run(*args, **kwargs):
        out = op(*args, **kwargs)
        try:
            with FakeTensorMode(shape_env=ShapeEnv()) as mode:
                fake_args, fake_kwargs = pytree.tree_map_only(
                    torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), (args, kwargs))
                fake = op(*fake_args, **fake_kwargs)
        except Exception:
            # a fake that runs only inside a trace (a data-dependent size torch.compile's own
            # settings must allow): Dynamo ran it there, nothing more to compare here
            return out
        for i, (real, promised) in enumerate(zip(pytree.tree_leaves(out), pytree.tree_leaves(fake))):
            if not isinstance(real, torch.Tensor):
                continue
            if not isinstance(promised, torch.Tensor):
                raise RuntimeError(f"{op}: output {i} is a tensor, where its fake gives {type(promised).__name__}")
            if real.shape != promised.shape or real.dtype != promised.dtype or \
                    not check_significant_strides(real, promised, only_cuda=False)[0]:
                raise RuntimeError(
                    f"{op}: output {i} is {tuple(real.shape)} {real.dtype} with strides {real.stride()}, where "
                    f"its fake gives {tuple(promised.shape)} {promised.dtype} with strides {promised.stride()} "
                    "(Inductor asserts the fake's)")
        return out

    run.__name__ = f"checked_{op.name().replace('::', '_').replace('.', '_')}"
    return run


def _run_patched(loaded, module, state, seed: int, tolerance, result: dict, spec: dict, retrace: bool,
                 run_mode: str, calls: int = 1, state_path: str = "") -> list[str]:
    from graphmend.verify.inputs import convert, prepare_callable
    from graphmend.verify.modes import device_of, run_call
    from graphmend.verify.records import compare_records

    import torch

    # the modes run last, with the module cast in place
    casts = {F64: torch.float64, DOUBLE: torch.float64, BF16: torch.bfloat16}
    skipped = state.get("skipped") or {}
    mismatches: list[str] = []
    # train-mode differences small enough to be float32 rounding (input -> why), and the
    # (mode, input) calls that differed outright
    rounding: dict[str, str] = {}
    failed: set[tuple[str, str]] = set()
    fn = loaded.fn
    snap = None
    compiled = None  # the patched program under torch.compile, made at its first record
    compiled_calls: list[dict] = []  # its records, for the original's compiled ones where eager's differ
    for i, want in enumerate(state["records"]):
        m, name = want["mode"], want["input"]
        a, k = want["args"], want["kwargs"]
        if m in casts:
            device = device_of(module, loaded.args, loaded.kwargs)
            fn = prepare_callable(loaded.fn, device, casts[m])
            a, k = convert(a, device, casts[m]), convert(k, device, casts[m])
        if want.get("repeat"):
            _restore(module, snap)  # as the original did: from where the first of these calls started
        else:
            snap = _snapshot(module)
        # (a compiled run the original cannot serve runs eagerly: only its state change counts)
        if m in COMPILED_RUNS and m not in skipped and compiled is None:
            compiled = _compiled(loaded.fn)
        got = run_call(compiled if m in COMPILED_RUNS and m not in skipped else fn, module, a, k, m, want["seed"],
                       _loss(loaded))
        if m in skipped:
            continue
        if m in COMPILED_RUNS:
            compiled_calls.append(dict(got, input=name))
        where = f"{CHECK_NAMES[m]} on input {name}"
        why = compare_records(want, got, where, tolerance)
        if why and m in COMPILED_RUNS:
            # the parent asks the original's compiled probe whether this check can tell; the
            # calls after this one start where the original's did: it again, eagerly
            result["compiled_differs"] = True
            _restore(module, snap)
            run_call(loaded.fn, module, a, k, m, want["seed"], _loss(loaded))
        if why and m in ROUNDING_MODES and F64 not in skipped and compare_records(want, got, where, tolerance,
                                                                                 True) is None:
            # within the rounding of the tensor's scale: the float64 run of this input decides
            # (of the example for the compiled run's larger batch: the example and one row again)
            rounding.setdefault("example" if m == COMPILED else name, why)
        elif why:
            failed.add((m, name))
            if why not in mismatches:
                mismatches.append(why)
    if compiled is not None:
        torch._dynamo.reset()
    if result.get("compiled_differs"):
        # where the original compiled differs from its eager self too, the parent compares these
        # with the original's compiled calls (``probe_compiled``)
        fd, result["compiled_calls"] = tempfile.mkstemp(prefix="compiled-", suffix=".pt",
                                                        dir=os.path.dirname(state_path))
        with os.fdopen(fd, "wb") as f:
            torch.save(_savable(compiled_calls), f)
    if retrace:
        result["capture"] = _retrace(spec, seed, run_mode, calls)
    ran64 = {name for m, name in state["plan"] if m == F64}
    accepted = {name: why for name, why in rounding.items() if name in ran64 and (F64, name) not in failed}
    if accepted:  # one line for the target: the first such difference, and how many inputs showed one
        more = f" (and on {len(accepted) - 1} more input{'s' * (len(accepted) > 2)})" if len(accepted) > 1 else ""
        result["rounding"] = [f"{next(iter(accepted.values()))} in float32{more}, within rounding at the tensor's scale; "
                              "equal in float64"]
    for name, why in rounding.items():
        if name not in accepted:
            mismatches.append(f"{why}; in float64 too" if name in ran64 else why)
    return mismatches


def _loss(loaded):
    return getattr(loaded.target, "loss", None)


def _has_float(a, k) -> bool:
    from graphmend.verify.inputs import tensors

    return any(t.is_floating_point() for t in tensors((a, k)))


def _probe_dtype(loaded, dtype_name: str):
    """None when the target traces under Dynamo with its module and float inputs cast to
    ``dtype_name`` (in place: this is the worker's last use of them), else why not."""
    import torch

    from graphmend.verify.inputs import convert, prepare_callable

    dtype = getattr(torch, dtype_name)
    fn = prepare_callable(loaded.fn, "cpu", dtype)
    args, kwargs = convert(loaded.args, "cpu", dtype), convert(loaded.kwargs, "cpu", dtype)
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch._dynamo.explain(fn)(*args, **kwargs)
    except Exception as exc:
        text = str(exc).strip()
        # Dynamo's first line is generic ("RuntimeError when making fake tensor call"); the
        # operator's own complaint is quoted further down as got RuntimeError("...")
        inner = re.search(r'got \w+\("(.+?)"\)', text)
        head = text.splitlines()[0][:200] if text else ""
        return f"{type(exc).__name__}: {head}" + (f": {inner.group(1)[:300]}" if inner else "")
    finally:
        torch._dynamo.reset()
    return None


def _retrace(spec: dict, seed: int, run_mode: str, calls: int = 1) -> dict:
    """Breaks of the patched program in ``run_mode``, as the tracer records them, on the
    target loaded afresh (seeded as the compared side was), as a user's first compiled call
    meets it. Not on the module the compared calls ran on: they leave state its state_dict
    does not hold (torchvision's ``MultiScaleRoIAlign`` keeps the scales its first call
    worked out in a plain attribute, so a module called once never runs the code a fix there
    rewrote, and its breaks seemed gone). ``calls``: as many as the capture made (the later ones
    of other sizes), so that the recompiles compare too."""
    import torch

    from graphmend.core.serial import to_dict
    from graphmend.core.targets import TargetError, load_target
    from tracer.worker import capture_loaded, later_calls

    torch.manual_seed(seed)
    try:
        fresh = load_target(spec)
        more, derived, fallback = later_calls(fresh, calls, spec["name"])
    except TargetError as exc:
        return {"error": f"loading the target again: {exc}"}
    res = capture_loaded(spec["name"], spec.get("file") or spec.get("module") or "", spec["function"],
                         fresh.fn, fresh.args, fresh.kwargs, mode=run_mode, loss=_loss(fresh), calls=more,
                         derived=derived, fallback=fallback)
    return to_dict(res)


_GENERATORS = "\0generators"  # a snapshot's key for the module's generators' states
_PLAIN = "\0plain"  # ... and for the numbers and tensors its modules hold as plain attributes


def _plain_state(module) -> dict:
    """{(submodule name, attribute): value} of what each submodule holds as a plain attribute
    that a call may change and ``state_dict`` leaves out: a Python number (a step counter), a
    tensor outside the parameters and buffers (a counter held in a 0-d tensor, a cache)."""
    import torch

    out = {}
    for qual, m in module.named_modules(remove_duplicate=False):
        for k, v in vars(m).items():
            if isinstance(v, (bool, int, float)):
                out[(qual, k)] = v
            elif isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                try:
                    out[(qual, k)] = (v, v.detach().clone())  # the tensor itself, and its values then
                except RuntimeError:  # a vmap wrapper a call left there (its values are not readable): as it is
                    out[(qual, k)] = v
    return out


def _savable(records: list) -> list:
    """``records`` without the torch.func wrappers a call under a transform left on a module as
    a plain attribute (Qwen3-VL's ``rope_deltas``), which a state file cannot hold. The snapshots
    this process restores from keep them; the saved records (the compiled probe's starting
    points) lose only these entries, caches the next forward sets again."""
    from graphmend.verify.modes import storage_of

    def kept(v) -> bool:
        return all(not hasattr(t, "untyped_storage") or storage_of(t) is not None
                   for t in (v if isinstance(v, tuple) else (v,)))

    for rec in records:
        plain = (rec.get("before") or {}).get(_PLAIN)
        if plain:
            rec["before"][_PLAIN] = {k: v for k, v in plain.items() if kept(v)}
    return records


def _snapshot(module):
    from graphmend.verify.modes import module_generators

    if module is None:
        return None
    snap = {k: v.detach().clone() for k, v in module.state_dict().items()}
    snap[_GENERATORS] = {k: g.get_state() for k, g in module_generators(module).items()}
    snap[_PLAIN] = _plain_state(module)
    return snap


def _restore(module, snap) -> None:
    import torch

    from graphmend.verify.modes import module_generators

    if module is not None and snap is not None:
        with torch.no_grad():
            for k, v in module.state_dict().items():  # in place: the module's own tensors keep their identity
                if k in snap:
                    v.copy_(snap[k])
        for k, g in module_generators(module).items():
            if k in snap.get(_GENERATORS, {}):
                g.set_state(snap[_GENERATORS][k])
        # each attribute bound again to what it held, a tensor with its values then (the same
        # tensor: another attribute or the caller may hold it too)
        modules = dict(module.named_modules(remove_duplicate=False))
        for (qual, k), v in snap.get(_PLAIN, {}).items():
            if qual not in modules:
                continue
            if isinstance(v, tuple):
                held, values = v
                try:
                    if held.shape != values.shape:
                        raise RuntimeError("resized in place")
                    with torch.no_grad():
                        held.copy_(values)
                except RuntimeError:  # resized, or an inference tensor: a copy of the values instead
                    try:
                        held = values.clone()
                    except RuntimeError:  # a torch.func wrapper a transform left: bound again as it was
                        pass
                v = held
            vars(modules[qual])[k] = v


def _startup() -> None:
    import torch  # noqa: F401  (start-up, not counted against --timeout)


if __name__ == "__main__":
    worker_main(reading(handle), startup=_startup)  # what the runs read keys the verdict
