"""Reading and writing user source files: encodings, BOMs, line endings and undecodable
bytes handled in one place (``SourceText``), atomic writes."""

from __future__ import annotations

import difflib
import errno
import fnmatch
import io
import os
import re
import signal
import stat
import sys
import tempfile
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence

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


# PEP 263: a comment on line 1 or 2 naming the encoding (the name as written, for messages)
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
# Python's own line terminators; str.splitlines also splits on \f, \v, \x1c.. and \u2028
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclass(frozen=True)
class SourceText:
    """One source file: its text as the interpreter reads it, and what it takes to turn a
    changed text back into the file's own bytes (encoding, BOM, each line's ending).

    ``text`` is decoded (BOM, PEP 263 cookie, else UTF-8), without the BOM, every line ending
    ``"\n"``; the whole pipeline works on it. ``encode(new_text)`` gives the bytes to write:
    lines the change did not touch keep their own ending, new lines take the file's usual one,
    the BOM and the declared encoding are kept."""

    path: str
    raw: bytes = field(repr=False)  # the file as read
    text: str = field(repr=False)
    encoding: str  # the codec tokenize found ("utf-8-sig" when there is a BOM)
    declared: str  # the encoding's name as the file writes it, for messages
    endings: tuple[str, ...]  # each line's terminator in the file, "" for a last line without one

    @classmethod
    def decode(cls, data: bytes, path: str = "<bytes>") -> "SourceText":
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as exc:  # unknown encoding in a coding cookie
            raise SourceError(path, f"cannot decode: {exc}") from None
        declared = _declared(data) or encoding
        try:
            decoded = data.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise SourceError(path, f"not valid {declared} text ({exc.reason if hasattr(exc, 'reason') else exc}); "
                                    "declare the encoding with a '# -*- coding: ... -*-' line") from None
        lines = _LINE.findall(decoded)
        endings = tuple(line[len(line.rstrip("\r\n")):] for line in lines)
        text = "".join(line.rstrip("\r\n") + ("\n" if e else "") for line, e in zip(lines, endings))
        return cls(path, data, text, encoding, declared, endings)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> "SourceText":
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise SourceError(str(path), exc.strerror or str(exc)) from None
        return cls.decode(data, str(path))

    @property
    def bom(self) -> bool:
        return self.encoding == "utf-8-sig"

    @property
    def newline(self) -> str:
        """The file's usual line ending (the most frequent; "\n" for a file without one)."""
        counts = Counter(e for e in self.endings if e)
        return counts.most_common(1)[0][0] if counts else "\n"

    def render(self, text: str) -> str:
        """``text`` (a changed ``self.text``) with the file's line endings and BOM back."""
        new = text.split("\n")
        last = new.pop()  # "" when text ends with a newline, else an unterminated last line
        used = {e for e in self.endings if e}
        if len(used) <= 1:  # one style in the file (the usual case): every line gets it
            out = self.newline.join(new) + (self.newline if new else "") + last
        else:  # mixed: an unchanged line keeps its own ending, a new one takes the usual one
            old = self.text.split("\n")
            if not old[-1]:
                old.pop()
            ends = [self.newline] * len(new)
            # the lines before and after the change, by position (a blank line matched out of
            # place would trade endings), then what the middle still shares
            head = 0
            while head < min(len(old), len(new)) and old[head] == new[head]:
                head += 1
            tail = 0
            while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
                tail += 1
            pairs = [(k, k) for k in range(head)] + [(len(old) - 1 - k, len(new) - 1 - k) for k in range(tail)]
            matcher = difflib.SequenceMatcher(None, old[head:len(old) - tail], new[head:len(new) - tail],
                                              autojunk=False)
            pairs += [(head + i + k, head + j + k) for i, j, n in matcher.get_matching_blocks() for k in range(n)]
            for i, j in pairs:
                ends[j] = self.endings[i] or self.newline
            out = "".join(line + e for line, e in zip(new, ends)) + last
        return ("\ufeff" if self.bom else "") + out

    def encode(self, text: str) -> bytes:
        """The bytes of the file holding ``text``; a SourceError naming the encoding when
        ``text`` cannot be written in it (or would no longer declare it)."""
        rendered = self.render(text)
        codec = "utf-8" if self.bom else self.encoding  # the BOM is already in ``rendered``
        try:
            data = rendered.encode(codec)
        except UnicodeEncodeError as exc:
            line = rendered.count("\n", 0, exc.start) + 1
            raise SourceError(self.path, f"the fixed text cannot be encoded as {self.declared}, the file's "
                                         f"encoding ({rendered[exc.start:exc.end]!r} on line {line}); not fixed") from None
        try:
            again, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError:
            again = None
        if again != self.encoding:  # e.g. a line added above the coding cookie
            raise SourceError(self.path, f"the fixed text no longer declares the file's encoding ({self.declared}) "
                                         "on its first two lines; not fixed")
        return data


