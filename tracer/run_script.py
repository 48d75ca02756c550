"""``mend run``: run a Python program as ``python SCRIPT ARGS`` would, recording the breaks of
every torch.compile region it executes. In-process, so the program's stdout/stderr, argv,
``__main__`` and exit status are its own; the recorder only listens to Dynamo's logs.

With a ``graphmend.core.recording.Recording`` (``--record DIR``), ``torch.compile`` and
``nn.Module.__init__`` are hooked for the run too: the first eager call of every compiled
function or module is written out as a target before it runs (see graphmend/core/recording.py).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import runpy
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence

from graphmend.core.model import Break, TargetResult


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


def run_script(script: str, args: Sequence[str], recording: Any = None, stdout_to_stderr: bool = False) -> ScriptRun:
    """``recording``: a ``graphmend.core.recording.Recording`` to fill (``--record``);
    ``stdout_to_stderr``: the program's stdout goes to stderr (the report goes to stdout)."""
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
    pid = os.getpid()
    hooks = CompileHooks(recording) if recording is not None else contextlib.nullcontext()
    with _stdout_to_stderr(stdout_to_stderr), rec, hooks:
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
    if os.getpid() != pid:
        # a process the program forked (os.fork, a multiprocessing fork) ended its part of the
        # program: it exits as python would make it, and only the process mend started reports
        raise SystemExit(code)
    duration = time.perf_counter() - start
    from tracer.classify import classify_recompiles

    classify_recompiles(rec.recording.recompiles)
    return ScriptRun(exit_code=code, targets=group_by_function(rec.breaks(), rec.recording.recompiles),
                     duration_s=duration, torch_version=torch.__version__)


def group_by_function(breaks: list[Break], recompiles) -> list[TargetResult]:
    """One TargetResult per compiled function, with the graphs Dynamo compiled for it."""
    from tracer.recorder import compiled_key

    metrics = []
    try:
        from torch._dynamo.utils import get_compilation_metrics

        metrics = get_compilation_metrics()
    except Exception:  # no compilation metrics in this torch: targets are grouped without them
        pass
    groups: dict[str, TargetResult] = {}
    first_lines: dict[str, int] = {}  # key -> the compiled function's def line (not a resume function's)

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
        if function_name(name) == name and getattr(m, "co_firstlineno", None):
            first_lines.setdefault(t.name, int(m.co_firstlineno))
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
    from tracer.recorder import qualname

    for t in groups.values():
        t.graph_break_count = max(t.graph_count - 1, 0)
        # after the recompiles are matched (they name the code, not the class)
        t.function = qualname(t.file, t.function, first_lines.get(t.name))
    return list(groups.values())


def short_names(targets: list[TargetResult], root: str) -> None:
    """Each compiled function named as a reader looks for it, ``TinyNet.forward (pkg/model.py)``:
    its qualified name and its file relative to the report's root (the breaks' name for it too)."""
    for t in targets:
        if not t.file:
            continue
        path = t.file
        if root and (path + os.sep).startswith(root.rstrip(os.sep) + os.sep):
            path = os.path.relpath(path, root).replace(os.sep, "/")
        label = f"{t.function} ({path})"
        for b in t.breaks:
            if b.compiled_function == t.name:
                b.compiled_function = label
        t.name = label


