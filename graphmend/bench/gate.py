"""The cost gate of ``mend fix --bench``: each target whose fixes passed verification is
timed compiled as it is and compiled with those fixes, in every torch.compile mode asked,
each arm in its own worker with its own Inductor cache (the bench protocol of
``graphmend.bench.stage``). A mended program whose median is slower than the original's
beyond noise (:func:`graphmend.bench.stats.slower`) makes its target's fixes ``regresses``
(``graphmend.fixing``): reported with these numbers, written only with ``--allow-slower``.

Arms run one after another, never beside verification or each other: a timing taken on a
busy machine is no timing. Each arm runs twice, in alternate order, each time in a process
of its own: a verdict must hold in both runs and beyond how far an arm's median moved
between its processes (on a GPU that move can exceed its spread within one: a sub-millisecond
target measured 0.81, 1.40 and 1.21 ms in three calls). ``slower``, the verdict that keeps a
fix from being written, must hold in a third run too: on a GPU shared with other work, one
of three separate gate calls found Conformer's fix slower (1.13) in both its runs where the
other two, and the bench alone, found it not (0.95, 0.94). Unstable timings or runs that
disagree leave the verdict ``untold``: the gate says it could not tell, and keeps the fix as
verified.

A decided verdict (slower or not) is kept in mend's cache (``graphmend.core.cache``) under
what it measured: the target's verification key (its files, the sites, the installed
packages, mend's code), the patches, the gate's options and the machine (host, CPU count,
GPU). A second ``mend fix --bench`` with nothing changed reuses it, as it reuses the
behaviour verdicts; an ``untold`` check is measured again.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

from graphmend.bench.arms import BenchItem
from graphmend.bench.stage import BenchOptions, ProgressHook, bench_item
from graphmend.bench.stats import ratio, slower
from graphmend.core.cache import Cache
from graphmend.core.jobs import TRANSIENT
from graphmend.core.config import Config
from graphmend.core.discovery import TargetSpec
from graphmend.core.model import FAILS, NOT_SLOWER, SLOWER, UNTOLD, BenchRow, CostCheck
from graphmend.core.serial import from_dict, to_dict

ARMS = ("original", "mended")


@dataclass
class GateOptions:
    modes: Sequence[str] = ("default",)  # torch.compile modes, each measured on its own
    device: str = "cpu"
    runs: int = 20
    warmup: int = 3
    run_mode: str = "eval"  # "train": a timed call is a training step
    timeout: Optional[float] = None  # seconds per arm; None: config.timeout
    cache: bool = True  # reuse a decided verdict measured before (--no-cache: measure again)


class _Given:
    """The mended arm's patches: the ones mend fix is about to write (bench.stage's
    PatchSource would run mend fix again)."""

    def __init__(self, patches: dict[str, str]) -> None:
        self.patches = patches

    def patches_for(self, item: BenchItem) -> tuple[Optional[dict[str, str]], str]:
        return self.patches, ""


Item = tuple[TargetSpec, dict[str, str], Optional[str]]  # target, its patches, what its verdict is keyed by


def cost_gate(config: Config, options: GateOptions,
              progress: Optional[ProgressHook] = None) -> Callable[[Sequence[Item]], list[list[CostCheck]]]:
    """The measuring function ``graphmend.fixing.run_fix`` calls with (target, patches,
    verification key) once verification is over; it returns each target's checks, one per
    mode. A key of None: nothing kept, always measured."""
    kept = Cache.for_run(options.cache)

    def measure(items: Sequence[Item]) -> list[list[CostCheck]]:
        timeout = options.timeout or config.timeout
        machine = _machine(options.device) if kept.enabled else None
        keys = [[_key(kept, key, patches, options, mode, machine) if key and machine else None
                 for mode in options.modes] for _, patches, key in items]
        found = [[_found(kept, k) for k in ks] for ks in keys]
        planned = sum(c is None for cs in found for c in cs) * 2 * len(ARMS)  # two runs of each arm
        advance = progress("benchmarking", planned) if progress and planned else None
        cache_root = Path(tempfile.mkdtemp(prefix="mend-gate-"))
        out: list[list[CostCheck]] = []
        try:
            for index, (spec, patches, _) in enumerate(items):
                checks = []
                for mode, key, check in zip(options.modes, keys[index], found[index]):
                    if check is None:
                        check = _measure(index, spec, patches, mode, options, config, timeout, cache_root, advance)
                        if key and check.verdict != UNTOLD:
                            kept.put("cost", key, to_dict(check))
                    checks.append(check)
                out.append(checks)
        finally:
            shutil.rmtree(cache_root, ignore_errors=True)
        return out

    return measure


def _measure(index: int, spec: TargetSpec, patches: dict[str, str], mode: str, options: GateOptions,
             config: Config, timeout: float, cache_root: Path, advance) -> CostCheck:
    bench = BenchOptions(device=options.device, mode=mode, runs=options.runs, warmup=options.warmup,
                         timeout=timeout, arms=list(ARMS), run_mode=options.run_mode)

    compiled: dict[str, Path] = {}  # an arm's second and third runs load what its first compiled

    def run(order, tick=advance) -> list[BenchRow]:
        return bench_item(index, BenchItem(spec), order, bench, config, timeout, cache_root, _Given(patches), tick,
                          compiled)

    # twice, the second time mended first: an arm's median moves between processes (a GPU's
    # clocks, where its memory landed) by more than its spread within one
    runs = [run(ARMS), run(ARMS[::-1])]
    check = judge_runs(spec.name, runs, bench)
    if check.verdict == SLOWER:  # what blocks a fix holds in a third run, or is not told
        # (off the progress bar, whose total counts two runs: a third is seldom taken)
        check = judge_runs(spec.name, [*runs, run(ARMS, tick=None)], bench)
    return check


def judge_runs(target: str, runs: Sequence[Sequence[BenchRow]], options: BenchOptions) -> CostCheck:
    """One mode's verdict from two or more runs of both arms, each arm in a process of its
    own each time: decided only where every run decides it alike, and a ``slower`` only where
    it holds with each arm's move between its processes counted as noise; else ``untold``."""
    checks = [judge(target, rows, options) for rows in runs]
    for c in checks:
        if c.verdict == FAILS:
            return c
    undecided = [c for c in checks if c.verdict == UNTOLD]
    if undecided:
        return undecided[0]
    first = checks[0]
    if any(c.original_ms is None for c in checks):  # the original fails in this mode: nothing to be slower than
        return first
    originals, mendeds = [c.original_ms for c in checks], [c.mended_ms for c in checks]
    check = replace(first, original_ms=sum(originals) / len(checks), mended_ms=sum(mendeds) / len(checks),
                    original_iqr_ms=max([c.original_iqr_ms for c in checks] + [max(originals) - min(originals)]),
                    mended_iqr_ms=max([c.mended_iqr_ms for c in checks] + [max(mendeds) - min(mendeds)]))
    check.ratio = ratio(check.mended_ms, check.original_ms)
    worse = slower(check.mended_ms, check.mended_iqr_ms, check.original_ms, check.original_iqr_ms)
    told = ", then ".join(f"{c.ratio:.2f}" for c in checks)
    ms = " then ".join(f"{o:.3f}" for o in originals)
    runs_said = f"mended/original {told} (original {ms} ms, each in its own process)"
    if len({c.verdict for c in checks}) > 1:
        check.verdict, check.why = UNTOLD, f"the {len(checks)} runs disagree: {runs_said}"
    elif first.verdict == SLOWER and worse is not True:
        # slower is what blocks a fix: it must stand beyond how far the arms moved
        check.verdict = UNTOLD
        check.why = f"slower in every run, by less than the arms moved between their processes: {runs_said}"
    elif first.verdict == NOT_SLOWER and worse is True:
        check.verdict, check.why = UNTOLD, f"not slower in any run, slower taken together: {runs_said}"
    return check


