"""Torch-side helpers for one bench arm: moving and casting, output comparison, and the
figures read from Dynamo and Inductor. Imported only inside the worker process.

Dynamo and Inductor internals change between torch 2.9 and 2.14: every read is defensive
(getattr with a fallback) and a figure that cannot be read is None, never a guess.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

# (rtol, atol) of compiled vs eager outputs. Inductor reorders and fuses reductions, so
# float32 is not bit-exact; half precisions accumulate differently and need more room.
TOLERANCES = {"float32": (1e-3, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}


def tolerance_for(dtype: str, override: Optional[dict]) -> tuple[float, float]:
    """Per-dtype default, or the target's ``Target.tolerance``: either ``{"rtol", "atol"}``
    or keyed by dtype name (``{"float16": {"rtol": ..., "atol": ...}}``)."""
    rtol, atol = TOLERANCES.get(dtype, TOLERANCES["float32"])
    if isinstance(override, dict):
        chosen = override[dtype] if dtype in override else override
        if isinstance(chosen, dict):
            rtol = float(chosen.get("rtol", rtol))
            atol = float(chosen.get("atol", atol))
    return rtol, atol


# -- moving and casting --------------------------------------------------------------

def convert(obj: Any, device: str, dtype: Optional[torch.dtype]) -> Any:
    """``obj`` with every tensor on ``device`` and floating ones cast to ``dtype``;
    modules moved and cast in place; containers and dataclasses rebuilt."""
    if isinstance(obj, torch.Tensor):
        if dtype is not None and obj.is_floating_point():
            return obj.to(device=device, dtype=dtype)
        return obj.to(device=device)
    if isinstance(obj, torch.nn.Module):
        return obj.to(device=device, dtype=dtype) if dtype is not None else obj.to(device=device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(convert(v, device, dtype) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(convert(v, device, dtype) for v in obj)
    if isinstance(obj, dict):
        try:
            return type(obj)((k, convert(v, device, dtype)) for k, v in obj.items())
        except TypeError:  # dict subclasses whose constructor takes other arguments
            return {k: convert(v, device, dtype) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        try:
            return dataclasses.replace(obj, **{f.name: convert(getattr(obj, f.name), device, dtype)
                                              for f in dataclasses.fields(obj) if f.init})
        except (TypeError, ValueError):
            return obj
    return obj


def prepare_callable(fn: Any, device: str, dtype: Optional[torch.dtype]) -> Any:
    """Move the module behind ``fn`` (a module, a bound method of one, or a partial)."""
    import functools

    if isinstance(fn, torch.nn.Module):
        convert(fn, device, dtype)
    elif isinstance(getattr(fn, "__self__", None), torch.nn.Module):
        convert(fn.__self__, device, dtype)
    elif isinstance(fn, functools.partial):
        return functools.partial(prepare_callable(fn.func, device, dtype),
                                 *convert(fn.args, device, dtype), **convert(fn.keywords, device, dtype))
    return fn


# -- outputs ---------------------------------------------------------------------------

def to_plain(obj: Any) -> Any:
    """Outputs as plain containers of CPU tensors, so that another process can load them
    without importing the user's classes (dataclasses, ModelOutput, namedtuples)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):  # transformers' ModelOutput is an OrderedDict subclass
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str, complex)):
        return obj
    if isinstance(obj, (torch.dtype, torch.device, torch.Size)):
        return str(obj)
    return f"<{type(obj).__name__}>"  # an opaque object: compared by type name only


def compare(expected: Any, actual: Any, rtol: float, atol: float, where: str = "output") -> Optional[str]:
    """None when ``actual`` equals ``expected`` within tolerance, else the first difference."""
    if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
        if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)):
            return f"{where}: tensor vs {type(actual if isinstance(expected, torch.Tensor) else expected).__name__}"
        if expected.shape != actual.shape:
            return f"{where}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
        if expected.dtype != actual.dtype and not (expected.is_floating_point() and actual.is_floating_point()):
            return f"{where}: dtype {actual.dtype} != expected {expected.dtype}"
        if expected.is_floating_point() or expected.is_complex():
            e, a = expected.double(), actual.double()
            if torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
                return None
            diff = (a - e).abs()
            diff = torch.where(torch.isnan(diff), torch.zeros_like(diff), diff)
            return f"{where}: max abs diff {diff.max().item():.3g} (rtol={rtol:g}, atol={atol:g})"
        return None if torch.equal(expected, actual) else f"{where}: integer/bool values differ"
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(expected) != set(actual):
            return f"{where}: keys {sorted(actual)} != expected {sorted(expected)}"
        for k in expected:
            why = compare(expected[k], actual[k], rtol, atol, f"{where}[{k!r}]")
            if why:
                return why
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return f"{where}: {len(actual)} items != expected {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            why = compare(e, a, rtol, atol, f"{where}[{i}]")
            if why:
                return why
        return None
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        if math.isclose(expected, actual, rel_tol=rtol, abs_tol=atol) or (math.isnan(expected) and math.isnan(actual)):
            return None
        return f"{where}: {actual!r} != expected {expected!r}"
    return None if expected == actual else f"{where}: {actual!r} != expected {expected!r}"


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
