"""What every command shares: output files, formats, exit codes, progress, torch checks.

Nothing here imports torch.
"""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from enum import Enum
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import typer

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

TORCH_INSTALL_HINT = 'pip install "graphmend[torch]"  (or: pip install torch)'


class Format(str, Enum):
    text = "text"
    json = "json"
    md = "md"
    html = "html"
    sarif = "sarif"
    github = "github"


def fail(message: str) -> "typer.Exit":
    """A usage or environment error: one line on stderr, exit 2, never a traceback."""
    typer.echo(f"mend: error: {message}", err=True)
    return typer.Exit(EXIT_ERROR)


MEMORY_LIMIT_HELP = ("Memory each worker may use, e.g. 4G or 512M (K/M/G/T, binary); "
                     "default: no limit, or [tool.mend] memory_limit.")


def memory_limit_flag(value: Optional[str]) -> Optional[int]:
    """``--memory-limit`` in bytes (None when not given); a bad value is a usage error."""
    if value is None:
        return None
    from graphmend.config import ConfigError, parse_memory_limit

    try:
        return parse_memory_limit(value, "--memory-limit")
    except ConfigError as exc:
        raise fail(str(exc))


def check_paths(paths: Sequence[Path]) -> None:
    for p in paths:
        if not p.exists():
            raise fail(f"path does not exist: {p}")


def torch_version() -> Optional[str]:
    """The installed torch's version without importing torch."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("torch")
    except PackageNotFoundError:
        return None


def require_torch(command: str) -> str:
    v = torch_version()
    if v is None:
        raise fail(f"'mend {command}' needs PyTorch, which is not installed; install it with: {TORCH_INSTALL_HINT}")
    return v


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file in the same folder and rename, keeping an existing file's mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def emit(text: str, output: Optional[Path]) -> None:
    """Machine-readable output goes to stdout or ``--output``."""
    if output is not None:
        try:
            write_atomic(output, text if text.endswith("\n") else text + "\n")
        except OSError as exc:
            raise fail(f"cannot write --output {output}: {exc.strerror or exc}")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()


def show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


@contextmanager
def progress_bar(description: str, total: int, enabled: bool) -> Iterator["Progressor"]:
    """A rich progress bar on stderr when ``enabled``; a no-op otherwise (quiet, non-TTY)."""
    if not enabled or total <= 1:
        yield Progressor(None, None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("{task.fields[item]}"),
                  console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(description, total=total, item="")
        yield Progressor(progress, task)


@contextmanager
def progress_hook(quiet: bool) -> Iterator[Callable[[str, int], Callable[[str], None]]]:
    """The ``progress(description, total) -> advance(item)`` hook stages take (stages never
    print); every bar it opens is closed when the block ends."""
    enabled = show_progress(quiet)
    with ExitStack() as stack:
        def progress(description: str, total: int) -> Callable[[str], None]:
            return stack.enter_context(progress_bar(description, total, enabled)).advance

        yield progress


class Progressor:
    def __init__(self, progress, task):
        self._progress, self._task = progress, task

    def advance(self, item: str = "") -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, item=item)


def render_or_fail(report, fmt: str, output: Optional[Path]) -> None:
    from reports import render

    try:
        text = render(report, fmt, color=output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    except ValueError as exc:
        raise fail(str(exc))
    emit(text, output)
