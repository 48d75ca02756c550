"""Recorded targets: what ``mend run SCRIPT --record DIR`` writes, and what the targets it
writes call back into when they run.

DIR holds, for every compiled function the program called (a ``torch.compile``'d function
or module, or ``module.compile()``):

* ``mend_targets.py``: one ``mend_target_<name>`` per function, plain code that rebuilds
  the callable and its first call's inputs (so ``mend analyze DIR``, ``mend fix --from-run
  DIR`` and ``mend bench DIR`` run on them like on any hand-written target);
* ``<name>.pt``: that call's tensors and the module state, written with ``torch.save`` and
  read back with ``torch.load(weights_only=True)`` (nothing in DIR is unpickled as code);
* ``mend_record.json``: what was recorded, what was not and why, and the program's folder.

How a callable is rebuilt, without pickling it: a function is imported by its module and
qualified name; a module is rebuilt by calling its class with the arguments its
constructor received (seen when it called ``nn.Module.__init__``; a ``copy.deepcopy`` of a
module inherits its original's), written out as Python literals, then its ``state_dict``
is loaded (strict) and its ``training`` flags set. Whatever cannot be written out that way
(a function defined inside another, a constructor argument of a type mend cannot spell, a
module unpickled rather than constructed) is not recorded, with the reason in one line.

Input tensors beyond ``max_bytes`` per call (largest first) are stored as a summary (shape,
dtype, value range) and regenerated from a seed; a ``state_dict`` beyond it is not stored
and the module keeps the weights its constructor draws under ``torch.manual_seed(0)``.

Importing this module is cheap: torch is imported by the functions that need it.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import json
import keyword
import math
import os
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

# literals, comments and docstrings a written target holds, safe whatever text they carry
from graphmend.core.pytext import _comment, _docstring, _q, _snake, _wrap

TARGETS_FILE = "mend_targets.py"
MANIFEST = "mend_record.json"
MANIFEST_VERSION = 1
DEFAULT_MAX_BYTES = 64 << 20
MAX_DEPTH = 8  # nesting of containers / constructor arguments written out


class RecordError(Exception):
    """DIR cannot hold a recording; the message names it and says why."""


class Unrecordable(Exception):
    """Why one compiled function cannot be replayed: a line for the user and the file."""


# -- replay: what mend_targets.py calls (graphmend/core/replay.py; folders recorded before it
# import these names from here) ------------------------------------------------------------

from graphmend.core.replay import load_tensors, regenerate, uncompiled  # noqa: E402,F401


# -- the folder --------------------------------------------------------------------------

def read_manifest(folder: Path) -> Optional[dict]:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == MANIFEST_VERSION else None


def prepare_dir(folder: Path) -> None:
    """Check before the program runs that ``folder`` can take a recording: a new or empty
    folder, or one holding an earlier recording (replaced). Raises RecordError."""
    from graphmend.core.sources import OutputDirError, prepare_output_dir

    try:
        prepare_output_dir(folder, "--record", ours=(MANIFEST, "mend recording"))
    except OutputDirError as exc:
        raise RecordError(str(exc)) from None


def recorded_targets(folder: Path) -> tuple[Path, dict]:
    """The targets module and manifest of a recording, for ``mend fix --from-run``. Raises
    RecordError naming the folder when it holds none."""
    if not folder.is_dir():
        raise RecordError(f"--from-run {folder}: not a folder" if folder.exists()
                          else f"--from-run {folder}: does not exist")
    manifest = read_manifest(folder)
    targets = folder / TARGETS_FILE
    if manifest is None or not targets.is_file():
        raise RecordError(f"--from-run {folder}: holds no mend recording ({MANIFEST} and {TARGETS_FILE}); "
                          "record one with: mend run --record DIR SCRIPT")
    return targets, manifest


def source_root(folder: Path, manifest: dict) -> Path:
    """The folder of the program the recording ran (what ``mend fix --from-run`` fixes by default)."""
    return (folder / manifest.get("source_root", ".")).resolve()


# -- constructor arguments -----------------------------------------------------------------

@dataclass
class Construction:
    """How a module was built: the arguments its class was called with, or why that is unknown."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    unknown: str = ""