def _key(cache: Cache, verified: str, patches: dict[str, str], options: GateOptions, mode: str,
         machine: list) -> str:
    return cache.key("cost", verified, sorted(patches.items()), mode, options.device, options.runs,
                     options.warmup, options.run_mode, machine)


def _found(cache: Cache, key: Optional[str]) -> Optional[CostCheck]:
    entry = cache.get("cost", key) if key else None
    try:
        return from_dict(CostCheck, entry) if entry else None
    except (TypeError, ValueError, KeyError):
        return None  # an entry of another shape: measure again


def _machine(device: str) -> list:
    """What a timing depends on beyond the code: this host, its CPUs, the GPU."""
    import os
    import platform

    gpu = None
    if device == "cuda":
        import torch

        gpu = torch.cuda.get_device_name()
    return [platform.node(), os.cpu_count(), platform.processor(), gpu]


def judge(target: str, rows: Sequence[BenchRow], options: BenchOptions) -> CostCheck:
    """One mode's verdict from the original and mended rows of one run."""
    by_arm = {r.arm: r for r in rows}
    o, m = by_arm.get("original"), by_arm.get("mended")
    check = CostCheck(target=target, mode=options.mode, device=options.device, run_mode=options.run_mode)
    failed = [r for r in (o, m) if r is None or r.error]
    if failed == [m] and m is not None and not any(sign in m.error for sign in TRANSIENT):
        # the original compiles and runs in this mode, the mended program does not
        check.verdict, check.why = FAILS, m.error
        check.original_ms, check.original_iqr_ms, check.graphs_original = o.median_ms, o.iqr_ms, o.graph_count
        return check
    if failed == [o] and o is not None and not any(sign in o.error for sign in TRANSIENT):
        # the mended program runs in this mode where the original does not (Phi-3's lazy cache
        # under CUDA graphs): it cannot be slower; its timing is kept, the original's error said
        check.verdict, check.why = NOT_SLOWER, f"the original fails in this mode: {o.error}"
        check.mended_ms, check.mended_iqr_ms, check.graphs_mended = m.median_ms, m.iqr_ms, m.graph_count
        return check
    if failed:
        r = failed[0]
        check.why = f"the {r.arm} arm failed: {r.error}" if r is not None else "an arm did not run"
        return check
    check.original_ms, check.original_iqr_ms = o.median_ms, o.iqr_ms
    check.mended_ms, check.mended_iqr_ms = m.median_ms, m.iqr_ms
    check.graphs_original, check.graphs_mended = o.graph_count, m.graph_count
    check.ratio = ratio(m.median_ms, o.median_ms)
    worse = slower(m.median_ms, m.iqr_ms, o.median_ms, o.iqr_ms)
    if worse is None:
        shaky = [r.arm for r in (o, m) if r.unstable]
        check.why = (f"timings unstable (IQR above a quarter of the median) in the {' and '.join(shaky)} arm"
                     if shaky else "an arm gave no timing")
        return check
    check.verdict = SLOWER if worse else NOT_SLOWER
    return check
