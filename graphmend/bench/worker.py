"""One bench arm in one process: ``python -m graphmend.bench.worker PAYLOAD RESULT``.

The parent gives every arm a fresh ``TORCHINDUCTOR_CACHE_DIR`` / ``TRITON_CACHE_DIR``, so
nothing compiled by one arm (or an earlier run) is reused here. The eager arm saves its
outputs with ``torch.save``; every other arm compares its own outputs to them.
"""

from __future__ import annotations

import os
import time
from typing import Any

from graphmend.core.worker import worker_main
from graphmend.core.modes import EVAL, TRAIN

COMPILED_ARMS = ("original", "mended", "reference")
OPTIMIZERS = ("sgd", "adamw")


def _seed(seed: int) -> None:
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass


def _fresh_compile_config():
    """Inductor's in-process FX-graph and AOTAutograd caches off, so that every graph is
    really compiled (a cold start that is cold, a kernel count that counts each graph's
    kernels) even when a model repeats identical blocks. Nothing Inductor generates changes."""
    import contextlib

    import torch

    stack = contextlib.ExitStack()
    inductor_config = getattr(torch._inductor, "config", None)
    if inductor_config is not None:
        patch = {k: False for k in ("fx_graph_cache", "autotune_local_cache") if hasattr(inductor_config, k)}
        if patch:
            stack.enter_context(inductor_config.patch(patch))
    try:
        import torch._functorch.config as functorch_config

        if hasattr(functorch_config, "enable_autograd_cache"):
            stack.enter_context(functorch_config.patch(enable_autograd_cache=False))
    except ImportError:
        pass
    return stack


def _step(fn: Any, run_mode: str, loss_fn: Any, optimizer: str):
    """``(step, optimizer)``: ``step(callable, args, kwargs, keep=False)`` runs one call
    (eval) or one training step (forward, backward of the training loss, an optimizer step)
    and, with ``keep``, returns what the arms compare: the outputs, and in train mode the
    loss and every parameter's gradient. ``(None, why)`` when there is nothing to train."""
    import torch

    from graphmend.core.modes import cannot_backward, modules_of, training_loss
    from graphmend.verify.compare import to_plain

    if run_mode != TRAIN:
        def call(compiled, args, kwargs, keep=False):
            out = compiled(*args, **kwargs)
            return to_plain(out) if keep else None

        return call, None
    named = [(n, p) for m in modules_of(fn) for n, p in m.named_parameters() if p.requires_grad]
    if not named:
        return None, cannot_backward(fn, loss_fn)
    params = [p for _, p in named]
    opt = torch.optim.AdamW(params, lr=1e-3) if optimizer == "adamw" else torch.optim.SGD(params, lr=1e-3)

    def train_step(compiled, args, kwargs, keep=False):
        opt.zero_grad(set_to_none=True)
        out = compiled(*args, **kwargs)
        loss = training_loss(out, loss_fn)
        if loss is None:
            raise RuntimeError(cannot_backward(fn, loss_fn))
        loss.backward()
        kept = None
        if keep:  # before the step: the gradients of the weights every arm starts from
            kept = {"loss": to_plain(loss), "outputs": to_plain(out),
                    "grads": {n: to_plain(p.grad) for n, p in named}}
        opt.step()
        return kept

    return train_step, optimizer


def _train_rng(run_mode: str):
    """Train mode: Inductor draws random numbers (dropout) as eager does, so the first step's
    loss and gradients can be compared with the eager arm's; eval needs nothing."""
    import contextlib

    import torch

    config = getattr(torch._inductor, "config", None)
    if run_mode != TRAIN or config is None or not hasattr(config, "fallback_random"):
        return contextlib.nullcontext()
    return config.patch(fallback_random=True)