def constructor_call(module: Any, frame: Any) -> Construction:
    """The arguments ``module``'s class was called with, read off the ``__init__`` frames on
    the stack when ``nn.Module.__init__`` ran (``frame`` is its caller): the outermost
    ``__init__`` of ``module`` must be its class's own, else the arguments are unknown."""
    outer = None
    f = frame
    for _ in range(4):  # wrappers of nn.Module.__init__ itself (Dynamo patches it while compiling)
        code = f.f_code if f is not None else None
        if code is None or code.co_name == "__init__" or not code.co_argcount \
                or f.f_locals.get(code.co_varnames[0]) is not module:
            break
        f = f.f_back
    while f is not None and f.f_code.co_name == "__init__":
        code = f.f_code
        if not code.co_argcount or f.f_locals.get(code.co_varnames[0]) is not module:
            break
        outer, f = f, f.f_back
    init = inspect.unwrap(getattr(type(module), "__init__", None))
    if outer is None or getattr(init, "__code__", None) is not outer.f_code:
        return Construction(unknown=f"{type(module).__name__}.__init__ is wrapped or called in a way mend "
                                    "cannot read its arguments from")
    code, values = outer.f_code, outer.f_locals
    names = code.co_varnames
    n_pos, n_kwonly = code.co_argcount, code.co_kwonlyargcount
    star = names[n_pos + n_kwonly] if code.co_flags & inspect.CO_VARARGS else None
    starstar = names[n_pos + n_kwonly + (1 if star else 0)] if code.co_flags & inspect.CO_VARKEYWORDS else None
    extra = tuple(values.get(star, ())) if star else ()
    args: list = []
    kwargs: dict = {}
    for i, name in enumerate(names[1:n_pos], start=1):
        # positional when it must be (positional-only, or *args follow), by name otherwise
        if i < code.co_posonlyargcount or extra:
            args.append(values[name])
        else:
            kwargs[name] = values[name]
    args.extend(extra)
    for name in names[n_pos:n_pos + n_kwonly]:
        kwargs[name] = values[name]
    if starstar:
        kwargs.update(values.get(starstar, {}))
    return Construction(args=tuple(args), kwargs=kwargs)


# -- writing targets -----------------------------------------------------------------------

def _has_main_guard(path: str) -> bool:
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.comparators) == 1:
            names = {getattr(node.test.left, "id", None), getattr(node.test.comparators[0], "value", None)}
            if names == {"__name__", "__main__"}:
                return True
    return False


@dataclass
class _Import:
    module: str
    name: str  # the top-level attribute imported
    root: Optional[str]  # the sys.path entry it imports from (None: importable anyway)
    file: Optional[str]
    alias: str = ""  # the name it is bound to in the target


