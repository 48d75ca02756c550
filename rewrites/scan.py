"""``scan_paths``: the static scan. Stdlib ``ast`` only (fast, exact positions); no torch,
no libcst. Files are parsed once, in worker processes when ``jobs > 1``; the compiled-region
analysis then runs over the small per-file indexes and filters the findings.

Positions follow the data model: ``line`` 1-based, ``col`` 0-based in characters (not
ast's UTF-8 bytes); ``end_line`` / ``end_col`` point just past the flagged expression
(exclusive). Renderers show ``col + 1``, as SARIF and editors count.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from graphmend.core.config import Config, ConfigError
from graphmend.core.model import FileError, Finding
from graphmend.core.sources import SkippedFile, SourceError, decode_source, iter_python_files, parse_failure

# ``# mend: ignore`` (every rule) or ``# mend: ignore[GM201, GM3]``; group 1 is the bracket
# as written (closing ``]`` may be missing: that is reported, not read as "every rule").
_SUPPRESS = re.compile(r"#\s*mend:\s*ignore(\[[^\]]*\]?)?")
# Worth a process pool only for this many files.
_PARALLEL_MIN_FILES = 16


@dataclass
class ScanResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    files_scanned: int = 0
    lines_scanned: int = 0


@dataclass
class FileResult:
    path: str
    index: object = None  # rewrites.file_index.FileIndex
    findings: list = field(default_factory=list)  # (Finding, func_key, needs_root)
    error: Optional[str] = None
    lines: int = 0
    bad_suppressions: list[tuple[int, str]] = field(default_factory=list)  # Suppressions.bad


def module_name(path: Path, root: Path) -> tuple[str, bool]:
    """Dotted module name of ``path`` (including the packages above ``root``) and whether
    it is a package ``__init__``."""
    if root.is_file() or path == root:
        parts = [path.stem]
        top = path.parent
    else:
        parts = list(path.relative_to(root).with_suffix("").parts)
        top = root
    while (top / "__init__.py").is_file() and top.name:
        parts.insert(0, top.name)
        top = top.parent
    is_package = bool(parts) and parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    name = ".".join(p for p in parts[:-1] if p.isidentifier())
    if parts:
        # A file no import can name (train-gpt.py, model.v2.py) still needs a name of its own:
        # its compiled regions are keyed by it. Dots escaped, so the name stays one part, and
        # not an identifier, so it is no real module's.
        leaf = parts[-1] if parts[-1].isidentifier() else parts[-1].replace("%", "%25").replace(".", "%2E")
        name = f"{name}.{leaf}" if name else leaf
    return name, is_package


@dataclass
class Suppressions:
    lines: dict[int, Optional[frozenset[str]]] = field(default_factory=dict)  # line -> None (all rules) | codes
    bad: list[tuple[int, str]] = field(default_factory=list)  # (line, why): a comment that names no rule


def _comments(text: str) -> list[tuple[int, str]]:
    """``(line, comment)`` of every ``#`` comment holding ``mend:`` (a docstring that quotes
    the syntax is no suppression); by lines when the text does not tokenize."""
    import io
    import tokenize

    try:
        return [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT and "mend:" in tok.string]
    except (tokenize.TokenError, SyntaxError):
        return [(i, line) for i, line in enumerate(text.splitlines(), 1) if "mend:" in line]


def parse_suppressions(text: str) -> Suppressions:
    """The ``# mend: ignore[...]`` comments of ``text``, each code checked against the rule
    catalog: a typo (``GM1O1``) would otherwise suppress nothing, or, unclosed, everything."""
    from rewrites.rules import check_codes

    out = Suppressions()
    for i, comment in _comments(text):
        m = _SUPPRESS.search(comment)
        if m is None:
            continue
        if m.group(1) is None:
            out.lines[i] = None
            continue
        if not m.group(1).endswith("]"):
            out.bad.append((i, f"unclosed '[' in {m.group(0).strip()!r}"))
            continue
        codes = [c.strip().upper() for c in m.group(1)[1:-1].split(",") if c.strip()]
        try:
            check_codes(codes, "# mend: ignore[...]")
        except ConfigError as exc:
            out.bad.append((i, str(exc)))
            continue
        out.lines[i] = frozenset(codes) or None
    return out


def suppressions(text: str) -> dict[int, Optional[frozenset[str]]]:
    """``{line: None (all rules) | {codes}}`` from ``# mend: ignore[...]`` comments."""
    return parse_suppressions(text).lines


def _suppressed(sup, code: str, line: int, stmt_line: int) -> bool:
    for ln in (line, stmt_line):
        if ln in sup:
            codes = sup[ln]
            if codes is None or any(code.startswith(c) for c in codes):
                return True
    return False


def _col(lines: list[str], line: int, col0: Optional[int]) -> Optional[int]:
    """ast's UTF-8 byte offset -> 0-based character column (the model's convention)."""
    if col0 is None:
        return None
    if 0 < line <= len(lines):
        text = lines[line - 1]
        if not text.isascii():
            return len(text.encode("utf-8")[:col0].decode("utf-8", "ignore"))
    return col0


