"""The baseline of known graph breaks: keys, load, save, compare.

An entry is keyed by (file relative to the baseline's folder, rule, enclosing function,
source line normalised by its tokens, origin) with a count. No line numbers: moving code up or
down a file keeps its breaks known; only a count above the baseline's is new. Static
findings and dynamic breaks at the same line are keyed apart (``origin``) because a static
run never sees the dynamic ones and must not call them stale.

Pure data in, data out: no printing, no torch.
"""

from __future__ import annotations

import io
import json
import os
import tokenize
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from graphmend.core.model import CheckEntry, CheckResult, Finding, TargetResult
from graphmend.core.serial import json_text

BASELINE_VERSION = 1
MODULE_FUNCTION = "<module>"  # the "function" of code at module level

Key = tuple[str, str, str, str, str]  # (file, origin, function, rule, source)


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file."""


_WORDS = (tokenize.NAME, tokenize.NUMBER, tokenize.STRING)
_SKIP = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def normalize_source(line: Optional[str]) -> str:
    """The line's tokens, a space only between two words (``not x``, ``x if c else y``): the
    spacing a formatter changes (``0:`` / ``0 :``, re-indenting, ``f( x )``) is not a change.
    Idempotent, so a stored key normalised again is itself: baselines written with the older
    whitespace-collapsed keys are read through it (``load_baseline``) and still match. A line
    that does not tokenise to its end (an unclosed triple-quoted string) keeps the rest with
    whitespace runs collapsed."""
    text = (line or "").strip()
    out: list[str] = []
    prev = None
    end = 0  # characters of ``text`` consumed
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _SKIP:
                continue
            word = tok.type in _WORDS
            if out and (tok.type == tokenize.COMMENT or (word and prev in _WORDS)):
                out.append(" ")
            out.append(tok.string)
            prev = tok.type
            end = tok.end[1]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # unclosed brackets or string at the end of the line: the tokens so far, then the rest
    rest = " ".join(text[end:].split())
    return "".join(out) + (" " if out and rest else "") + rest


def relative_file(path: str, base_dir: Path) -> str:
    """``path`` relative to ``base_dir`` in posix form, or absolute posix when outside it."""
    p = Path(path)
    try:
        return p.resolve().relative_to(base_dir.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return p.as_posix()


NESTED_SUFFIX = "+nested"


def dynamic_origin(mode: Optional[str], nested: bool) -> str:
    """A dynamic key's origin: "dynamic" (an eval-mode break: what every baseline before run
    modes holds), "dynamic:train" (a break train mode hit), either with "+nested" when
    Dynamo's nested graph breaks were on (they resume, and so break, differently)."""
    origin = "dynamic" if mode in (None, "eval") else f"dynamic:{mode}"
    return origin + (NESTED_SUFFIX if nested else "")


def key_origin(entry: CheckEntry) -> str:
    """The key's origin: "static", or what :func:`dynamic_origin` makes of a dynamic break."""
    if entry.origin == "dynamic":
        return dynamic_origin(entry.run_mode, entry.nested_graph_breaks)
    return entry.origin


def origin_mode(origin: str) -> Optional[str]:
    """The run mode a key's origin names (None for a static finding)."""
    if origin == "static":
        return None
    return origin.removesuffix(NESTED_SUFFIX).partition(":")[2] or "eval"


def origin_kind(origin: str) -> str:
    """"static" or "dynamic": the origin a baseline entry writes."""
    return "static" if origin == "static" else "dynamic"


def origin_nested(origin: str) -> bool:
    """Whether a key's origin is a break found with nested graph breaks on."""
    return origin.endswith(NESTED_SUFFIX)


class _Lines:
    """Source lines read on demand (a finding without ``source_line``), each file once."""

    def __init__(self) -> None:
        self._cache: dict[str, list[str]] = {}

    def get(self, path: Optional[str], line: Optional[int]) -> str:
        if not path or not line:
            return ""
        if path not in self._cache:
            try:
                from graphmend.core.sources import read_source

                self._cache[path] = read_source(path).splitlines()
            except Exception:  # unreadable now: key on the empty line rather than fail the check
                self._cache[path] = []
        lines = self._cache[path]
        return lines[line - 1] if 0 < line <= len(lines) else ""


