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
written is a cache miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Optional

ENV_DIR = "MEND_CACHE_DIR"
ENV_OFF = "MEND_NO_CACHE"  # "1": as --no-cache
# bump when the shape of an entry changes; old entries are then simply not found
SCHEMA = 2  # 2: a verdict keeps the breaks its re-trace exposed (the follow-up rounds)
_PROJECT = Path(__file__).resolve().parents[2]  # the folder holding graphmend/
_PACKAGES = ("graphmend", "tracer", "rewrites")
_code_digest: Optional[str] = None


def default_dir() -> Path:
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "graphmend"


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


class Cache:
    """A folder of entries by kind and key; ``Cache(None)`` keeps nothing (``--no-cache``).
    One per run: it remembers the digests it read and what the run's captures depended on."""

    def __init__(self, folder: Optional[Path], reuse: bool = True):
        self.folder = folder
        self.reuse = reuse  # False: entries are kept, never read (analyze keeps its captures for fix)
        # target name -> (its capture's key, path -> digest of each file it ran), this run
        self.captured: dict[str, tuple[str, dict[str, str]]] = {}
        self._digests: dict[str, Optional[str]] = {}
        self._environment: Optional[dict[str, Optional[str]]] = None

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

    def get(self, kind: str, key: str) -> Optional[dict[str, Any]]:
        if self.folder is None or not self.reuse:
            return None
        try:
            value = json.loads(self._path(kind, key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return value

    def put(self, kind: str, key: str, value: dict[str, Any]) -> None:
        if self.folder is None:
            return
        path = self._path(kind, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{id(value)}.tmp")
            tmp.write_text(json.dumps(value, default=str), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass

    def file_digest(self, path: str) -> Optional[str]:
        if path not in self._digests:
            self._digests[path] = file_digest(path)
        return self._digests[path]

    def get_valid(self, kind: str, key: str) -> Optional[dict[str, Any]]:
        """The entry, when every file it depended on (its ``deps``) still reads as it did."""
        entry = self.get(kind, key)
        if entry is None:
            return None
        deps = entry.get("deps")
        if not isinstance(deps, dict) or any(self.file_digest(f) != d for f, d in deps.items()):
            return None
        return entry

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
