"""``Target`` (``graphmend.Target``: what a ``mend_target*`` function may return), and loading
a target inside a worker: import its module, call it, normalise what it returns.

Loading runs only in worker processes (it imports user code). Raises ``TargetError`` with a
message naming the target for everything the user can get wrong.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from graphmend.core.worker import out_of_memory


@dataclass
class Target:
    """What a ``mend_target*`` function may return instead of a plain tuple.

    ``fn(*args, **kwargs)`` is the call that gets compiled. ``inputs`` are more example
    inputs (a list of ``(args, kwargs)``) that fix verification always runs, in every mode:
    the inputs that take a rare branch (an id past the vocabulary, an empty mask), so that
    every rewritten arm runs. ``perturb`` also supplies ``(args, kwargs)`` pairs, tried only
    while a rewritten branch has not gone both ways; ``tolerance`` overrides the per-dtype
    tolerances of output comparison. ``loss(outputs)`` is the scalar train mode backwards
    through (``--train``, fix verification's train check, the bench's training step);
    without it, the sum of the floating outputs. ``calls`` are the calls capture makes after
    the first (a list of ``(args, kwargs)``, run through the same compiled function, so that
    what Dynamo specialised on recompiles: ``mend analyze --calls``); without them, calls of
    other batch and sequence sizes are derived from the first (graphmend.core.calls).
    """

    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    name: Optional[str] = None
    perturb: Optional[list] = None
    inputs: Optional[list] = None
    tolerance: Optional[dict] = None
    loss: Optional[Callable[[Any], Any]] = None
    calls: Optional[list] = None


class TargetError(Exception):
    pass


@dataclass
class LoadedTarget:
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    target: Target = field(default=None)  # type: ignore[assignment]
    module: Any = None


def module_name_for(path: Path) -> tuple[str, Path]:
    """The dotted name a file imports as, and the sys.path entry that makes it so
    (walking up through packages that have ``__init__.py``). The last part may not be an
    identifier (``model.v2.py``): ``import_target_module`` then loads the file under an alias."""
    path = path.resolve()
    parts = [path.stem]
    d = path.parent
    while (d / "__init__.py").is_file() and d.parent != d and d.name.isidentifier():
        parts.insert(0, d.name)
        d = d.parent
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts), d


class _FileAliases(importlib.abc.MetaPathFinder):
    """Module names for files Python runs but cannot import by name (``model.v2.py``,
    ``attn-fixed.py``). A finder on ``sys.meta_path`` rather than a one-off
    ``spec_from_file_location``, so that the import overlay, which asks every finder,
    serves such a file's patched text too."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[override]
        file = self.files.get(fullname)
        return importlib.util.spec_from_file_location(fullname, file) if file else None


_aliases = _FileAliases()


def alias_module_name(path: Path, package: str = "") -> str:
    """A name no real module has, the same in every worker for one file (pickled objects
    of its classes load on the other side), inside ``package`` so relative imports work."""
    stem = re.sub(r"\W", "_", path.stem)
    leaf = f"_mend_{stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    name = f"{package}.{leaf}" if package else leaf
    if _aliases not in sys.meta_path:
        sys.meta_path.append(_aliases)
    _aliases.files[name] = str(path)
    return name


def import_target_module(file: Optional[str], module: Optional[str], label: str) -> Any:
    if file:
        path = Path(file).resolve()
        name, root = module_name_for(path)
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        if not name or not path.stem.isidentifier():
            name = alias_module_name(path, name[: -len(path.stem)].rstrip(".") if name else "")
    else:
        name = module or ""
    try:
        return importlib.import_module(name)
    except BaseException as exc:
        oom = out_of_memory(exc)
        if oom:
            raise TargetError(f"{label}: {oom} while importing {file or module}") from exc
        raise TargetError(f"{label}: importing {file or module} raised {type(exc).__name__}: {exc}") from exc


def load_target(spec: dict[str, Any]) -> LoadedTarget:
    """``spec`` is a ``TargetSpec`` as a dict (``name``, ``function``, ``file``/``module``)."""
    label = spec["name"]
    mod = import_target_module(spec.get("file"), spec.get("module"), label)
    factory = getattr(mod, spec["function"], None)
    if factory is None or not callable(factory):
        raise TargetError(f"{label}: no function {spec['function']} in {spec.get('file') or spec.get('module')}")
    try:
        made = factory()
    except BaseException as exc:
        oom = out_of_memory(exc)
        if oom:
            raise TargetError(f"{label}: {oom} while calling {spec['function']}()") from exc
        raise TargetError(f"{label}: calling {spec['function']}() raised {type(exc).__name__}: {exc}") from exc
    loaded = normalise(made, label)
    loaded.module = mod
    return loaded


def normalise(made: Any, label: str) -> LoadedTarget:
    if isinstance(made, Target):
        t = made
    elif isinstance(made, tuple) and len(made) in (2, 3):
        fn, args, *rest = made
        kwargs = rest[0] if rest else {}
        if not isinstance(args, (tuple, list)):
            args = (args,)
        if not isinstance(kwargs, dict):
            raise TargetError(f"{label}: the third item a target returns must be a dict of kwargs, got {type(kwargs).__name__}")
        t = Target(fn=fn, args=tuple(args), kwargs=dict(kwargs))
    else:
        raise TargetError(f"{label}: a target must return (callable, args), (callable, args, kwargs) "
                          f"or graphmend.Target, got {type(made).__name__}")
    if not callable(t.fn):
        raise TargetError(f"{label}: the first item a target returns must be callable, got {type(t.fn).__name__}")
    return LoadedTarget(fn=t.fn, args=tuple(t.args), kwargs=dict(t.kwargs), target=t)