def _declared(data: bytes) -> Optional[str]:
    for line in data.splitlines()[:2]:
        m = _COOKIE.match(line)
        if m:
            return m.group(1).decode("ascii")
        if not line.strip().startswith(b"#") and line.strip():
            break  # the cookie may only follow a comment line
    return None


def decode_source(data: bytes, path: str = "<bytes>") -> str:
    """Decode like the interpreter: BOM, PEP 263 coding cookie, else UTF-8; BOM dropped,
    line endings "\n"."""
    return SourceText.decode(data, path).text


def read_source(path: str | os.PathLike[str]) -> str:
    return SourceText.read(path).text


def read_report_text(path: str | os.PathLike[str]) -> str:
    """A JSON report's text, gunzipped where its name ends in ``.gz`` (kept results are
    compressed); ``OSError`` / ``UnicodeDecodeError`` as reading a file raises."""
    data = Path(path).read_bytes()
    if str(path).endswith(".gz"):
        import gzip

        try:
            data = gzip.decompress(data)
        except (EOFError, gzip.BadGzipFile) as exc:
            raise OSError(f"not a gzip file: {exc}") from None
    return data.decode("utf-8")


def split_lines(text: str) -> list[str]:
    """``text``'s lines with their endings, split where Python splits lines (``\\r\\n``,
    ``\\r``, ``\\n``): a form feed inside a line stays in it."""
    return _LINE.findall(text)


def write_source(source: SourceText, text: str) -> None:
    """Write ``text`` over the file ``source`` was read from: its encoding, BOM and line
    endings kept, atomically, its owner, group and mode kept; a symlink is written through
    (the link stays, its target gets the text). A SourceError naming the file says why not:
    the text cannot be encoded, the file changed since it was read (checked again right
    before the rename), it is read-only, it has hard links, or the write failed (a folder
    that takes no new file)."""
    data = source.encode(text)
    path = source.path
    target = os.path.realpath(path)
    try:
        current, seen = _read_with_identity(target)
    except OSError as exc:
        raise SourceError(path, f"cannot read it again ({exc.strerror or exc}); not written") from None
    if current != source.raw:
        raise SourceError(path, "changed while mend ran; not written")
    if read_only(target):
        raise SourceError(path, "read-only, not written")

    def unchanged() -> None:
        # Run by write_bytes_atomic after the temp file is complete, immediately before the
        # rename: an edit saved since the check above (in place, or by an editor's own
        # rename) changes the bytes or the inode/size/mtime. What remains is the window
        # between this stat and os.replace (no system call checks and renames at once).
        try:
            again, now = _read_with_identity(target)
            last = _identity(os.stat(target))
        except OSError:
            raise SourceError(path, "changed while mend ran (it is gone); not written") from None
        if again != source.raw or now != seen or last != seen:
            raise SourceError(path, "changed while mend ran; not written")

    try:
        write_bytes_atomic(target, data, check=unchanged)
    except OSError as exc:
        # mkstemp failing names the temp file alone: the folder takes no new file
        where = (f" (a temporary file in {os.path.dirname(exc.filename)})" if exc.filename and not exc.filename2
                 and os.path.abspath(exc.filename) not in (os.path.abspath(path), target) else "")
        raise SourceError(path, f"cannot write{where}: {exc.strerror or exc}; not written") from None


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


