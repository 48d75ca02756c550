"""What a capture or a verification found, kept by everything it depended on, so that a
second ``mend fix`` with nothing changed reuses every verdict and a change to one file
re-runs only the targets that ran it.

An entry's key is a digest of its inputs: the target (file, function, run mode and the
options that change what a run sees), the installed torch / transformers / Python, and
mend's own code (its version alone does not change while a checkout is edited). A capture
entry also lists the source files the target ran, with a digest of each: it is used only
while every one still reads the same. Entries are JSON files under ``$MEND_CACHE_DIR``, else
``$XDG_CACHE_HOME/graphmend`` (``~/.cache/graphmend``): never in the user's tree, which
``mend fix`` without ``--write`` must leave as it found it. A cache that cannot be read or
written, or an entry of another shape, is a cache miss, never an error.

Entries hold whole source files and decide what ``mend fix --write`` writes, so the folder is
private: created 0700, entries 0600, and a folder that is not the user's own or that group or
others may write is not used at all (``refusal``: as ssh ignores a loose ``~/.ssh``), nor is
an entry some other user wrote. A run then goes on uncached (every capture and verification
runs afresh, which is always correct) and the CLI says why on stderr.

What a target read is found by ``Reads``: the capture and verification workers record every
file the target opened, executed or compiled (Python's audit hooks: ``open``, ``exec``,
``compile``, so ``runpy.run_path``, ``exec(open(f).read())`` and ``torch.load`` of recorded
tensors count as well as imports), and a result is used only while all of them are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, TypeVar

ENV_DIR = "MEND_CACHE_DIR"
ENV_OFF = "MEND_NO_CACHE"  # "1": as --no-cache
# bump when the shape of an entry changes; old entries are then simply not found
SCHEMA = 3  # 3: a verdict is keyed by the texts it judged, and lists the files its runs read
_PROJECT = Path(__file__).resolve().parents[2]  # the folder holding graphmend/
_PACKAGES = ("graphmend", "tracer", "rewrites")
_code_digest: Optional[str] = None


def default_dir() -> Path:
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "graphmend"


def refusal(folder: Path) -> Optional[str]:
    """Why ``folder`` may not hold mend's cache (None: it may, or it does not exist yet and
    will be created private): it is not a folder, not the user's own, or group or others may
    write it -- whoever can write an entry there decides what ``mend fix --write`` writes."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cache folder {folder} cannot be read ({exc.strerror}): running without the cache"
    why = None
    if not stat.S_ISDIR(st.st_mode):
        why = "is not a folder"
    elif hasattr(os, "getuid") and st.st_uid != os.getuid():
        why = "is not owned by you"
    elif st.st_mode & 0o022:
        why = "is writable by group or others"
    if why is None:
        return None
    return (f"cache folder {folder} {why}: running without the cache (use a private folder: "
            f"chmod 700 it, or set {ENV_DIR})")


def digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        data = p if isinstance(p, bytes) else json.dumps(p, sort_keys=True, default=str).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def file_digest(path: str) -> Optional[str]:
    """sha256 of the file's bytes; None when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def text_digest(text: str) -> str:
    """sha256 of a text (a patched file as verification judged it)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def code_digest() -> str:
    """mend's own code: every .py file of its packages (a few hundred KiB, read once)."""
    global _code_digest
    if _code_digest is None:
        h = hashlib.sha256()
        for pkg in _PACKAGES:
            for f in sorted((_PROJECT / pkg).rglob("*.py")):
                h.update(str(f.relative_to(_PROJECT)).encode())
                h.update(f.read_bytes())
        _code_digest = h.hexdigest()
    return _code_digest


