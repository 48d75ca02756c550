"""Target discovery: ``mend_target*`` functions found by parsing, never by importing.

A target is a top-level function whose name starts with ``mend_target`` and that takes
no required argument. Files that do not mention ``mend_target`` are not even parsed.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from graphmend.core.config import Config
from graphmend.core.model import FileError
from graphmend.core.sources import SkippedFile, SourceError, decode_source, iter_python_files, parse_failure

TARGET_PREFIX = "mend_target"


@dataclass(frozen=True)
class TargetSpec:
    """Where a target lives. Either ``file`` (a path) or ``module`` (dotted) is set."""

    name: str  # "<path relative to the analysed root>::<function>" (or "pkg.mod::fn")
    function: str
    file: Optional[str] = None  # absolute path
    module: Optional[str] = None
    line: Optional[int] = None

    @property
    def display_file(self) -> str:
        return self.file or self.module or ""


@dataclass
class Discovery:
    targets: list[TargetSpec]
    errors: list[FileError]
    files: list[Path]


def _required_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    positional = a.posonlyargs + a.args
    n_defaults = len(a.defaults)
    required = [p.arg for p in positional[: len(positional) - n_defaults]]
    required += [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    return required


def targets_in_source(text: str, path: str, name_root: Path) -> tuple[list[TargetSpec], list[FileError]]:
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # as the scan: null bytes, deep nesting
        return [], [FileError(file=path, message=parse_failure(exc, text))]
    specs, errors = [], []
    try:
        rel = Path(path).resolve().relative_to(name_root.resolve()).as_posix()
    except ValueError:
        rel = Path(path).as_posix()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.name.startswith(TARGET_PREFIX):
            continue
        name = f"{rel}::{node.name}"
        if isinstance(node, ast.AsyncFunctionDef):
            errors.append(FileError(file=path, target=name, message=f"target {name} is async; targets must be plain functions"))
            continue
        required = _required_params(node)
        if required:
            errors.append(FileError(file=path, target=name,
                                    message=f"target {name} takes required argument(s) {', '.join(required)}; "
                                            "a mend_target function must take none"))
            continue
        specs.append(TargetSpec(name=name, function=node.name, file=str(Path(path).resolve()), line=node.lineno))
    return specs, errors


def discover(paths: Sequence[str | os.PathLike[str]], config: Config) -> Discovery:
    """Targets under ``paths`` plus the explicit ``[tool.mend] targets``."""
    targets: list[TargetSpec] = []
    errors: list[FileError] = []
    skipped: list[SkippedFile] = []
    files = list(iter_python_files(paths, config.exclude, skipped))
    errors.extend(FileError(file=s.path, message=s.message) for s in skipped)
    for f in files:
        name_root = Path.cwd()
        for p in paths:
            if Path(p).is_dir() and Path(f).resolve().is_relative_to(Path(p).resolve()):
                name_root = Path(p)
                break
            if Path(p).is_file() and Path(p).resolve() == Path(f).resolve():
                name_root = Path(p).parent  # a file given directly: named by its file name
                break
        path = str(f.resolve())  # absolute, as the scan names it: a file both reject is reported once
        try:
            data = f.read_bytes()
        except OSError as exc:
            errors.append(FileError(file=path, message=f"cannot read: {exc.strerror}"))
            continue
        if TARGET_PREFIX.encode() not in data:
            continue
        try:
            text = decode_source(data, path)
        except SourceError as exc:
            errors.append(FileError(file=path, message=f"{exc.message}; file skipped"))
            continue
        found, errs = targets_in_source(text, path, name_root)
        targets.extend(found)
        errors.extend(errs)
    for ref in config.targets:
        spec, err = parse_target_ref(ref, config.root)
        if err:
            errors.append(err)
        elif spec and all(spec.name != t.name and (spec.file, spec.function) != (t.file, t.function) for t in targets):
            targets.append(spec)
    return Discovery(targets=targets, errors=errors, files=files)


def parse_target_ref(ref: str, root: Path) -> tuple[Optional[TargetSpec], Optional[FileError]]:
    """``pkg.mod:fn`` or ``path/file.py:fn`` (relative to the pyproject folder)."""
    where, sep, fn = ref.rpartition(":")
    if not sep or not where or not fn.isidentifier():
        return None, FileError(file="pyproject.toml", target=ref,
                               message=f"[tool.mend] targets: {ref!r} is not 'pkg.mod:function' or 'path/file.py:function'")
    if where.endswith(".py") or "/" in where or os.sep in where:
        path = (root / where).resolve()
        if not path.is_file():
            return None, FileError(file=str(path), target=ref, message=f"[tool.mend] targets: {ref!r}: no such file {path}")
        return TargetSpec(name=f"{where}::{fn}", function=fn, file=str(path)), None
    if not all(part.isidentifier() for part in where.split(".")):
        return None, FileError(file="pyproject.toml", target=ref, message=f"[tool.mend] targets: {where!r} is not a module name")
    return TargetSpec(name=f"{where}::{fn}", function=fn, module=where), None
