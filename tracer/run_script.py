"""``mend run``: run a Python program as ``python SCRIPT ARGS`` would, recording the breaks of
every torch.compile region it executes. In-process, so the program's stdout/stderr, argv,
``__main__`` and exit status are its own; the recorder only listens to Dynamo's logs."""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence

from graphmend.model import Break, TargetResult


@dataclass
class ScriptRun:
    exit_code: int
    targets: list[TargetResult] = field(default_factory=list)  # one per compiled function
    duration_s: float = 0.0
    torch_version: Optional[str] = None


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    # sys.exit("message"): Python prints it to stderr and exits 1
    sys.stderr.write(f"{code}\n")
    return 1


def _print_exception(exc: BaseException) -> None:
    """The traceback Python would print, without mend's own frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _launcher_files() -> tuple[str, ...]:
    """Files whose frames are mend's, not the program's (see Recorder.launcher_files)."""
    import importlib.util

    out = [os.path.abspath(sys.argv[0]), runpy.__file__, __file__]
    for pkg in ("typer", "click", "graphmend"):
        spec = importlib.util.find_spec(pkg)
        for loc in getattr(spec, "submodule_search_locations", None) or []:
            out.append(os.path.join(loc, ""))
    return tuple(out)


@contextlib.contextmanager
def _stdout_to_stderr(on: bool) -> Iterator[None]:
    """The program's stdout (fd 1, so its subprocesses' and C extensions' too) sent to stderr
    for the block: mend's report owns stdout then."""
    if not on:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # the program may have closed or replaced it
            pass
        os.dup2(saved, 1)
        os.close(saved)


def run_script(script: str, args: Sequence[str], stdout_to_stderr: bool = False) -> ScriptRun:
    """``stdout_to_stderr``: the program's stdout goes to stderr (the report goes to stdout)."""
    from tracer.recorder import Recorder  # imports torch

    import torch

    path = os.path.abspath(script)
    rec = Recorder(own_backend=False, launcher_files=_launcher_files())  # before argv changes
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = [script, *args]
    # as `python SCRIPT` does: the script's folder first on sys.path
    if sys.path:
        sys.path[0] = os.path.dirname(path)
    else:
        sys.path.insert(0, os.path.dirname(path))
    start = time.perf_counter()
    code = 0
    with _stdout_to_stderr(stdout_to_stderr), rec:
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            code = _exit_code(exc)
        except KeyboardInterrupt:
            code = 130
            sys.stderr.write("KeyboardInterrupt\n")
        except BaseException as exc:
            _print_exception(exc)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.argv = saved_argv
            if saved_path0 is not None and sys.path:
                sys.path[0] = saved_path0
    duration = time.perf_counter() - start
    return ScriptRun(exit_code=code, targets=group_by_function(rec.breaks(), rec.recording.recompiles),
                     duration_s=duration, torch_version=torch.__version__)


def group_by_function(breaks: list[Break], recompiles) -> list[TargetResult]:
    """One TargetResult per compiled function, with the graphs Dynamo compiled for it."""
    from tracer.recorder import compiled_key

    metrics = []
    try:
        from torch._dynamo.utils import get_compilation_metrics

        metrics = get_compilation_metrics()
    except Exception:
        pass
    groups: dict[str, TargetResult] = {}

    def group(key: str, file: str = "", function: str = "") -> TargetResult:
        if key not in groups:
            groups[key] = TargetResult(name=key, file=file, function=function)
        return groups[key]

    for m in metrics:
        name, file = getattr(m, "co_name", None), getattr(m, "co_filename", None)
        if not name or not file:
            continue
        from tracer.recorder import function_name

        t = group(compiled_key(name, file), file, function_name(name))
        ops = getattr(m, "graph_op_count", None)
        if ops:
            t.graph_count += 1
            t.ops_per_graph.append(int(ops))
    for b in breaks:
        key = b.compiled_function or "<unknown compiled region>"
        fn = key.split(" (", 1)[0]
        file = key[len(fn) + 2:-1] if key.endswith(")") and " (" in key else (b.file or "")
        t = group(key, file, fn)
        t.breaks.append(b)
        if b.kind == "frame_skipped":
            t.frames_skipped += 1
    for r in recompiles:
        for t in groups.values():
            if t.function == r.function and (not r.file or t.file == r.file):
                t.recompiles.append(r)
                break
    for t in groups.values():
        t.graph_break_count = max(t.graph_count - 1, 0)
    return list(groups.values())