def environment() -> dict[str, Optional[str]]:
    """What a key holds of the machine: mend's code, Python's version and the versions of
    the packages a capture or a verification reads (their files are not hashed)."""
    from graphmend.core.env import package_version, python_version

    out: dict[str, Optional[str]] = {"python": python_version(), "executable": sys.executable,
                                     "mend": code_digest()}
    for pkg in ("torch", "transformers", "numpy", "sympy", "triton"):
        out[pkg] = package_version(pkg)
    # the variables torch, its libraries and mend's workers read (a target's own are not known)
    out["env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_READ)}  # type: ignore[assignment]
    return out


_ENV_READ = ("TORCH", "PYTORCH", "CUDA", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "MEND_", "PYTHON", "TRANSFORMERS",
             "HF_", "TRITON", "XDG_CACHE_HOME")


T = TypeVar("T")
# what reading an entry of another shape raises (a field missing, a list for a dict, ...)
SHAPE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError)


class Cache:
    """A folder of entries by kind and key; ``Cache(None)`` keeps nothing (``--no-cache``).
    One per run: it remembers the digests it read and what the run's captures depended on.
    A folder ``refusal`` rejects is not used (``refused`` says why)."""

    def __init__(self, folder: Optional[Path], reuse: bool = True):
        self.refused = refusal(folder) if folder is not None else None
        self.folder = None if self.refused else folder
        self.reuse = reuse  # False: entries are kept, never read (analyze keeps its captures for fix)
        # target name -> (its capture's key, path -> digest of each file it ran), this run
        self.captured: dict[str, tuple[str, dict[str, str]]] = {}
        self._digests: dict[str, Optional[str]] = {}
        self._environment: Optional[dict[str, Optional[str]]] = None
        self._private = False  # the folder is known to exist as 0700

    @classmethod
    def for_run(cls, enabled: bool = True, reuse: bool = True) -> "Cache":
        if not enabled or os.environ.get(ENV_OFF) == "1":
            return cls(None)
        return cls(default_dir(), reuse)

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    def key(self, kind: str, *parts: Any) -> str:
        if self._environment is None:
            self._environment = environment()
        return digest(SCHEMA, kind, self._environment, *parts)

    def _path(self, kind: str, key: str) -> Path:
        assert self.folder is not None
        return self.folder / f"v{SCHEMA}" / kind / key[:2] / f"{key}.json"

    def get(self, kind: str, key: str, convert: Optional[Callable[[dict[str, Any]], T]] = None) -> Optional[Any]:
        """The entry (a dict), or ``convert(entry)``; None when there is none, it is not the
        user's, or it has another shape (``convert`` raised one of SHAPE_ERRORS)."""
        if self.folder is None or not self.reuse:
            return None
        try:
            with open(self._path(kind, key), "rb") as f:
                st = os.fstat(f.fileno())
                if (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o022:
                    return None  # written by someone else: not ours to trust
                value = json.loads(f.read().decode("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(value, dict):
            return None
        if convert is None:
            return value
        try:
            return convert(value)
        except SHAPE_ERRORS:
            return None

    def _folder(self, path: Path) -> None:
        """Make ``path``'s folder, every folder from the cache's own down created 0700."""
        assert self.folder is not None
        if not self._private:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if refusal(self.folder):  # appeared meanwhile, someone else's
                raise PermissionError(f"{self.folder}: not private")
            os.chmod(self.folder, 0o700)  # a cache kept before entries were private
            self._private = True
        rel = path.parent.relative_to(self.folder)
        cur = self.folder
        for part in rel.parts:
            cur = cur / part
            try:
                os.mkdir(cur, 0o700)
            except FileExistsError:
                pass

    def put(self, kind: str, key: str, value: dict[str, Any]) -> None:
        """Keep ``value``: written to a temporary file (0600) renamed into place; a write
        that fails (a full disk) keeps nothing and leaves no temporary file behind."""
        if self.folder is None:
            return
        path = self._path(kind, key)
        tmp: Optional[str] = None
        try:
            data = json.dumps(value, default=str).encode("utf-8")
            self._folder(path)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # 0600
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            tmp = None
        except (OSError, ValueError, TypeError):
            pass
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def file_digest(self, path: str) -> Optional[str]:
        if path not in self._digests:
            self._digests[path] = file_digest(path)
        return self._digests[path]

    def get_valid(self, kind: str, key: str, convert: Optional[Callable[[dict[str, Any]], T]] = None) -> Optional[Any]:
        """The entry (or ``convert(entry)``, as ``get``), when every file it depended on (its
        ``deps``) still reads as it did."""
        entry = self.get(kind, key)
        if entry is None:
            return None
        deps = entry.get("deps")
        if not isinstance(deps, dict) or any(not isinstance(f, str) or self.file_digest(f) != d
                                             for f, d in deps.items()):
            return None
        if convert is None:
            return entry
        try:
            return convert(entry)
        except SHAPE_ERRORS:
            return None

    def put_valid(self, kind: str, key: str, value: dict[str, Any], files: Iterable[str]) -> Optional[dict[str, str]]:
        """Keep ``value`` with the digests of ``files``; returns them (None: one is unreadable,
        nothing kept)."""
        deps: dict[str, str] = {}
        for f in files:
            d = self.file_digest(f)
            if d is None:
                return None
            deps[f] = d
        self.put(kind, key, {**value, "deps": deps})
        return deps


# -- what a run read ------------------------------------------------------------------------

_reading: Optional[set[str]] = None  # the files seen since ``watch_reads``; None: not watching
_written: set[str] = set()  # the files opened for writing meanwhile: the run's own output
_hooked = False
_SYSTEM = ("/proc/", "/sys/", "/dev/")


def _audit(event: str, args: tuple) -> None:
    seen = _reading
    if seen is None:
        return
    try:
        if event == "open":  # open(), io.open_code (imports, runpy), os.open
            path, mode, flags = args
            if isinstance(path, int):
                return
            writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & 3)
            (_written if writing else seen).add(os.path.abspath(os.fsdecode(path)))
        elif event == "exec":  # exec() and runpy of a code object: the file it was compiled from
            name = getattr(args[0], "co_filename", None)
            if isinstance(name, str) and not name.startswith("<"):
                seen.add(os.path.abspath(name))
        elif event == "compile":  # compile(source, filename): the source may have come from that file
            name = args[1]
            if isinstance(name, (str, bytes)) and not os.fsdecode(name).startswith("<"):
                seen.add(os.path.abspath(os.fsdecode(name)))
    except Exception:  # an event of another shape: never the target's problem
        pass


def watch_reads() -> None:
    """From now on, record every file this process opens for reading, executes or compiles
    (for ``reads``). The audit hook stays for the process's life; it only looks at its
    events while watching."""
    global _reading, _hooked
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    _written.clear()
    _reading = set()


def skipped_dirs() -> tuple[str, ...]:
    """Folders whose files no key lists: the standard library and mend's own (their
    versions are in every key), each ending in a separator."""
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple(os.path.join(os.path.realpath(p), "") for p in
                 {paths["stdlib"], paths["platstdlib"], *(str(_PROJECT / pkg) for pkg in _PACKAGES)})


def reads() -> list[str]:
    """The files read since ``watch_reads`` that a later run must find unchanged: regular
    files, not under ``skipped_dirs``, no compiled ``.pyc`` (its source is listed), none
    the run wrote itself (a log it reads back, a cache of its own: its output, not input)."""
    skip = skipped_dirs()
    out = set()
    written = set(_written)
    for f in list(_reading or ()):
        if f.startswith(_SYSTEM) or f.endswith(".pyc") or f in written:
            continue
        f = os.path.realpath(f)
        if not f.startswith(skip) and not f.startswith(_SYSTEM) and os.path.isfile(f):
            out.add(f)
    return sorted(out)


def reading(handle: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A worker's handler that also returns, as ``read``, every file the work read."""

    def wrapped(payload: dict[str, Any]) -> dict[str, Any]:
        watch_reads()
        out = handle(payload)
        if isinstance(out, dict):
            out["read"] = reads()
        return out

    return wrapped