class CompileHooks:
    """``torch.compile`` wrapped so that the first eager call of what it returns is recorded
    (before it runs: the inputs and weights as the call got them), and ``nn.Module``
    construction watched so that a module can be rebuilt from its class. Everything is put
    back on exit; a failure to record is kept as a reason, never raised into the program."""

    def __init__(self, recording: Any) -> None:
        from tracer.recorder import _torch_dir

        self.rec = recording
        self._torch_dir = _torch_dir()
        self._seen: set = set()
        self._saved: list[tuple[Any, str, Any, Any]] = []  # (owner, name, original, hook)

    def __enter__(self) -> "CompileHooks":
        import torch

        from graphmend.core.recording import constructor_call

        constructions = self.rec.constructions
        module_init, module_setstate = torch.nn.Module.__init__, torch.nn.Module.__setstate__

        def init(module: Any, *args: Any, **kwargs: Any) -> None:
            module_init(module, *args, **kwargs)
            if not self._saved:
                return  # the run is over; still installed only where something wrapped this hook
            try:
                constructions[module] = constructor_call(module, sys._getframe(1))
            except Exception:  # a constructor's arguments we cannot record: the module is not replayable
                pass

        def setstate(module: Any, state: Any) -> None:
            module_setstate(module, state)
            if not self._saved:
                return
            try:
                # copy.deepcopy(layer) builds no new layer: the copy is its original's twin
                f = sys._getframe(1)
                if f.f_code is copy._reconstruct.__code__:
                    original = f.f_locals.get("x")
                    if type(original) is type(module) and original in constructions:
                        constructions[module] = constructions[original]
            except Exception:  # a frame whose locals we cannot read: the copy is not replayable
                pass

        functools.update_wrapper(init, module_init)
        functools.update_wrapper(setstate, module_setstate)
        original_compile = torch.compile

        @functools.wraps(original_compile)
        def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
            out = original_compile(model, *args, **kwargs)
            if model is None:
                return out  # the decorator form: it calls torch.compile(fn) again
            try:
                return self._watch(model, out, self._caller())
            except Exception as exc:
                self.rec.skipped.append((self._label(model), f"recording raised {type(exc).__name__}: {exc}"))
                return out

        for owner, name, value in ((torch, "compile", compile), (torch.nn.Module, "__init__", init),
                                   (torch.nn.Module, "__setstate__", setstate)):
            self._saved.append((owner, name, getattr(owner, name), value))
            setattr(owner, name, value)
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, value, ours in reversed(self._saved):
            # what wrapped a hook since (Dynamo wraps nn.Module.__init__) stays: the hook goes idle
            if getattr(owner, name) is ours:
                setattr(owner, name, value)
        self._saved.clear()

    # -- what torch.compile was given -----------------------------------------------------
    def _watch(self, model: Any, out: Any, where: str) -> Any:
        import torch

        if isinstance(model, torch.nn.Module):
            if isinstance(out, torch.nn.Module):
                handle = None

                def first_call(_wrapper: Any, args: tuple, kwargs: dict) -> None:
                    if torch.compiler.is_compiling():
                        return
                    handle.remove()
                    self._module(model, args, kwargs, where)

                handle = out.register_forward_pre_hook(first_call, with_kwargs=True)
            return out
        owner = getattr(model, "__self__", None)
        func = getattr(model, "__func__", None)
        if isinstance(owner, torch.nn.Module) and func is torch.nn.Module._call_impl:  # module.compile()
            return self._on_first_call(out, lambda args, kwargs: self._module(owner, args, kwargs, where))
        if isinstance(owner, torch.nn.Module) and isinstance(func, types.FunctionType):  # torch.compile(m.forward)
            return self._on_first_call(out, lambda args, kwargs: self._method(owner, func, args, kwargs, where))
        if isinstance(model, types.FunctionType):
            return self._on_first_call(out, lambda args, kwargs: self._function(model, args, kwargs, where))
        self.rec.skipped.append((self._label(model), f"a {type(model).__name__} was compiled; mend records "
                                 "functions, methods and modules"))
        return out

    def _on_first_call(self, compiled: Any, record: Any) -> Any:
        import torch

        done = []

        @functools.wraps(compiled)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not done and not torch.compiler.is_compiling():
                done.append(True)
                record(args, kwargs)
            return compiled(*args, **kwargs)

        return call

    # -- recording one first call ---------------------------------------------------------
    def _module(self, module: Any, args: tuple, kwargs: dict, where: str) -> None:
        from graphmend.core.recording import parameter_names

        cls = type(module)
        if self._once(("module", cls)):
            return

        def build(t: Any) -> None:
            t.name = self.rec.unique_name(cls.__name__)
            var = t.module(module, "the compiled module")
            t.call(var, args, kwargs, parameter_names(module.forward))

        self.rec.record(self._label(getattr(cls, "forward", cls), cls.__name__ + ".forward"), where, build)

    def _method(self, module: Any, func: Any, args: tuple, kwargs: dict, where: str) -> None:
        from graphmend.core.recording import parameter_names

        cls = type(module)
        if self._once(("method", cls, func.__name__)):
            return

        def build(t: Any) -> None:
            t.name = self.rec.unique_name(f"{cls.__name__}_{func.__name__}")
            var = t.module(module, "self")
            t.call(f"{var}.{func.__name__}", args, kwargs, parameter_names(func, skip=1))

        self.rec.record(self._label(func), where, build)

    def _function(self, fn: Any, args: tuple, kwargs: dict, where: str) -> None:
        import torch

        from graphmend.core.recording import parameter_names

        if self._once(("function", fn)):
            return
        owner = args[0] if args and isinstance(args[0], torch.nn.Module) else None
        # @torch.compile on a method in the class body: called with the module as self
        method = owner is not None and any(fn.__qualname__ == f"{c.__qualname__}.{fn.__name__}"
                                           for c in type(owner).__mro__)

        def build(t: Any) -> None:
            t.name = self.rec.unique_name(fn.__qualname__.replace(".", "_"))
            if method:
                var = t.module(owner, "self")
                t.call(f"uncompiled({t.import_name(fn)}).__get__({var})", args[1:], kwargs,
                       parameter_names(fn, skip=1))
            else:
                t.call(f"uncompiled({t.import_name(fn)})", args, kwargs, parameter_names(fn))

        self.rec.record(self._label(fn), where, build)

    def _once(self, key: tuple) -> bool:
        if key in self._seen:
            return True
        self._seen.add(key)
        return False

    # -- names ----------------------------------------------------------------------------
    def _label(self, obj: Any, name: Optional[str] = None) -> str:
        """``TinyModel.forward (model.py:12)``: what was compiled, where it is defined."""
        name = name or getattr(obj, "__qualname__", None) or type(obj).__name__
        code = getattr(obj, "__code__", None)
        if code is None:
            return name
        return f"{name} ({self._rel(code.co_filename)}:{code.co_firstlineno})"

    def _rel(self, path: str) -> str:
        try:
            return os.path.relpath(path, os.path.dirname(self.rec.script))
        except ValueError:
            return path

    def _caller(self) -> str:
        """The program's line that called torch.compile (or module.compile())."""
        from tracer.recorder import is_user_file

        f = sys._getframe(2)
        while f is not None and not is_user_file(f.f_code.co_filename, self._torch_dir):
            f = f.f_back
        return f"{self._rel(f.f_code.co_filename)}:{f.f_lineno}" if f is not None else "?"