def _site_dirs() -> tuple[str, ...]:
    import site
    import sysconfig

    dirs = set(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    dirs.add(sysconfig.get_paths()["purelib"])
    dirs.add(sysconfig.get_paths()["stdlib"])
    return tuple(os.path.realpath(d) for d in dirs if d)


class Recording:
    """The compiled functions one program run called, as targets; ``finish()`` writes DIR."""

    def __init__(self, folder: Path, script: str, argv: list[str], max_bytes: int = DEFAULT_MAX_BYTES,
                 label: Optional[str] = None):
        self.folder = Path(folder).resolve()
        self.label = label or str(folder)  # DIR as the user gave it, for the commands the file names
        self.script = os.path.realpath(script)
        self.argv = list(argv)
        self.max_bytes = max_bytes
        self.targets: list[_TargetCode] = []
        self.skipped: list[tuple[str, str]] = []  # (what, why)
        self.constructions: "weakref.WeakKeyDictionary[Any, Construction]" = weakref.WeakKeyDictionary()
        self._names: set[str] = set()
        self._site = _site_dirs()

    # what run_script calls
    def record(self, what: str, compiled_at: str, build) -> None:
        """``build(target)`` writes one target's code; an Unrecordable it raises (or any
        error: recording must never break the program) is kept as the reason."""
        t = _TargetCode(self, what, compiled_at)
        try:
            build(t)
            t.save()
            self._names.add(t.name)
        except Unrecordable as exc:
            self.skipped.append((what, str(exc)))
            return
        except Exception as exc:  # a surprise in user objects: the program goes on
            self.skipped.append((what, f"recording raised {type(exc).__name__}: {exc}"))
            return
        self.targets.append(t)

    def unique_name(self, base: str) -> str:
        base = _snake(base)
        name, n = base, 2
        while name in self._names:
            name, n = f"{base}_{n}", n + 1
        return name

    def importable(self, obj: Any) -> _Import:
        """How the targets module imports ``obj`` (a class or function): by its module and
        qualified name, from the folder its module was imported from."""
        qual = getattr(obj, "__qualname__", "") or ""
        mod_name = getattr(obj, "__module__", None)
        label = getattr(obj, "__name__", type(obj).__name__)
        if not mod_name or "<locals>" in qual or "<lambda>" in qual:
            raise Unrecordable(f"{label} is defined inside a function; a recorded target can only "
                               "import module-level functions and classes")
        module = sys.modules.get(mod_name)
        file = getattr(module, "__file__", None)
        if mod_name == "__main__":
            if not file or os.path.realpath(file) != self.script:
                raise Unrecordable(f"{label} is defined in __main__, not in a file mend can import")
            stem = Path(file).stem
            if not stem.isidentifier() or keyword.iskeyword(stem):
                raise Unrecordable(f"{label} is defined in {Path(file).name}, whose name cannot be imported")
            if not _has_main_guard(file):
                raise Unrecordable(f"{label} is defined in {Path(file).name}, which runs the program when "
                                   "imported (no `if __name__ == \"__main__\":` block); move it to a module or add the guard")
            mod_name = stem
        found = module
        for part in qual.split("."):
            found = getattr(found, part, None)
        if found is not obj and uncompiled(found) is not obj:
            raise Unrecordable(f"{label} is not reachable as {mod_name}.{qual}")
        root = None
        if file:
            real = os.path.realpath(file)
            up = real
            for _ in range(mod_name.count(".") + (2 if Path(real).name == "__init__.py" else 1)):
                up = os.path.dirname(up)
            if not any(up == s or up.startswith(s + os.sep) for s in self._site):
                root = up
        return _Import(module=mod_name, name=qual.split(".")[0], root=root, file=file)

    # writing the folder
    def finish(self) -> None:
        """Write the targets module and the manifest (atomically), and remove the files of
        an earlier recording this one did not rewrite. Raises RecordError."""
        from graphmend.core.sources import write_bytes_atomic

        old = read_manifest(self.folder) or {}
        roots = []
        for t in self.targets:
            for imp in t.imports.values():
                if imp.root and imp.root not in roots:
                    roots.append(imp.root)
        script_dir = os.path.dirname(self.script)
        if script_dir in roots:  # first, as `python SCRIPT` has it
            roots.remove(script_dir)
        roots.insert(0, script_dir)
        manifest = {
            "version": MANIFEST_VERSION,
            "script": self._rel(self.script),
            "argv": self.argv,
            "source_root": self._rel(script_dir),
            "targets": [{"function": f"mend_target_{t.name}", "recorded": t.what, "compiled_at": t.compiled_at,
                         "file": t.data_file, "mode": t.mode, "notes": t.notes} for t in self.targets],
            "not_recorded": [{"what": w, "reason": r} for w, r in self.skipped],
        }
        try:
            write_bytes_atomic(self.folder / TARGETS_FILE, self.module_text(roots).encode("utf-8"))
            write_bytes_atomic(self.folder / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))
        except OSError as exc:
            raise RecordError(f"--record {self.folder}: cannot write: {exc.strerror or exc}")
        keep = {t.data_file for t in self.targets}
        for entry in old.get("targets", []):
            stale = entry.get("file")
            if isinstance(stale, str) and stale not in keep and "/" not in stale and stale.endswith(".pt"):
                try:
                    (self.folder / stale).unlink()
                except OSError:
                    pass

    def _rel(self, path: str) -> str:
        return Path(os.path.relpath(path, self.folder)).as_posix()

    def module_text(self, roots: list[str]) -> str:
        script = Path(self.script).name
        cmd = " ".join(["mend run --record", self.label, script, *self.argv])
        functions = [t.function_lines() for t in self.targets]
        text = "\n".join(line for f in functions for line in f)
        helpers = ["load_tensors"] + [h for h in ("regenerate", "uncompiled") if f"{h}(" in text]
        about = (f"Targets recorded by `{cmd}`: each replays the first call the program made to one "
                 "compiled function, with the inputs and module state it had then. Run them with "
                 f"`mend analyze {self.label}`, `mend fix --from-run {self.label}` or `mend bench {self.label}`; "
                 "run the command again to refresh them. Tensors are read with torch.load(weights_only=True).")
        out = [
            *_wrap('"""' + _docstring(about), ""),
            '"""',
            "",
            "import sys",
            "from pathlib import Path",
            "",
            "import torch",
            "",
            f"from graphmend.replay import {', '.join(helpers)}",
            "",
            "HERE = Path(__file__).resolve().parent",
            *_wrap(_comment(f"the folders the program's modules import from, its own first (as for `python {script}`)"),
                   "# "),
            "IMPORT_ROOTS = [" + ", ".join(f"HERE / {_q(self._rel(r))}" for r in roots) + "]",
            "for _root in reversed(IMPORT_ROOTS):",
            "    if str(_root.resolve()) not in sys.path:",
            "        sys.path.insert(0, str(_root.resolve()))",
        ]
        for f in functions:
            out += ["", ""] + f
        if self.skipped:
            out += ["", "", "# Not recorded:"]
            for w, r in self.skipped:
                out += _wrap(_comment(f"{w}: {r}"), "# - ", "#   ")
        return "\n".join(out) + "\n"