def entries_from_findings(findings: Iterable[Finding], base_dir: Path) -> list[tuple[CheckEntry, Finding]]:
    """One entry (count 1, absolute file) per finding, each beside the finding it came from."""
    lines = _Lines()
    out = []
    for f in findings:
        source = f.source_line if f.source_line is not None else lines.get(f.file, f.line)
        out.append((CheckEntry(file=str(Path(f.file).resolve()), rule=f.rule, function=f.function or MODULE_FUNCTION,
                               source=normalize_source(source), line=f.line, col=f.col, message=f.message,
                               fix_hint=f.fix_hint, origin="static", source_line=(source or "").strip() or None), f))
    return out


def entries_from_targets(targets: Iterable[TargetResult]) -> list[CheckEntry]:
    """One entry per distinct break site and run mode over all targets: two targets running
    the same model hit the same line, which is one break in the code, not two; a break both
    modes hit is one entry per mode (each mode is gated on its own). Each recompile with a
    cause (GM7xx) is an entry too, per cause and place: a new one fails the gate, and so does
    one that now reaches the recompile limit (GM706, another key)."""
    lines = _Lines()
    seen: set[tuple] = set()
    out = []
    for t in targets:
        for b in t.breaks:
            site = (b.file, b.line, b.rule, b.function, None if b.file else b.reason, t.run_mode,
                    bool(t.nested_graph_breaks))
            if site in seen:
                continue
            seen.add(site)
            source = b.source_line if b.source_line is not None else lines.get(b.file, b.line)
            # A break without a user location is keyed on Dynamo's reason instead of a line.
            out.append(CheckEntry(file=str(Path(b.file).resolve()) if b.file else "<unknown>", rule=b.rule,
                                  function=b.function or MODULE_FUNCTION,
                                  source=normalize_source(source) if b.file else normalize_source(b.reason),
                                  line=b.line, col=b.col, message=b.reason,
                                  fix_hint="; ".join(b.hints), origin="dynamic", target=t.name,
                                  run_mode=t.run_mode, nested_graph_breaks=bool(t.nested_graph_breaks),
                                  source_line=(source or "").strip() or None if b.file else None))
        for r in t.caused_recompiles:
            # keyed where the guarded value is (else the recompiled function), by the guarded
            # line's text or expression: a guard's own words hold values that change run to run
            file, line = r.place
            key_text = r.guard_source if r.guarded else r.expression or r.function
            site = (file, line, r.rule, r.function, None, t.run_mode, bool(t.nested_graph_breaks))
            if site in seen:
                continue
            seen.add(site)
            out.append(CheckEntry(file=str(Path(file).resolve()) if file else "<unknown>", rule=r.rule,
                                  function=r.function or MODULE_FUNCTION, source=normalize_source(key_text),
                                  line=line, message=r.reason, origin="dynamic", target=t.name,
                                  run_mode=t.run_mode, nested_graph_breaks=bool(t.nested_graph_breaks),
                                  source_line=(r.guard_source or "").strip() or None))
    return out


def to_baseline_key(entry: CheckEntry, base_dir: Path) -> Key:
    """The key of a current (absolute-path) entry as the baseline file writes it."""
    file = entry.file if entry.file.startswith("<") else relative_file(entry.file, base_dir)
    return (file, key_origin(entry), entry.function, entry.rule, entry.source)


# -- the file ------------------------------------------------------------------------------

