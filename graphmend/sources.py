"""Reading user source files: encodings, BOMs and undecodable bytes handled in one place."""

from __future__ import annotations

import errno
import fnmatch
import io
import os
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

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


@dataclass(frozen=True)
class SkippedFile:
    """A ``*.py`` name that was not read, and why (one line a user can act on)."""

    path: str  # absolute, as found: a symlink is named, not its target
    reason: str

    @property
    def message(self) -> str:
        return f"{self.reason}; file skipped"


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFDIR: "a directory"}


def file_kind_problem(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> Optional[str]:
    """Why ``path`` must not be read as a source file, or None. Never opens it: a FIFO or a
    device named ``*.py`` would block the reader forever. With ``root`` (the folder being
    walked), a symlink whose target lies outside it is not followed, as ruff does not
    follow links out of its roots: the target is not part of what was asked for."""
    try:
        st = os.stat(path)  # follows symlinks
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        if os.path.islink(path):
            return f"dangling symlink (-> {os.readlink(path)})"
        return f"cannot read: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):
        return f"not a regular file ({_KINDS.get(stat.S_IFMT(st.st_mode), 'special file')})"
    if root is not None and os.path.islink(path):
        real, top = os.path.realpath(path), os.path.realpath(root)
        if os.path.commonpath([real, top]) != top:
            return f"symlink points outside the analysed folder (-> {real})"
    return None


def parse_failure(exc: BaseException) -> str:
    """The per-file message for a source ``ast.parse`` rejects: the scan and discovery both
    parse, and a file both reject is reported once, so they must say it in the same words."""
    if isinstance(exc, SyntaxError):
        return f"syntax error at line {exc.lineno}: {exc.msg}; file skipped"
    if isinstance(exc, (RecursionError, MemoryError)):
        return f"expression nested too deeply to parse ({type(exc).__name__}); file skipped"
    return f"cannot parse: {type(exc).__name__}: {exc}; file skipped"


def iter_python_files(paths: Sequence[str | os.PathLike[str]],
                      exclude: Iterable[str] = (),
                      skipped: Optional[list[SkippedFile]] = None) -> Iterator[Path]:
    """Every ``.py`` file under ``paths`` (files given directly are always yielded),
    sorted for deterministic output, minus ``exclude`` globs (matched on the path
    relative to the given root and on the bare path). Names that are no readable regular
    file of the tree (``file_kind_problem``) are left out and, when ``skipped`` is given,
    appended to it."""
    excludes = list(exclude)
    seen: set[Path] = set()

    def skip(f: Path, why: str) -> None:
        if skipped is not None:
            skipped.append(SkippedFile(os.path.abspath(f), why))

    for root in paths:
        root = Path(root)
        if root.is_dir():
            files = []
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
                files.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
        elif os.path.lexists(root):
            # named directly: followed wherever it points, but it must be a file
            why = file_kind_problem(root)
            if why:
                skip(root, why)
                continue
            files = [root]
        else:
            continue
        for f in files:
            rel = f.relative_to(root) if f != root else Path(f.name)
            if excludes and f != root and is_excluded(rel, excludes):
                continue
            if f != root:
                why = file_kind_problem(f, root)
                if why:
                    skip(f, why)
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