def scan_source(text: str, path: str = "<string>", module: str = "", is_package: bool = False,
                enabled: Optional[frozenset[str]] = None, want_compile: bool = True) -> FileResult:
    """Scan one file's text (every function); region filtering happens in ``scan_paths``."""
    from rewrites.analyzer import FileAnalysis
    from rewrites.rules import STATIC_CODES, category_of, hooks_for

    result = FileResult(path=path, lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. in user code
            tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        result.error = parse_failure(exc, text)
        return result
    codes = STATIC_CODES if enabled is None else enabled
    fa = FileAnalysis(tree, path, module, is_package, None if enabled is None else enabled,
                      hooks_for(codes), want_compile)
    try:
        fa.run()
    except RecursionError:
        result.error = "expression nested too deeply to analyse; file skipped"
        return result
    except Exception as exc:  # a scanner bug must not stop the run: report the file, go on
        result.error = f"internal error while scanning ({type(exc).__name__}: {exc}); file skipped"
        return result
    result.index = fa.index
    parsed = parse_suppressions(text) if "mend:" in text else Suppressions()
    result.bad_suppressions = parsed.bad
    if fa.findings:
        lines = text.splitlines()
        sup = parsed.lines
        seen = set()
        for r in fa.findings:
            if sup and _suppressed(sup, r.code, r.line, r.stmt_line):
                continue
            key = (r.code, r.line, r.col0)
            if key in seen:
                continue
            seen.add(key)
            # the whole line, indentation kept: col and end_col index into it (renderers draw the caret)
            src = lines[r.line - 1].rstrip("\r\n") if 0 < r.line <= len(lines) else None
            end_col = _col(lines, r.end_line or r.line, r.end_col0)
            result.findings.append((Finding(
                rule=r.code, file=path, line=r.line, col=_col(lines, r.line, r.col0) or 0, message=r.message,
                function=r.function, category=category_of(r.code), end_line=r.end_line,
                end_col=end_col, source_line=src, fix_hint=r.fix_hint), r.func_key, r.needs_root))
    return result


def scan_file(path: str, module: str, is_package: bool, enabled: Optional[frozenset[str]]) -> FileResult:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return FileResult(path=path, error=f"cannot read: {exc.strerror or exc}")
    try:
        text = decode_source(data, path)
    except SourceError as exc:
        return FileResult(path=path, error=exc.message + "; file skipped")
    return scan_source(text, path, module, is_package, enabled, want_compile=b"compile" in data)


def _scan_chunk(chunk: list[tuple[str, str, bool]], enabled: Optional[frozenset[str]]) -> list[FileResult]:
    return [scan_file(p, m, pkg, enabled) for p, m, pkg in chunk]


def _collect_files(paths: Sequence, config: Config,
                   skipped: Optional[list[SkippedFile]] = None) -> list[tuple[str, str, bool]]:
    out, seen = [], set()
    for root in paths:
        root = Path(root)
        for f in iter_python_files([root], config.exclude, skipped):
            absolute = str(f.resolve())
            if absolute in seen:
                continue
            seen.add(absolute)
            mod, pkg = module_name(f.resolve(), root.resolve())
            out.append((absolute, mod, pkg))
    return out


def _run(files: list[tuple[str, str, bool]], enabled, jobs: int) -> list[FileResult]:
    if jobs <= 1 or len(files) < _PARALLEL_MIN_FILES:
        return _scan_chunk(files, enabled)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # Balanced chunks: big files spread round-robin, several chunks per worker.
    sizes = []
    for f in files:
        try:
            sizes.append(os.path.getsize(f[0]))
        except OSError:
            sizes.append(0)
    order = sorted(range(len(files)), key=lambda i: -sizes[i])
    n_chunks = min(len(files), jobs * 8)
    chunks: list[list] = [[] for _ in range(n_chunks)]
    for pos, i in enumerate(order):
        chunks[pos % n_chunks].append(files[i])
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    results: list[FileResult] = []
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method)) as pool:
            for part in pool.map(_scan_chunk, chunks, [enabled] * n_chunks):
                results.extend(part)
    except (OSError, RuntimeError):  # no process pool here (sandbox, broken pool): scan serially
        return _scan_chunk(files, enabled)
    return results


def _shown(path: str) -> str:
    """A path in a message: relative to the working folder when under it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def scan_paths(paths: Sequence, config: Config, jobs: int = 1) -> ScanResult:
    """Scan every ``.py`` file under ``paths``; findings only inside compiled regions
    unless ``config.all_functions``. Broken files are reported in ``errors`` and skipped.

    Raises ``ConfigError`` naming ``file:line`` for a ``# mend: ignore[...]`` comment that
    names no rule: like a bad ``--select``, a usage error, not a finding."""
    from rewrites.regions import Regions
    from rewrites.rules import STATIC_CODES

    enabled = frozenset(c for c in STATIC_CODES if config.rule_enabled(c))
    skipped: list[SkippedFile] = []
    files = _collect_files(paths, config, skipped)
    results = _run(files, None if enabled == STATIC_CODES else enabled, max(1, int(jobs or 1)))
    results.sort(key=lambda r: r.path)
    for r in results:
        if r.bad_suppressions:
            line, why = r.bad_suppressions[0]
            raise ConfigError(f"{_shown(r.path)}:{line}: {why}")
    out = ScanResult(files_scanned=len(results))
    out.errors.extend(FileError(file=s.path, message=s.message) for s in skipped)
    regions = Regions([r.index for r in results if r.index is not None])
    for r in results:
        out.lines_scanned += r.lines
        if r.error:
            out.errors.append(FileError(file=r.path, message=r.error))
            continue
        for finding, func_key, needs_root in r.findings:
            key = (r.path, func_key)
            if needs_root and key not in regions.roots:
                continue
            if config.all_functions or key in regions.region:
                out.findings.append(finding)
    out.findings.sort(key=lambda f: (f.file, f.line, f.col, f.rule))
    return out