def load_baseline(path: Path) -> dict[Key, int]:
    """Counts by key; a missing file is an empty baseline, a corrupt one a BaselineError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read baseline {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"baseline {path} is not valid JSON (line {exc.lineno}: {exc.msg}); "
                            "fix it or recreate it with 'mend check --update-baseline'") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise BaselineError(f"baseline {path} is not a mend baseline (no 'entries' list); "
                            "recreate it with 'mend check --update-baseline'")
    version = data.get("version", BASELINE_VERSION)
    if version != BASELINE_VERSION:
        raise BaselineError(f"baseline {path} has version {version!r}; this graphmend reads version {BASELINE_VERSION}")
    counts: dict[Key, int] = defaultdict(int)
    for i, e in enumerate(data["entries"]):
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in ("file", "rule", "function", "source")):
            raise BaselineError(f"baseline {path}: entry {i} needs string fields file, rule, function, source")
        count = e.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise BaselineError(f"baseline {path}: entry {i} has count {count!r}; counts are positive integers")
        origin = e.get("origin", "static")
        if origin not in ("static", "dynamic"):
            raise BaselineError(f"baseline {path}: entry {i} has origin {origin!r}; expected 'static' or 'dynamic'")
        # source normalised again: keys of older baselines (whitespace collapsed) match today's
        mode = e.get("mode", "eval")
        if origin == "dynamic" and mode not in ("eval", "train"):
            raise BaselineError(f"baseline {path}: entry {i} has mode {mode!r}; expected 'eval' or 'train'")
        nested = e.get("nested_graph_breaks", False)
        if origin == "dynamic" and not isinstance(nested, bool):
            raise BaselineError(f"baseline {path}: entry {i} has nested_graph_breaks {nested!r}; expected true or false")
        if origin == "dynamic":
            origin = dynamic_origin(mode, nested)
        counts[(e["file"], origin, e["function"], e["rule"], normalize_source(e["source"]))] += count
    return dict(counts)


def dump_baseline(counts: dict[Key, int]) -> str:
    """Sorted, one field per line, trailing newline: the same breaks always give the same bytes."""
    entries = [{"file": k[0], "rule": k[3], "function": k[2], "source": k[4],
                "origin": origin_kind(k[1]),
                **({"mode": origin_mode(k[1])} if origin_mode(k[1]) not in (None, "eval") else {}),
                **({"nested_graph_breaks": True} if origin_nested(k[1]) else {}), "count": n}
               for k, n in sorted(counts.items()) if n > 0]
    return json_text({"version": BASELINE_VERSION, "tool": "graphmend", "entries": entries}) + "\n"


# -- comparing -----------------------------------------------------------------------------

def compare(current: Sequence[CheckEntry], baseline: dict[Key, int], base_dir: Path,
            in_scope: Callable[[Key], bool], baseline_name: str) -> CheckResult:
    """New = occurrences beyond the baseline's count for their key; stale = baseline counts
    above what was found, for keys ``in_scope`` (the files and origins this run looked at).

    Which of several same-key occurrences is "new" cannot be known; the later ones in the
    file are reported, as added code most often follows the code it copies."""
    groups: dict[Key, list[CheckEntry]] = defaultdict(list)
    for e in current:
        groups[to_baseline_key(e, base_dir)].append(e)
    result = CheckResult(baseline=baseline_name)
    for key in sorted(groups):
        found = sorted(groups[key], key=lambda e: (e.line or 0, e.col or 0))
        known = min(len(found), baseline.get(key, 0))
        result.known += known
        result.new.extend(found[known:])
    for key in sorted(baseline):
        if not in_scope(key):
            continue
        missing = baseline[key] - len(groups.get(key, ()))
        if missing > 0:
            file, origin, function, rule, source = key
            abs_file = file if file.startswith("<") or os.path.isabs(file) else str(base_dir / file)
            result.stale.append(CheckEntry(file=abs_file, rule=rule, function=function, source=source,
                                           count=missing, origin=origin_kind(origin),
                                           run_mode=origin_mode(origin), nested_graph_breaks=origin_nested(origin)))
    result.new.sort(key=lambda e: (e.file, e.line or 0, e.col or 0, e.rule))
    return result


def updated_baseline(current: Sequence[CheckEntry], baseline: dict[Key, int], base_dir: Path,
                     in_scope: Callable[[Key], bool]) -> dict[Key, int]:
    """The baseline after ``--update-baseline``: entries this run looked at are replaced by
    what it found (pruning stale ones); entries outside its scope are kept as they were."""
    counts: dict[Key, int] = {k: n for k, n in baseline.items() if not in_scope(k)}
    found: dict[Key, int] = defaultdict(int)
    for e in current:
        found[to_baseline_key(e, base_dir)] += 1
    for k, n in found.items():
        # A dynamic break can lie in a file outside the run's scope (a target under FILES
        # calling code elsewhere): never count it twice, never lower that file's entry.
        counts[k] = n if in_scope(k) else max(counts.get(k, 0), n)
    return counts