def _read_with_identity(path: str) -> tuple[bytes, tuple[int, int, int, int]]:
    with open(path, "rb") as fh:
        return fh.read(), _identity(os.fstat(fh.fileno()))


def read_only(path: str | os.PathLike[str]) -> bool:
    """Whether mend must leave ``path`` alone: no write permission bit set (what ruff calls
    read-only; root could write it, mend does not) or the user cannot write it (another
    owner, an immutable file)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # the write reports why
    return not (mode & 0o222) or not os.access(path, os.W_OK)


# Blocked from the temp file's creation to its rename, so that a kill or Ctrl-C never leaves
# a temp file behind: the signal stays pending and acts right after (the file then whole,
# old or new). Blocking is per thread: mend writes from the main thread; a write from another
# thread keeps the window (the kernel may hand the signal to a thread that does not block it).
_DEFERRED = tuple(s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGINT", "SIGHUP")) if s is not None)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes,
                       check: Optional[Callable[[], None]] = None) -> None:
    """Write via a temp file in the same folder and rename. An existing file keeps its owner,
    group and mode (a new file gets 0644); a symlink is written through to its target. A file
    with more than one hard link is refused (OSError EMLINK naming it): the rename would split
    the links, and writing in place instead cannot be atomic (a kill or a full disk half way
    leaves a truncated file under every name). ``check``, when given, runs right before the
    rename and may raise to abort the write (the temp file removed). SIGTERM, SIGINT and SIGHUP
    are held until the rename is done (``_DEFERRED``); SIGKILL or a crash can still leave a
    ``.NAME.*.tmp`` file."""
    path = Path(os.path.realpath(path))  # through symlinks: replacing the link itself would cut it
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        st: Optional[os.stat_result] = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and st.st_nlink > 1:
        raise OSError(errno.EMLINK, f"it has {st.st_nlink} hard links, which replacing it would split",
                      str(path))
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED) if hasattr(signal, "pthread_sigmask") else None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                if st is not None:
                    mine = os.fstat(fh.fileno())
                    if (mine.st_uid, mine.st_gid) != (st.st_uid, st.st_gid):
                        try:
                            os.fchown(fh.fileno(), st.st_uid, st.st_gid)
                        except PermissionError:
                            raise OSError(errno.EPERM, f"cannot keep its owner and group ({st.st_uid}:{st.st_gid}) "
                                                       "as this user", str(path)) from None
                # after the chown, which clears set-id bits
                os.fchmod(fh.fileno(), st.st_mode & 0o7777 if st is not None else 0o644)
                os.fsync(fh.fileno())  # the data on disk before the name points at it
            if check is not None:
                check()
            os.replace(tmp, path)
        except BaseException:  # re-raised: only the temporary file goes (Ctrl-C included)
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise
    finally:
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """``write_bytes_atomic`` of UTF-8 text (a report, a baseline: mend's own files)."""
    write_bytes_atomic(path, text.encode("utf-8"))


class OutputDirError(Exception):
    """A folder mend was asked to write into that it must not or cannot; one line naming the
    flag and the folder."""


def prepare_output_dir(folder: Path, flag: str, ours: Optional[tuple[str, str]] = None,
                       force: Optional[bool] = None) -> None:
    """Check before any work that ``folder`` (given with ``flag``) can take mend's files, and
    create it: a new or empty folder, or one holding mend's own earlier output (``ours``: the
    file that marks it and what it is), or any folder with ``force`` (None: the command has no
    --force). Never writes beside files mend did not write unless told: a typo must not mix
    into (or overwrite files of) a source folder. Raises OutputDirError."""
    if folder.exists() and not folder.is_dir():
        raise OutputDirError(f"{flag} {folder}: is a file, not a folder")
    if folder.is_dir() and not force:
        try:
            entries = [p.name for p in folder.iterdir()]
        except OSError as exc:
            raise OutputDirError(f"{flag} {folder}: cannot read it: {exc.strerror or exc}")
        if entries and not (ours and (folder / ours[0]).is_file()):
            raise OutputDirError(f"{flag} {folder}: is not empty"
                                 + (f" and holds no {ours[1]} ({ours[0]})" if ours else "")
                                 + "; give a new or empty folder"
                                 + (" or --force to write into it" if force is not None else ""))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"{flag} {folder}: cannot create it: {exc.strerror or exc}")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".mend-probe-"):
            pass
    except OSError as exc:
        raise OutputDirError(f"{flag} {folder}: cannot write in it: {exc.strerror or exc}")


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


