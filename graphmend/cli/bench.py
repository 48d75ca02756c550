"""``mend bench PATH-or-TARGET...``: eager vs compiled-original vs compiled-mended (vs the
hand-fixed reference), each arm in its own worker with its own Inductor cache."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from graphmend.cli.common import (EXIT_CLEAN, EXIT_FINDINGS, Executor, MEMORY_LIMIT_HELP, RAY_ADDRESS_HELP,
                                  check_paths, executor_choice, executor_scope, fail, load_checked_config, memory_limit_flag,
                                  progress_hook, render_or_fail, require_torch, run_modes_flag, say)


class BenchFormat(str, Enum):
    text = "text"
    json = "json"
    md = "md"
    html = "html"


class Device(str, Enum):
    cpu = "cpu"
    cuda = "cuda"


class Mode(str, Enum):
    default = "default"
    reduce_overhead = "reduce-overhead"
    max_autotune = "max-autotune"


class Optimizer(str, Enum):
    sgd = "sgd"
    adamw = "adamw"


class DType(str, Enum):
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


def bench(
    targets: List[str] = typer.Argument(..., help="Files or folders (every mend_target found), or "
                                                  "path/file.py::mend_target_x for one target."),
    device: Device = typer.Option(Device.cpu, "--device", help="Where the arms run: Inductor to C++/OpenMP "
                                                               "on cpu, to Triton on cuda."),
    mode: Mode = typer.Option(Mode.default, "--mode", help="torch.compile mode of the compiled arms."),
    dtype: DType = typer.Option(DType.float32, "--dtype", help="Cast the model and floating inputs to this dtype."),
    runs: int = typer.Option(20, "--runs", min=1, help="Timed calls per arm (after warm-up)."),
    warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed calls per arm after the first (cold) call."),
    arms: str = typer.Option("eager,original,mended,reference", "--arms",
                             help="Arms to run, comma-separated: eager,original,mended,reference."),
    format: BenchFormat = typer.Option(BenchFormat.text, "--format", "-f", help="Output format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1,
                                            help="Seconds per arm (default 300, or [tool.mend] timeout)."),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help=MEMORY_LIMIT_HELP),
    executor: Optional[Executor] = typer.Option(None, "--executor", help="Where the arms run: local (worker "
                                                "processes of this one) or ray (each arm a Ray task, one at a "
                                                "time); default local, or [tool.mend] executor."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP.replace("-j CPUs", "1 CPU")),
    keep_cache: bool = typer.Option(False, "--keep-cache", help="Keep each arm's Inductor cache directory."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="The mended arm also takes mend fix's unsafe "
                                      "(cost-changing) fixes, e.g. GM501/GM502 dense expert dispatch."),
    train: bool = typer.Option(False, "--train", help="Time a training step (forward, backward of the loss, an "
                               "optimizer step) instead of an inference call; the mended arm takes the fixes "
                               "mend fix --train verifies ([tool.mend] train)."),
    optimizer: Optimizer = typer.Option(Optimizer.sgd, "--optimizer", help="The training step's optimizer (--train)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Measure what mending buys: cold start, steady state, graphs, breaks, kernels, memory per arm."""
    from graphmend.bench.arms import parse_arms
    try:
        chosen = parse_arms(arms)
    except ValueError as exc:
        raise fail(str(exc))
    files = [t.rpartition("::")[0] if "::" in t else t for t in targets]
    check_paths([Path(f) for f in files])
    memory = memory_limit_flag(memory_limit)
    config = load_checked_config(files, modes=run_modes_flag(train, None), memory_limit=memory)
    if len(config.modes) != 1:
        raise fail(f"mend bench times one run mode, not {','.join(config.modes)}: pass --train, or none for eval")
    tv = require_torch("bench")
    where, address = executor_choice(config, executor, ray_address)
    if device is Device.cuda and not _cuda_available():
        raise fail("--device cuda: no CUDA device is available to this torch (torch.cuda.is_available() is False)")

    from graphmend.bench.stage import BenchOptions, bench as run_bench, failed, regressed

    options = BenchOptions(device=device.value, mode=mode.value, dtype=dtype.value, runs=runs, warmup=warmup,
                           timeout=timeout, arms=chosen, keep_cache=keep_cache, unsafe_fixes=unsafe_fixes,
                           run_mode=config.modes[0], optimizer=optimizer.value)
    # the arms run one after another (timings must not share the machine): one task at a time
    with executor_scope(where, address, 1), progress_hook(quiet) as progress:
        report = run_bench(targets, config, options, progress=progress, torch_version=tv)
    render_or_fail(report, format.value, output)
    if not report.bench and report.errors:
        raise typer.Exit(EXIT_FINDINGS)
    slower = regressed(report)
    if slower and not quiet:
        for x in slower:
            say(f"mend: {x.target}: the mended arm is slower than the original beyond noise "
                f"({x.value:.2f}x, {x.mode} mode): mend fix --bench reports its fixes as regresses")
    raise typer.Exit(EXIT_FINDINGS if failed(report) or slower else EXIT_CLEAN)


def _cuda_available() -> bool:
    import torch  # bench runs models anyway; only this command pays the import

    return bool(torch.cuda.is_available())
