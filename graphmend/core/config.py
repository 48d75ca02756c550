"""``[tool.mend]`` in pyproject.toml, merged with command-line flags.

Keys: ``targets`` (["pkg.mod:fn", "path/file.py:fn"]), ``select``, ``ignore``,
``exclude`` (globs), ``timeout`` (seconds per target), ``memory_limit`` (per worker: "4G",
"512M"), ``baseline`` (path),
``all_functions`` (bool), ``train`` (bool: targets run in train mode) or ``modes``
(["eval", "train"]: both), ``compiled_autograd`` (bool: train mode traces the backward too),
``nested_graph_breaks`` (bool: Dynamo's option of that name; unset: torch's default),
``executor`` ("local" or "ray": where targets run) and ``ray_address`` (the cluster for "ray").
``line_length`` is not a mend key: it is the project's formatter's (``[tool.ruff] line-length``,
else ``[tool.black] line-length``, else their default 88), the width ``mend fix`` lays its code out in.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_BASELINE = ".mend-baseline.json"
DEFAULT_LINE_LENGTH = 88  # black's and ruff's
# Below this no worker can even import torch: a smaller value is a typo (4 for 4G).
MIN_MEMORY_LIMIT = 256 << 20
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt])(?:i?b)?|(b))?\s*", re.IGNORECASE)
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class ConfigError(Exception):
    """A bad pyproject.toml or flag value; the message names the file or flag."""


@dataclass(frozen=True)
class Config:
    root: Path = field(default_factory=Path.cwd)  # the folder holding pyproject.toml
    pyproject: Optional[Path] = None
    targets: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT_S
    memory_limit: Optional[int] = None  # bytes per worker; None: no limit
    baseline: str = DEFAULT_BASELINE
    all_functions: bool = False
    modes: tuple[str, ...] = ("eval",)  # run modes (graphmend.core.modes): what targets run as
    compiled_autograd: bool = False
    nested_graph_breaks: Optional[bool] = None  # Dynamo's option; None: the installed torch's default
    line_length: int = DEFAULT_LINE_LENGTH  # the formatter's, for the code fixes write
    executor: str = "local"  # where targets run: graphmend.core.executors
    ray_address: Optional[str] = None  # the Ray cluster of executor "ray"; None: RAY_ADDRESS or a local one

    def with_flags(self, **flags: Any) -> "Config":
        """Flags given on the command line (not None) win over the file."""
        given = {k: v for k, v in flags.items() if v is not None}
        if "modes" in given:
            from graphmend.core.modes import ModeError, parse_modes

            try:
                given["modes"] = parse_modes(given["modes"])
            except ModeError as exc:
                raise ConfigError(str(exc)) from None
        for key in ("select", "ignore", "exclude", "targets"):
            if key in given:
                given[key] = tuple(split_codes(given[key])) if key in ("select", "ignore") else tuple(given[key])
        return replace(self, **given)

    @property
    def project_root(self) -> Optional[Path]:
        """The folder of the pyproject.toml governing the run; None when there is none."""
        return self.root if self.pyproject is not None else None

    def rule_enabled(self, code: str) -> bool:
        """ruff-style prefix selection: ``GM1`` selects GM101, GM102, ..."""
        if self.select and not any(code.startswith(s) for s in self.select):
            return False
        return not any(code.startswith(i) for i in self.ignore)


def split_codes(values: Iterable[str] | str) -> list[str]:
    """``["GM101,GM2", "GM3"]`` -> ``["GM101", "GM2", "GM3"]``, upper-cased."""
    if isinstance(values, str):
        values = [values]
    out = []
    for v in values:
        out.extend(c.strip().upper() for c in v.split(",") if c.strip())
    return out


def parse_size(value: Any, where: str) -> int:
    """``"4G"``, ``"512M"``, ``"1.5GiB"``, ``"4g"`` or a number of bytes -> bytes. Units are
    binary (K = 1024, as ulimit and docker count); ``where`` names the flag or key in the
    ConfigError a bad value raises."""
    m = _SIZE.fullmatch(str(value)) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if m is None:
        raise ConfigError(f"{where}: {value!r} is not a size; give one like 4G, 512M or 1.5GiB")
    return int(float(m.group(1)) * _UNIT[(m.group(2) or "").lower()])


def parse_memory_limit(value: Any, where: str) -> int:
    """``parse_size`` for a worker's memory limit: at least what a worker needs to start."""
    n = parse_size(value, where)
    if n < MIN_MEMORY_LIMIT:
        m = _SIZE.fullmatch(str(value))
        hint = f" (did you mean {str(value).strip()}G?)" if m and not m.group(2) and not m.group(3) else ""
        raise ConfigError(f"{where}: {value!r} is too small: a worker needs at least 256M to start{hint}")
    return n


