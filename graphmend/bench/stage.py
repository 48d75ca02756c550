"""The bench stage: every arm of every target in its own worker, then ratios. Returns a
Report (command "bench"); prints nothing."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from graphmend.bench.arms import ARMS, BenchItem, PatchSource, resolve
from graphmend.bench.stats import ratio, slower, unstable, unstable_reason
from graphmend.core.config import Config
from graphmend.core.jobs import Job, JobOutcome, run_job
from graphmend.core.model import BenchRatio, BenchRow, LoweringFailure, Report, new_report
from graphmend.core.serial import from_dict
from graphmend.core.sources import report_root

WORKER = "graphmend.bench.worker"
# numerator arm, denominator arm: medians (steady state); "(cold)" compares cold starts
RATIOS = (("original", "eager"), ("mended", "original"), ("mended", "reference"), ("reference", "original"))
COLD_RATIOS = (("mended", "original"),)


@dataclass
class BenchOptions:
    device: str = "cpu"
    mode: str = "default"
    dtype: str = "float32"
    runs: int = 20
    warmup: int = 3
    timeout: Optional[float] = None  # seconds per arm; None: config.timeout
    arms: Sequence[str] = field(default_factory=lambda: list(ARMS))
    keep_cache: bool = False
    seed: int = 0
    unsafe_fixes: bool = False  # the mended arm takes mend fix's cost-changing fixes too
    run_mode: str = "eval"  # "train": each timed call is a training step (forward, backward, optimizer)
    optimizer: str = "sgd"  # train mode: "sgd" | "adamw"


ProgressHook = Callable[[str, int], Callable[..., None]]  # as graphmend.pipeline.ProgressHook


def bench(refs: Sequence[str], config: Config, options: BenchOptions,
          progress: Optional[ProgressHook] = None, torch_version: Optional[str] = None) -> Report:
    root = report_root([r.partition("::")[0] for r in refs], config.project_root)
    report = new_report("bench", root=root, torch_version=torch_version)
    report.run_modes = [options.run_mode]
    items, errors = resolve(refs, config)
    report.errors.extend(errors)
    arms = [a for a in ARMS if a in options.arms]
    timeout = options.timeout or config.timeout
    patch_source = PatchSource(config, timeout, options.unsafe_fixes) if "mended" in arms else None
    planned = [(item, arm) for item in items for arm in arms if arm != "reference" or item.reference]
    advance = progress("benchmarking", len(planned)) if progress and planned else None
    cache_root = Path(tempfile.mkdtemp(prefix="mend-bench-"))
    try:
        for index, item in enumerate(items):
            rows = bench_item(index, item, arms, options, config, timeout, cache_root,
                               patch_source, advance)
            report.bench.extend(rows)
            report.ratios.extend(ratios_for(item.spec.name, rows, options))
    finally:
        if not options.keep_cache:
            shutil.rmtree(cache_root, ignore_errors=True)
    return report


def bench_item(index: int, item: BenchItem, arms: Sequence[str], options: BenchOptions, config: Config,
                timeout: float, cache_root: Path, patch_source: Optional[PatchSource],
                advance: Optional[Callable[[str], None]], compiled: Optional[dict[str, Path]] = None) -> list[BenchRow]:
    """One run of ``arms`` of ``item``, each arm in a process of its own. ``compiled``: each
    arm's Inductor/Triton cache by arm, kept from one call to the next (the cost gate's runs of
    an arm load the kernels its first run compiled; it times warm calls, never cold start)."""
    spec = item.spec
    work = Path(tempfile.mkdtemp(prefix=f"{index:03d}-work-", dir=cache_root))
    eager_outputs = work / "eager_outputs.pt"
    rows = []
    for arm in arms:
        if arm == "reference" and not item.reference:
            continue
        row = BenchRow(target=spec.name, arm=arm, device=options.device, mode=options.mode, dtype=options.dtype,
                       run_mode=options.run_mode, optimizer=options.optimizer if options.run_mode == "train" else None)
        patches = None
        if arm == "mended":
            patches, why = patch_source.patches_for(item) if patch_source else (None, "mended arm not requested")
            if patches is None:
                row.error, row.skipped = why, True
                rows.append(row)
                if advance:
                    advance(f"{spec.name} [{arm}]")
                continue
        # a fresh Inductor/Triton cache per arm: cold starts are cold, artefacts never shared
        cache = compiled.get(arm) if compiled is not None else None
        if cache is None:
            cache = Path(tempfile.mkdtemp(prefix=f"{index:03d}-{arm}-", dir=cache_root))
            if compiled is not None:
                compiled[arm] = cache
        row.cache_dir = str(cache)
        payload = {
            "arm": arm, "spec": {"name": spec.name, "function": spec.function, "file": spec.file,
                                 "module": spec.module},
            "function": item.reference if arm == "reference" else None,
            "device": options.device, "mode": options.mode, "dtype": options.dtype,
            "runs": options.runs, "warmup": options.warmup, "seed": options.seed,
            "eager_outputs": str(eager_outputs), "patches": patches,
            "run_mode": options.run_mode, "optimizer": options.optimizer,
        }
        env = {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}
        outcome = run_job(Job(module=WORKER, payload=payload, label=f"{spec.name} [{arm}]",
                              timeout=timeout, env=env, memory_limit=config.memory_limit))
        fill_row(row, outcome)
        rows.append(row)
        if advance:
            advance(f"{spec.name} [{arm}]")
    return rows


def fill_row(row: BenchRow, outcome: JobOutcome) -> None:
    label = f"{row.target} [{row.arm}]"
    if outcome.error:
        row.error = outcome.error
        return
    result = outcome.result or {}
    if result.get("error"):
        message = str(result["error"])
        row.error = message if row.target in message else f"{label}: {message}"
        if result.get("lowering"):  # a compiled arm Inductor could not build: the lowering check's finding
            row.lowering = from_dict(LoweringFailure, result["lowering"])
        return
    for name in ("cold_s", "median_ms", "iqr_ms", "graph_count", "break_count", "kernel_count", "backend",
                 "peak_mem_mb", "outputs_match", "runs", "memory", "mismatch"):
        if name in result and result[name] is not None:
            setattr(row, name, result[name])
    row.unstable = unstable(row.median_ms, row.iqr_ms)
    row.unstable_why = unstable_reason(row.median_ms, row.iqr_ms)


def ratios_for(target: str, rows: Sequence[BenchRow], options: BenchOptions) -> list[BenchRatio]:
    """Steady-state ratios of medians within this run (and the cold-start ones); None
    when an arm is missing or failed."""
    ok = {r.arm: r for r in rows if not r.error}
    present = {r.arm for r in rows}
    out = []
    for num, den in RATIOS:
        if num in present and den in present:
            value = ratio(getattr(ok.get(num), "median_ms", None), getattr(ok.get(den), "median_ms", None))
            shaky = value is not None and (ok[num].unstable or ok[den].unstable)
            worse = (num, den) == ("mended", "original") and value is not None and bool(slower(
                ok[num].median_ms, ok[num].iqr_ms, ok[den].median_ms, ok[den].iqr_ms))
            out.append(BenchRatio(target=target, name=f"{num}/{den}", value=value, mode=options.mode,
                                  device=options.device, run_mode=options.run_mode, unstable=shaky, slower=worse))
    for num, den in COLD_RATIOS:
        if num in present and den in present:
            value = ratio(getattr(ok.get(num), "cold_s", None), getattr(ok.get(den), "cold_s", None))
            out.append(BenchRatio(target=target, name=f"{num}/{den} (cold)", value=value,
                                  mode=options.mode, device=options.device, run_mode=options.run_mode))
    return out


def regressed(report: Report) -> list[BenchRatio]:
    """The targets whose mended arm measured slower than their original beyond noise: a
    regression mend reports and never applies silently (``mend fix --bench``)."""
    return [x for x in report.ratios if x.slower]


def failed(report: Report) -> bool:
    """An arm that errored or whose outputs differ from eager's (skipped arms do not count)."""
    return any((r.error and not r.skipped) or r.outputs_match is False for r in report.bench)
