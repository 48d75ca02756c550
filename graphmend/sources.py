"""Reading user source files: encodings, BOMs and undecodable bytes handled in one place."""

from __future__ import annotations

import fnmatch
import io
import os
import tokenize
from pathlib import Path
from typing import Iterable, Iterator, Sequence

# Folders nobody wants scanned: VCS, caches, virtual environments, build output.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
     ".tox", ".nox", ".venv", "venv", "env", "node_modules", "build", "dist", ".eggs"}
)


class SourceError(Exception):
    """A file that cannot be read as Python source; the message names the file."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def decode_source(data: bytes, path: str = "<bytes>") -> str:
    """Decode like the interpreter: BOM, PEP 263 coding cookie, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # unknown encoding in a coding cookie
        raise SourceError(path, f"cannot decode: {exc}") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(path, f"not valid {encoding} text ({exc.reason if hasattr(exc, 'reason') else exc}); "
                                "declare the encoding with a '# -*- coding: ... -*-' line") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def read_source(path: str | os.PathLike[str]) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise SourceError(str(path), exc.strerror or str(exc)) from None
    return decode_source(data, str(path))


def iter_python_files(paths: Sequence[str | os.PathLike[str]],
                      exclude: Iterable[str] = ()) -> Iterator[Path]:
    """Every ``.py`` file under ``paths`` (files given directly are always yielded),
    sorted for deterministic output, minus ``exclude`` globs (matched on the path
    relative to the given root and on the bare path)."""
    excludes = list(exclude)
    seen: set[Path] = set()
    for root in paths:
        root = Path(root)
        if root.is_file():
            files = [root]
        else:
            files = []
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
                files.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
        for f in files:
            rel = f.relative_to(root) if f != root else Path(f.name)
            if excludes and root.is_dir() and is_excluded(rel, excludes):
                continue
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                yield f


def analysed_root(paths: Sequence[str | os.PathLike[str]]) -> str:
    """The folder report paths are shown relative to: the one folder given (a lone file's
    folder), else the working directory."""
    if len(paths) != 1:
        return str(Path.cwd())
    first = Path(paths[0]).resolve()
    return str(first.parent if first.is_file() else first)


def is_excluded(rel: Path, patterns: Sequence[str]) -> bool:
    """Glob match on the relative posix path (``*`` crosses folders, as in ruff's
    ``exclude``); a pattern without ``/`` also matches any single path component."""
    posix = rel.as_posix()
    parts = rel.parts
    for pat in patterns:
        pat = pat.rstrip("/")
        if fnmatch.fnmatch(posix, pat) or fnmatch.fnmatch(posix, pat + "/*"):
            return True
        if "/" not in pat and any(fnmatch.fnmatch(part, pat) for part in parts):
            return True
    return False