class _TargetCode:
    """One ``mend_target_*`` function being written: its imports, statements and tensors."""

    def __init__(self, rec: Recording, what: str, compiled_at: str):
        self.rec = rec
        self.what = what
        self.compiled_at = compiled_at
        self.name = ""
        self.imports: dict[tuple[str, str], _Import] = {}
        self.lines: list[str] = []
        self.tensors: dict[str, Any] = {}
        self.notes: list[str] = []
        self.returns = ""
        self.mode = "eval"  # how the program ran it: "train" with grad on and .train() (or grad inputs)
        self._used = {"torch", "tensors", "HERE", "sys", "Path", "load_tensors", "regenerate", "uncompiled"}
        self._modules: dict[int, str] = {}
        self._root_module: Any = None  # the first module built with its state: the one called
        self._tensor_exprs: dict[int, str] = {}
        self._summarised: set[int] = set()
        self._seed = 0

    @property
    def data_file(self) -> str:
        return f"{self.name}.pt"

    # names
    def local(self, base: str) -> str:
        base = _snake(base)
        if keyword.iskeyword(base) or not base.isidentifier():
            base += "_"
        name, n = base, 2
        while name in self._used:
            name, n = f"{base}_{n}", n + 1
        self._used.add(name)
        return name

    def import_name(self, obj: Any) -> str:
        """The local name ``obj`` (a class or function) is reached by, importing it once."""
        imp = self.rec.importable(obj)
        key = (imp.module, imp.name)
        if key not in self.imports:
            imp.alias = imp.name if imp.name not in self._used else self.local(imp.name)
            self._used.add(imp.alias)
            self.imports[key] = imp
        return self.imports[key].alias + obj.__qualname__[len(imp.name):]

    # inputs
    def plan_inputs(self, values: list) -> None:
        """Pick the input tensors stored as a summary: the largest, until the rest fit."""
        import torch

        seen: dict[int, Any] = {}

        def visit(v: Any, depth: int) -> None:
            if depth > MAX_DEPTH:
                return
            if isinstance(v, torch.Tensor):
                seen.setdefault(id(v), v)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    visit(x, depth + 1)
            elif isinstance(v, dict):
                for x in v.values():
                    visit(x, depth + 1)
            elif dataclasses.is_dataclass(v) and not isinstance(v, type):
                for f in dataclasses.fields(v):
                    visit(getattr(v, f.name, None), depth + 1)

        for v in values:
            visit(v, 0)
        total = sum(_nbytes(t) for t in seen.values())
        for t in sorted(seen.values(), key=_nbytes, reverse=True):
            if total <= self.rec.max_bytes:
                break
            self._summarised.add(id(t))
            total -= _nbytes(t)

    def expr(self, value: Any, where: str, depth: int = 0, state: bool = True) -> str:
        """Python source that rebuilds ``value``; raises Unrecordable naming ``where``."""
        import torch

        if depth > MAX_DEPTH:
            raise Unrecordable(f"{where} is nested too deep to write out")
        if isinstance(value, str):
            return _q(value)
        if value is None or isinstance(value, (bool, bytes)):
            return repr(value)
        if isinstance(value, int) and type(value) is int:
            return repr(value)
        if type(value) is float:
            if math.isnan(value):
                return 'float("nan")'
            if math.isinf(value):
                return 'float("inf")' if value > 0 else '-float("inf")'
            return repr(value)
        if type(value) is complex:
            return repr(value)
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, torch.device):
            return f"torch.device({_q(str(value))})"
        if isinstance(value, torch.Size):
            return f"torch.Size({list(value)!r})"
        if isinstance(value, torch.Tensor):
            return self.tensor(value, where)
        if isinstance(value, torch.nn.Module):
            return self.module(value, where, state=state, depth=depth)
        if isinstance(value, enum.Enum):
            return f"{self.import_name(type(value))}.{value.name}"
        if type(value) in (list, tuple, set, frozenset):
            items = [self.expr(v, f"{where}[{i}]", depth + 1, state) for i, v in enumerate(value)]
            if type(value) is tuple:
                return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
            if type(value) is list:
                return "[" + ", ".join(items) + "]"
            return f"{type(value).__name__}([" + ", ".join(items) + "])"
        if type(value) is dict:
            parts = []
            for k, v in value.items():
                if not (k is None or isinstance(k, (str, int, bool, float))):
                    raise Unrecordable(f"{where} has a {type(k).__name__} key mend cannot write out")
                parts.append(f"{self.expr(k, where, depth + 1)}: {self.expr(v, f'{where}[{k!r}]', depth + 1, state)}")
            return "{" + ", ".join(parts) + "}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            cls = self.import_name(type(value))
            fields = [f for f in dataclasses.fields(value) if f.init]
            args = ", ".join(f"{f.name}={self.expr(getattr(value, f.name), f'{where}.{f.name}', depth + 1, state)}"
                             for f in fields)
            return f"{cls}({args})"
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # a namedtuple
            cls = self.import_name(type(value))
            return f"{cls}(" + ", ".join(self.expr(v, f"{where}.{n}", depth + 1, state)
                                        for n, v in zip(value._fields, value)) + ")"
        raise Unrecordable(f"{where} is a {type(value).__module__}.{type(value).__qualname__}, "
                           "which mend cannot write out as code")

    def tensor(self, t: Any, where: str) -> str:
        import torch

        if id(t) in self._tensor_exprs:
            return self._tensor_exprs[id(t)]  # the same tensor passed twice stays one tensor
        if t.layout is not torch.strided or t.is_quantized or t.device.type == "meta":
            raise Unrecordable(f"{where} is a {t.layout} / {t.dtype} tensor on {t.device}, "
                               "which mend cannot store")
        grad = ".requires_grad_()" if t.requires_grad else ""
        if id(t) in self._summarised:
            code = self._regenerate(t)
            self.notes.append(f"{where}: {tuple(t.shape)} {str(t.dtype).replace('torch.', '')} "
                              f"({_nbytes(t)} bytes) regenerated from a seed: over --record-max-bytes")
        else:
            key = where
            data = t.detach()
            if data.untyped_storage().nbytes() > data.nbytes:  # a view: store its elements, not its base
                data = data.clone()
            self.tensors[key] = data
            code = f"tensors[{_q(key)}]"
        expr = code + grad
        self._tensor_exprs[id(t)] = expr
        return expr

    def _regenerate(self, t: Any) -> str:
        import torch

        self._seed += 1
        shape = tuple(t.shape)
        dtype = str(t.dtype)
        extra = ""
        data = t.detach()
        if data.numel():
            flat = data.reshape(-1)
            step = max(1, flat.numel() // 1_000_000)  # the range of a sample: cheap on a large tensor
            sample = flat[::step]
            if t.dtype is torch.bool:
                extra = f", p={float(sample.float().mean()):.4g}"
            elif t.dtype.is_floating_point:
                sample = sample.double()
                sample = sample[torch.isfinite(sample)]
                if sample.numel():
                    extra = f", mean={float(sample.mean()):.4g}, std={float(sample.std()) if sample.numel() > 1 else 0.0:.4g}"
            elif not t.dtype.is_complex:
                extra = f", low={int(flat.min())}, high={int(flat.max())}"
        device = f", device={_q(str(t.device))}" if t.device.type != "cpu" else ""
        return f"regenerate({shape!r}, {dtype}, seed={self._seed}{extra}{device})"

    def module(self, m: Any, where: str, state: bool = True, depth: int = 0) -> str:
        """A module built by its class's constructor, with its state loaded when ``state``
        (a module passed to another's constructor gets its weights from that one's state)."""
        if id(m) in self._modules:
            return self._modules[id(m)]
        cls = type(m)
        built = self.rec.constructions.get(m)
        if built is None:
            raise Unrecordable(f"{where} ({cls.__name__}) was not built by calling its class during the "
                               "run (loaded with pickle or created before it), so its constructor arguments are unknown")
        if built.unknown:
            raise Unrecordable(f"{where} ({cls.__name__}): {built.unknown}")
        ctor = self.import_name(cls)
        args = [self.expr(a, f"{cls.__name__}() argument {i}", depth + 1, state=False) for i, a in enumerate(built.args)]
        args += [f"{k}={self.expr(v, f'{cls.__name__}() argument {k}', depth + 1, state=False)}"
                 for k, v in built.kwargs.items()]
        var = self.local(cls.__name__)
        self._modules[id(m)] = var
        self.lines.append(f"{var} = {ctor}({', '.join(args)})")
        if state:
            if self._root_module is None:
                self._root_module = m
            sd = m.state_dict()
            size = _state_bytes(sd)
            if size > self.rec.max_bytes:
                self.notes.append(f"{var}: state_dict ({size} bytes) over --record-max-bytes: not stored; "
                                  "the weights are the constructor's under torch.manual_seed(0)")
            elif sd:
                key = f"state.{var}"
                self.tensors[key] = dict(sd)
                self.lines.append(f"{var}.load_state_dict(tensors[{_q(key)}])")
            self.lines.append(f"{var}.train({m.training})")
            for sub_name, sub in m.named_modules():
                if sub_name and sub.training != m.training:
                    self.lines.append(f"{var}.get_submodule({_q(sub_name)}).train({sub.training})")
        return var

    def call(self, fn_expr: str, args: tuple, kwargs: dict, names: list[str]) -> None:
        """The return line: the callable and the recorded call's arguments, tensors and
        modules bound to the parameter names of the function they go to."""
        import torch

        self.plan_inputs([*args, *kwargs.values()])
        root = self._root_module
        wants_grad = root.training if root is not None else any(
            isinstance(v, torch.Tensor) and v.requires_grad for v in [*args, *kwargs.values()])
        self.mode = "train" if torch.is_grad_enabled() and wants_grad else "eval"
        pos = []
        for i, a in enumerate(args):
            label = names[i] if i < len(names) else f"arg{i}"
            pos.append(self._bound(a, label))
        kw = [f"{_q(k)}: {self._bound(v, k)}" for k, v in kwargs.items()]
        self.returns = (f"return {fn_expr}, (" + ", ".join(pos) + ("," if len(pos) == 1 else "") + "), {"
                        + ", ".join(kw) + "}")

    def _bound(self, value: Any, label: str) -> str:
        import torch

        code = self.expr(value, label)
        if isinstance(value, torch.Tensor) and not code.isidentifier():
            var = self.local(label)
            self.lines.append(f"{var} = {code}")
            self._tensor_exprs[id(value)] = var
            return var
        return code

    def save(self) -> None:
        import torch

        if not self.name:
            raise Unrecordable("nothing to replay")
        self.rec.folder.mkdir(parents=True, exist_ok=True)
        path = self.rec.folder / self.data_file
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            torch.save(self.tensors, tmp)
            os.replace(tmp, path)
        except OSError as exc:
            raise Unrecordable(f"cannot write {path}: {exc.strerror or exc}")
        finally:
            if tmp.exists():
                tmp.unlink()
        self.tensors = {}  # written: the program's memory is its own again
        self._root_module = None

    def function_lines(self) -> list[str]:
        body = []
        by_module: dict[str, list[_Import]] = {}
        for (module, _), imp in self.imports.items():
            by_module.setdefault(module, []).append(imp)
        for module, imps in sorted(by_module.items()):
            names = ", ".join(sorted(i.name + (f" as {i.alias}" if i.alias != i.name else "") for i in imps))
            file = imps[0].file
            where = f"  # {_comment(Path(os.path.relpath(file, self.rec.folder)).as_posix())}" \
                if file and imps[0].root else ""
            body.append(f"from {module} import {names}{where}")
        if body:
            body.append("")
        body.append(f"tensors = load_tensors(HERE / {_q(self.data_file)})")
        if self._modules:
            body.append("torch.manual_seed(0)  # what the constructors draw, where no state was stored")
        body += self.lines
        body.append(self.returns)
        ran = (" The program ran it in train mode (grad on): analyze it with --train to trace it as it ran."
               if self.mode == "train" else "")
        doc = _wrap('"""' + _docstring(f"{self.what}, compiled at {self.compiled_at}: its first call.{ran}") + '"""',
                    "    ")
        notes = [line for n in self.notes for line in _wrap(_comment(n), "    # ", "    #   ")]
        return [f"def mend_target_{self.name}():", *doc, *notes, *(f"    {line}" if line else "" for line in body)]


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


def _state_bytes(sd: dict) -> int:
    seen = set()
    total = 0
    for t in sd.values():
        try:
            key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        except Exception:  # no storage to name (a tensor subclass, a meta or sparse tensor): its identity
            key = (id(t), _nbytes(t))
        if key not in seen:
            seen.add(key)
            total += key[1]
    return total


def parameter_names(fn: Any, skip: int = 0) -> list[str]:
    """The positional parameter names of ``fn`` (after the first ``skip``), for naming inputs."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names[skip:]
