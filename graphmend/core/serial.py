"""JSON of the data model's dataclasses (graphmend.core.model): to and from plain dicts,
generically over their fields and type hints, and the text every report file is written in."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import types
import typing
from typing import Any, Optional


def json_text(data: Any, indent: Optional[int] = 2) -> str:
    """``data`` as JSON whose non-ASCII text stays readable, and which UTF-8 can always carry:
    a lone surrogate (os.fsdecode's stand-in for a byte of a file name that is not UTF-8) is
    written as its ``\\udcff`` escape, which reads back as the same string."""
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)


def to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(types, "UnionType", typing.Union)):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(args[0], value) if len(args) == 1 else value
    if origin is list:
        (inner,) = typing.get_args(tp) or (Any,)
        return [_convert(inner, v) for v in value]
    if origin is dict:
        return dict(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_dict(tp, value)
    return value


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Build ``cls`` from its JSON form; unknown keys are ignored (newer minor versions)."""
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
    return cls(**kwargs)
