"""Torch-side helpers for one bench arm: the figures read from Dynamo and Inductor (moving,
casting and output comparison are verification's: ``graphmend.verify.inputs.convert``,
``graphmend.verify.compare``). Imported only inside the worker process.

Dynamo and Inductor internals change between torch 2.9 and 2.14: every read is defensive
(getattr with a fallback) and a figure that cannot be read is None, never a guess.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


# -- figures from Dynamo and Inductor -----------------------------------------------------

def counting_inductor(mode: str) -> tuple[Any, list[int]]:
    """The backend ``torch.compile(mode=...)`` builds for Inductor, subclassed only to count
    the graphs handed to it (the list grows by one per graph). It keeps Inductor's name,
    config and mode patches, so what Inductor generates is unchanged. Falls back to the
    plain ``"inductor"`` string (count from Dynamo's counters) where the class is absent."""
    graphs: list[int] = []
    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is None:
        return "inductor", graphs

    class Counting(wrapper):  # type: ignore[misc, valid-type]
        def __call__(self, gm, example_inputs):
            graphs.append(len(gm.graph.nodes))
            return super().__call__(gm, example_inputs)

    try:
        return Counting(None if mode == "default" else mode, None, None), graphs
    except TypeError:
        return "inductor", graphs


def unique_graphs() -> Optional[int]:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    value = counters["stats"].get("unique_graphs") if "stats" in counters else None
    return int(value) if value is not None else None


def explain_breaks(fn: Any, args: tuple, kwargs: dict) -> Optional[int]:
    """Graph breaks as ``torch._dynamo.explain`` counts them (the figure ``mend analyze``
    shows), traced with the eager backend so Inductor's metrics are untouched."""
    try:
        torch._dynamo.reset()
        out = torch._dynamo.explain(fn)(*args, **kwargs)
        return int(out.graph_break_count)
    except Exception:  # a figure we cannot read is None, never a guess
        return None
    finally:
        torch._dynamo.reset()


def reset_counts() -> None:
    try:
        from torch._dynamo.utils import counters

        counters.clear()
    except ImportError:
        pass
    metrics = _inductor_metrics()
    if metrics is not None and hasattr(metrics, "reset"):
        metrics.reset()


def _inductor_metrics() -> Any:
    try:
        import torch._inductor.metrics as metrics
    except ImportError:
        return None
    return metrics


def kernel_count() -> Optional[int]:
    """Inductor's own ``generated_kernel_count``; None where this torch has no such metric."""
    metrics = _inductor_metrics()
    value = getattr(metrics, "generated_kernel_count", None) if metrics is not None else None
    return int(value) if isinstance(value, int) else None


def backend_name(device: str) -> str:
    if device.startswith("cuda"):
        return "triton"
    try:
        import torch._inductor.config as cfg

        cpp_backend = getattr(cfg, "cpu_backend", "cpp")
    except ImportError:
        cpp_backend = "cpp"
    openmp = torch.backends.openmp.is_available() if hasattr(torch.backends, "openmp") else False
    return f"{cpp_backend}/openmp" if openmp and cpp_backend == "cpp" else str(cpp_backend)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class PeakMemory:
    """CUDA: ``torch.cuda.max_memory_allocated`` over the timed runs (absolute, weights
    included, the compiler's transient allocations excluded), MiB. CPU: growth of the
    process's peak resident set (ru_maxrss, a high-water mark that cannot be reset, so
    compilation included) from just before the first call, MiB."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.kind = "cuda_max_allocated" if device.startswith("cuda") else "cpu_peak_rss_delta"
        self._start = 0.0

    def steady(self) -> None:
        """Called after warm-up: on CUDA the peak restarts there."""
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()

    @staticmethod
    def _maxrss_mb() -> float:
        import resource
        import sys

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return kb / (1024.0 * 1024.0) if sys.platform == "darwin" else kb / 1024.0  # bytes on macOS

    def start(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        else:
            self._start = self._maxrss_mb()

    def peak_mb(self) -> float:
        if self.device.startswith("cuda"):
            return torch.cuda.max_memory_allocated() / (1024.0 * 1024.0)
        return max(0.0, self._maxrss_mb() - self._start)