def find_pyproject(start: Path) -> Optional[Path]:
    start = start.resolve()
    if start.is_file():
        start = start.parent
    for d in (start, *start.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _line_length(data: dict, pyproject: Path) -> int:
    tools = data.get("tool", {})
    for tool in ("ruff", "black"):
        section = tools.get(tool) if isinstance(tools, dict) else None
        if isinstance(section, dict) and "line-length" in section:
            value = section["line-length"]
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{pyproject}: [tool.{tool}] line-length must be a positive integer")
            return value
    return DEFAULT_LINE_LENGTH


def _kind(value: Any) -> str:
    """A TOML value's type in the file's words, for an error."""
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _boolean(v: Any) -> bool:
    return isinstance(v, bool)


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def _text(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


# key -> (the check of its value, what the error says it must be)
_TYPES: dict[str, tuple[Any, str]] = {
    "targets": (_strings, "an array of strings"), "select": (_strings, "an array of strings"),
    "ignore": (_strings, "an array of strings"), "exclude": (_strings, "an array of strings"),
    "modes": (_strings, "an array of strings"),
    "timeout": (_positive, "a positive number (seconds)"),
    # parse_size says what is wrong with a size, whatever its type
    "memory_limit": (lambda v: True, ""), "memory-limit": (lambda v: True, ""),
    "baseline": (_text, "a path (a non-empty string)"),
    "all_functions": (_boolean, "true or false"), "all-functions": (_boolean, "true or false"),
    "train": (_boolean, "true or false"), "compiled_autograd": (_boolean, "true or false"),
    "nested_graph_breaks": (_boolean, "true or false"),
    "executor": (lambda v: v in ("local", "ray") and isinstance(v, str), '"local" or "ray"'),
    "ray_address": (_text, "an address (host:port, ray://...)"),
}
_KNOWN = frozenset(_TYPES)
_ALIASES = (("memory_limit", "memory-limit"), ("all_functions", "all-functions"))


def _inside_root(value: str, pyproject: Path) -> str:
    """A baseline the config names lies inside the project: a repository's pyproject.toml must
    not make ``--update-baseline`` write anywhere else (``--baseline`` may: the user typed it)."""
    root = pyproject.parent
    path = root / value
    try:
        path.resolve().relative_to(root.resolve())
        Path(os.path.normpath(path)).relative_to(os.path.normpath(root))
    except ValueError:
        raise ConfigError(f"{pyproject}: [tool.mend] baseline {value!r} is outside the project folder {root}; "
                          "give a path inside it (or --baseline for a file elsewhere)") from None
    return value


def load_config(paths: Sequence[str | os.PathLike[str]] = (), config_file: Optional[Path] = None) -> Config:
    """The config that governs ``paths``: the nearest pyproject.toml above the first
    path (or the working directory)."""
    pyproject = config_file or find_pyproject(Path(paths[0]) if paths else Path.cwd())
    if pyproject is None:
        return Config()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{pyproject}: cannot read [tool.mend]: {exc}") from None
    tools = data.get("tool", {})
    if not isinstance(tools, dict):
        raise ConfigError(f"{pyproject}: tool must be a table ([tool.mend]), not {_kind(tools)}")
    section = tools.get("mend", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{pyproject}: [tool.mend] must be a table, not {_kind(section)}")
    cfg = Config(root=pyproject.parent, pyproject=pyproject, line_length=_line_length(data, pyproject))
    unknown = sorted(set(section) - _KNOWN)
    if unknown:
        raise ConfigError(f"{pyproject}: unknown key(s) in [tool.mend]: {', '.join(unknown)}")
    for a, b in _ALIASES:
        if a in section and b in section:
            raise ConfigError(f"{pyproject}: [tool.mend] give {a} or {b}, not both")
    # every value's type first: a wrong one is named with its key, never used as something else
    for key, value in section.items():
        check, expected = _TYPES[key]
        if not check(value):
            got = repr(value) if isinstance(value, str) else _kind(value)
            raise ConfigError(f"{pyproject}: [tool.mend] {key} must be {expected}, not {got}")
    kwargs: dict[str, Any] = {}
    for key in ("targets", "select", "ignore", "exclude"):
        if key in section:
            value = section[key]
            kwargs[key] = tuple(split_codes(value)) if key in ("select", "ignore") else tuple(value)
    if "timeout" in section:
        kwargs["timeout"] = float(section["timeout"])
    memory = section.get("memory_limit", section.get("memory-limit"))
    if memory is not None:
        kwargs["memory_limit"] = parse_memory_limit(memory, f"{pyproject}: [tool.mend] memory_limit")
    if "baseline" in section:
        kwargs["baseline"] = _inside_root(section["baseline"], pyproject)
    af = section.get("all_functions", section.get("all-functions"))
    if af is not None:
        kwargs["all_functions"] = af
    kwargs.update(_modes(section, pyproject))
    if "executor" in section:
        kwargs["executor"] = section["executor"]
    if "ray_address" in section:
        kwargs["ray_address"] = section["ray_address"].strip()
    return replace(cfg, **kwargs)


def _modes(section: dict, pyproject: Path) -> dict[str, Any]:
    from graphmend.core.modes import ModeError, parse_modes

    out: dict[str, Any] = {}  # (the types are checked already)
    if "train" in section and "modes" in section:
        raise ConfigError(f"{pyproject}: [tool.mend] give train or modes, not both")
    if section.get("train"):
        out["modes"] = ("train",)
    if "modes" in section:
        try:
            out["modes"] = parse_modes(section["modes"], f"{pyproject}: [tool.mend] modes")
        except ModeError as exc:
            raise ConfigError(str(exc)) from None
    for key in ("compiled_autograd", "nested_graph_breaks"):
        if key in section:
            out[key] = section[key]
    return out