def run_arm(payload: dict[str, Any]) -> dict[str, Any]:
    arm = payload["arm"]
    if payload.get("patches"):
        # The overlay must be in place before the target's module is first imported.
        from graphmend.core.overlay import install_overlay

        install_overlay(payload["patches"])

    import torch
    import torch._inductor  # noqa: F401  (config and metrics live here)

    from graphmend.bench import measure
    from graphmend.bench.stats import iqr, median
    from graphmend.core.modes import run_mode as in_mode
    from graphmend.core.targets import load_target
    from graphmend.verify.compare import COMPILED_TOLERANCES, compare
    from graphmend.verify.inputs import convert, prepare_callable

    device, mode, dtype_name = payload["device"], payload["mode"], payload["dtype"]
    runs, warmup = int(payload["runs"]), int(payload["warmup"])
    seed = int(payload.get("seed", 0))
    dtype = measure.DTYPES[dtype_name]

    spec = dict(payload["spec"])
    if payload.get("function"):
        spec["function"] = payload["function"]
        spec["name"] = f"{spec['name'].rpartition('::')[0]}::{payload['function']}"
    _seed(seed)  # the same weights in every arm's process
    loaded = load_target(spec)
    fn = prepare_callable(loaded.fn, device, dtype)
    args = convert(loaded.args, device, dtype)
    kwargs = convert(loaded.kwargs, device, dtype)

    result: dict[str, Any] = {"arm": arm, "backend": None, "graph_count": None, "break_count": None,
                              "kernel_count": None, "memory": None}
    run_mode = payload.get("run_mode") or EVAL
    loss_fn = getattr(loaded.target, "loss", None)
    step, optimizer = _step(fn, run_mode, loss_fn, payload.get("optimizer") or "sgd")
    if step is None:
        return {**result, "error": f"{spec['name']}: {optimizer}"}
    compiled = fn
    with _fresh_compile_config(), in_mode(fn, run_mode), _train_rng(run_mode):
        if arm in COMPILED_ARMS:
            torch._dynamo.reset()
            measure.reset_counts()
            backend, graphs = measure.counting_inductor(mode)
            compiled = torch.compile(fn, backend=backend) if not isinstance(backend, str) else \
                torch.compile(fn, backend="inductor", mode=None if mode == "default" else mode)
            result["backend"] = measure.backend_name(device)
        mem = measure.PeakMemory(device)
        mem.start()
        _seed(seed)
        measure.synchronize(device)
        t0 = time.perf_counter()
        try:
            first = step(compiled, args, kwargs, keep=True)
        except Exception as exc:
            failure = _lowering_failure(exc) if arm in COMPILED_ARMS else None
            if failure is None:
                raise
            return {**result, "error": failure[0], "lowering": failure[1]}
        measure.synchronize(device)
        result["cold_s"] = time.perf_counter() - t0
        for _ in range(warmup):
            step(compiled, args, kwargs)
        measure.synchronize(device)
        mem.steady()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            step(compiled, args, kwargs)
            measure.synchronize(device)
            times.append((time.perf_counter() - t0) * 1000.0)
        result["peak_mem_mb"] = mem.peak_mb()
        result["memory"] = mem.kind
        if arm in COMPILED_ARMS:
            # read before explain re-traces; recompiles during warm-up are included
            result["graph_count"] = len(graphs) if not isinstance(backend, str) else measure.unique_graphs()
            result["kernel_count"] = measure.kernel_count()
            result["break_count"] = measure.explain_breaks(fn, args, kwargs)
    result["median_ms"], result["iqr_ms"], result["runs"] = median(times), iqr(times), len(times)

    outputs = payload["eager_outputs"]
    if arm == "eager":
        torch.save(first, outputs)
        result["outputs_match"] = True  # the yardstick itself
    elif not os.path.exists(outputs):
        result["outputs_match"] = None  # no eager arm ran (not asked for, or failed): nothing to compare with
    else:
        expected = torch.load(outputs, weights_only=False)
        why = compare(expected, first, "output", getattr(loaded.target, "tolerance", None),
                      defaults=COMPILED_TOLERANCES, precision=dtype_name, sides=("eager", arm))
        result["outputs_match"] = why is None
        if why:
            result["mismatch"] = why
    return result


def _lowering_failure(exc: BaseException):
    """``(one line, LoweringFailure as dict)`` when ``exc`` is Inductor's failing to compile a
    graph (the lowering check's finding, GM608: the op, the user's line, the reason); None for
    any other error. Inductor's IR dump, the rest of its message, is left out."""
    import torch._dynamo.exc

    if not isinstance(exc, torch._dynamo.exc.BackendCompilerFailed):
        return None
    from graphmend.core.serial import to_dict
    from tracer.lowering import describe, one_line
    from tracer.recorder import _torch_dir, is_user_file

    torch_dir = _torch_dir()
    failure = describe(exc, None, lambda f: is_user_file(f, torch_dir))
    where = os.path.relpath(failure.file) if failure.file and failure.file.startswith(os.getcwd() + os.sep) else ""
    return f"{one_line(failure, where)} ({failure.rule})", to_dict(failure)


def _startup() -> None:
    import torch  # noqa: F401  (start-up, not counted against --timeout)


if __name__ == "__main__":
    worker_main(run_arm, startup=_startup)