def parse_failure(exc: BaseException, text: Optional[str] = None) -> str:
    """The per-file message for a source ``ast.parse`` rejects: the scan and discovery both
    parse, and a file both reject is reported once, so they must say it in the same words.
    ``text``, the source, says where a NUL byte is and whether the file is only newer syntax."""
    nul = text.find("\0") if text is not None else -1
    if nul >= 0 and (isinstance(exc, ValueError) or getattr(exc, "lineno", 0) is None):
        line = text.count("\n", 0, nul) + 1
        col = nul - (text.rfind("\n", 0, nul) + 1) + 1
        return f"contains a NUL byte (line {line}, column {col}); file skipped"
    if isinstance(exc, SyntaxError) and text is not None:
        import sys

        from graphmend.core.grammar import newer_syntax

        what = newer_syntax(text, exc.lineno)
        if what:
            v = sys.version_info
            return f"uses syntax newer than this Python ({v.major}.{v.minor}) at line {exc.lineno}: {what}; file skipped"
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
    """The folder that was analysed: the one folder given (a lone file's folder), else the
    working directory."""
    if len(paths) != 1:
        return str(Path.cwd())
    first = Path(paths[0]).resolve()
    return str(first.parent if first.is_file() else first)


def git_top(folder: str | os.PathLike[str]) -> Optional[Path]:
    """The git top level at or above ``folder`` (``.git`` a folder, or a file in worktrees and
    submodules; no git process), or None."""
    base = Path(folder).resolve()
    for d in (base, *base.parents):
        if (d / ".git").exists():
            return d
    return None


def own_root() -> Path:
    """Where the user's own files are: the git top level of the working directory, else the
    working directory itself."""
    cwd = Path.cwd().resolve()
    return git_top(cwd) or cwd


def installed(path: str | os.PathLike[str]) -> bool:
    """A file pip or the interpreter put there (site-packages, dist-packages, the Python
    prefix): never the user's to rewrite in place."""
    real = os.path.realpath(path)
    if {"site-packages", "dist-packages"} & set(Path(real).parts):
        return True
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if p}
    return any(real.startswith(p + os.sep) for p in prefixes)


def users_file(path: str | os.PathLike[str], root: Optional[Path] = None) -> bool:
    """A file of the user's repository (under ``own_root()``, or ``root``) that is not installed."""
    real = os.path.realpath(path)
    top = str(root if root is not None else own_root())
    return real.startswith(top.rstrip(os.sep) + os.sep) and not installed(real)


def report_root(paths: Sequence[str | os.PathLike[str]], config_root: Optional[Path] = None) -> str:
    """The folder every report's paths are relative to (``Report.root``): the repository
    root, so that ``--format github`` and SARIF locations attach to files in CI
    (``mymodels/block.py``, not ``block.py``, when ``mymodels/`` is analysed). That is the
    git top level above the analysed folder (``.git`` a folder, or a file in worktrees and
    submodules; no git process), else ``config_root`` (the pyproject.toml's folder) when the
    analysed folder lies under it, else the analysed folder itself."""
    base = Path(analysed_root(paths))
    top = git_top(base)
    if top is not None:
        return str(top)
    if config_root is not None:
        top = config_root.resolve()
        if top == base or top in base.parents:
            return str(top)
    return str(base)


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
