"""What every command shares: output files, formats, exit codes, progress, torch checks.

Nothing here imports torch.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack, contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence

import typer

from reports.wording import plural, printable

if TYPE_CHECKING:
    from graphmend.core.config import Config

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


def say(message: str) -> None:
    """A line on stderr: names from the user's files in it shown, never obeyed by the terminal."""
    typer.echo(printable(message), err=True)


def fail(message: str) -> "typer.Exit":
    """A usage or environment error: one line on stderr, exit 2, never a traceback."""
    say(f"mend: error: {message}")
    return typer.Exit(EXIT_ERROR)


def warn_refused_cache(enabled: bool = True) -> None:
    """One line on stderr when mend's cache folder is not private (graphmend.core.cache.refusal):
    the run goes on without it -- the cache only saves time, and a run without it verifies
    everything afresh -- rather than trust entries someone else could have written."""
    from graphmend.core.cache import Cache

    why = Cache.for_run(enabled).refused
    if why:
        typer.echo(f"mend: warning: {why}", err=True)


MEMORY_LIMIT_HELP = ("Memory each worker may use, e.g. 4G or 512M (K/M/G/T, binary); "
                     "default: no limit, or [tool.mend] memory_limit.")


def memory_limit_flag(value: Optional[str]) -> Optional[int]:
    """``--memory-limit`` in bytes (None when not given); a bad value is a usage error."""
    if value is None:
        return None
    from graphmend.core.config import ConfigError, parse_memory_limit

    try:
        return parse_memory_limit(value, "--memory-limit")
    except ConfigError as exc:
        raise fail(str(exc))


def rule_codes_flag(values: Optional[Sequence[str]], flag: str) -> Optional[list[str]]:
    """``--select`` / ``--ignore`` / ``--rule`` split into codes (None when not given); a code
    that selects no rule is a usage error naming the flag."""
    if values is None:
        return None
    from graphmend.core.config import ConfigError, split_codes
    from rewrites.rules import check_codes

    codes = split_codes(values)
    try:
        check_codes(codes, flag)
    except ConfigError as exc:
        raise fail(str(exc))
    return codes


def load_checked_config(paths: Sequence, **flags) -> "Config":
    """``load_config(paths).with_flags(**flags)`` with every rule code checked against the
    catalog: the file's ``select`` / ``ignore`` (named as ``file: [tool.mend] key``) and the
    ``select`` / ``ignore`` flags. Any bad value is a usage error (exit 2)."""
    from graphmend.core.config import ConfigError, load_config
    from rewrites.rules import check_codes

    for key in ("select", "ignore"):
        flags[key] = rule_codes_flag(flags.get(key), f"--{key}")
    try:
        config = load_config(paths)
        for key in ("select", "ignore"):
            check_codes(getattr(config, key), f"{config.pyproject}: [tool.mend] {key}")
        return config.with_flags(**flags)
    except ConfigError as exc:
        raise fail(str(exc))


class Executor(str, Enum):
    local = "local"
    ray = "ray"


EXECUTOR_HELP = ("Where targets run: local (worker processes of this one) or ray (each target job a Ray task, "
                 "-j of them in flight); default local, or [tool.mend] executor.")
RAY_ADDRESS_HELP = ("The Ray cluster of --executor ray (default: RAY_ADDRESS, else [tool.mend] ray_address, "
                    "else a local Ray instance of -j CPUs).")


def executor_choice(config: "Config", executor: Optional[Executor], ray_address: Optional[str],
                    needs: str = "") -> tuple[str, Optional[str]]:
    """(executor, Ray address) of the run: the flags, else RAY_ADDRESS, else the config. ``needs``
    names what the flags need when the command runs no targets (e.g. ``--dynamic``): either
    flag is then a usage error. Ray is checked for, not imported."""
    if needs and (executor is not None or ray_address is not None):
        raise fail(f"--executor and --ray-address choose where targets run: they need {needs}")
    if needs:
        return "local", None
    name = executor.value if executor is not None else config.executor
    address = ray_address or os.environ.get("RAY_ADDRESS") or config.ray_address
    if name != "ray":
        if ray_address is not None:
            raise fail("--ray-address names the cluster of --executor ray: give --executor ray too")
        return "local", None
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        from graphmend.core.executors import RAY_INSTALL_HINT

        raise fail(f"--executor ray needs Ray, which is not installed; install it with: {RAY_INSTALL_HINT}")
    return name, address


@contextmanager
def executor_scope(name: str, address: Optional[str], jobs: int) -> Iterator[None]:
    """The block's jobs run on executor ``name`` (graphmend.core.executors); a Ray instance
    started here is shut down at the end, and one that cannot be reached is a usage error."""
    if name == "local":
        yield
        return
    from graphmend.core.executors import ExecutorError, RayExecutor
    from graphmend.core.jobs import use_executor

    try:
        ex = RayExecutor(address, num_cpus=jobs)
    except ExecutorError as exc:
        raise fail(str(exc))
    try:
        with use_executor(ex):
            yield
    finally:
        ex.close()


def check_paths(paths: Sequence[Path]) -> None:
    for p in paths:
        if not p.exists():
            raise fail(f"path does not exist: {p}")


def target_paths(paths: Sequence[Path]) -> tuple[list[Path], tuple[str, ...]]:
    """``FILE::FUNCTION`` arguments (as ``mend bench`` and the listings name targets) as the
    files and the target functions to run in them; plain paths run every target."""
    named = [str(p).rpartition("::") for p in paths]
    if not any(sep for _, sep, _ in named):
        return list(paths), ()
    plain = [str(p) for p, (_, sep, _) in zip(paths, named) if not sep]
    if plain:
        raise fail(f"{plain[0]}: name its targets as FILE::FUNCTION too, or give no path that way")
    for path, _, function in named:
        if not function.isidentifier():
            raise fail(f"{path}::{function}: a target is named FILE::FUNCTION, its mend_target function")
    return list(dict.fromkeys(Path(path) for path, _, _ in named)), tuple(dict.fromkeys(f for _, _, f in named))


TRAIN_HELP = "Run targets in train mode: .train(), grad on, a backward after each call ([tool.mend] train)."
MODE_HELP = "Run modes: eval (.eval() under no_grad, the default), train, or eval,train for both ([tool.mend] modes)."
COMPILED_AUTOGRAD_HELP = "Train mode traces the backward too (compiled autograd) and reports its breaks."
NESTED_HELP = ("on|off: run targets with Dynamo's nested_graph_breaks on or off (default: torch's, or "
               "[tool.mend] nested_graph_breaks).")


def nested_flag(value: Optional[str]) -> Optional[bool]:
    """``--nested-graph-breaks on|off`` as a bool (None: not given)."""
    if value is None:
        return None
    choice = {"on": True, "true": True, "off": False, "false": False}.get(value.strip().lower())
    if choice is None:
        raise fail(f"--nested-graph-breaks {value}: expected on or off")
    return choice


def require_nested_support(config: "Config") -> None:
    """A nested_graph_breaks setting needs a torch that has the option (imports torch)."""
    if config.nested_graph_breaks is None:
        return
    from tracer.capture import nested_graph_breaks_supported

    if not nested_graph_breaks_supported():
        import torch

        raise fail(f"nested graph breaks: torch {torch.__version__} has no torch._dynamo.config.nested_graph_breaks "
                   "(drop --nested-graph-breaks or [tool.mend] nested_graph_breaks)")


def run_modes_flag(train: bool, mode: Optional[str]) -> Optional[str]:
    """``--train`` / ``--modes`` as the value ``Config.with_flags(modes=...)`` takes (None: the
    config's); both given must agree."""
    if train and mode is not None and mode.strip().lower() != "train":
        raise fail(f"--train and --modes {mode} disagree: give one")
    return "train" if train else mode


def require_torch(command: str, otherwise: str = "") -> str:
    """The installed torch's version, or a usage error saying how to install it (and
    ``otherwise``: what runs without it)."""
    from graphmend.core.env import torch_version

    v = torch_version()
    if v is None:
        raise fail(f"'mend {command}' needs PyTorch, which is not installed; install it with: {TORCH_INSTALL_HINT}"
                   + (f"; {otherwise}" if otherwise else ""))
    return v


def emit(text: str | bytes, output: Optional[Path]) -> None:
    """Machine-readable output goes to stdout or ``--output``; bytes (a diff of files in
    their own encodings and line endings) go out as they are."""
    nl = "\n" if isinstance(text, str) else b"\n"
    if not text.endswith(nl):
        text += nl
    if output is not None:
        from graphmend.core.sources import write_bytes_atomic

        try:
            write_bytes_atomic(output, text.encode("utf-8") if isinstance(text, str) else text)
        except OSError as exc:
            raise fail(f"cannot write --output {output}: {exc.strerror or exc}")
    elif isinstance(text, str):
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(text)
        sys.stdout.buffer.flush()


def show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


def progress_lines(quiet: bool) -> bool:
    """Output redirected (CI, a log file): a plain line per finished item instead of a bar,
    so a long run is not minutes of silence."""
    return not quiet and not sys.stderr.isatty()


def outcome_note(outcome) -> str:
    """What a progress line says about a finished item: a target's capture (its results, one
    per run mode), a file's planned rewrites or a target's verification (a FixTarget); ""
    for anything else."""
    if isinstance(outcome, (list, tuple)) and outcome and all(hasattr(r, "breaks") for r in outcome):
        parts = []
        for r in outcome:
            mode = f"{r.run_mode}: " if len(outcome) > 1 else ""
            # the targets table's words and figures: distinct breaks and recompiles apart
            what = f"{plural(len(r.breaks), 'break')}, {plural(len(r.recompiles), 'recompile')}"
            parts.append(f"{mode}{what}, error: {r.error}" if r.error else f"{mode}{what}")
        return "; ".join(parts) + f" ({sum(r.duration_s for r in outcome):.1f} s)"
    if hasattr(outcome, "breaks_before") and hasattr(outcome, "breaks_after"):
        note = f"breaks {outcome.breaks_before} -> {outcome.breaks_after}"
        return note + (f", error: {outcome.error}" if outcome.error else "")
    if hasattr(outcome, "applied") and hasattr(outcome, "refused"):  # a file's planned rewrites
        n = len(outcome.applied)
        note = f"{n} rewrite{'s' if n != 1 else ''}" + (f", {len(outcome.refused)} refused" if outcome.refused else "")
        return note + (f", error: {outcome.error}" if outcome.error else "")
    return ""


class ProgressLines:
    """``[3/40] capturing corpus/moe.py::mend_target_x: 2 breaks (4.1 s)`` on stderr per
    finished item; items may finish in worker threads."""

    def __init__(self, description: str, total: int):
        import threading

        self.description, self.total, self.count = description, total, 0
        self._lock = threading.Lock()

    def advance(self, item: str = "", outcome=None) -> None:
        note = outcome_note(outcome)
        with self._lock:
            self.count += 1
            line = f"[{self.count}/{self.total}] {self.description} {item}" + (f": {note}" if note else "")
            sys.stderr.write(printable(line) + "\n")
            sys.stderr.flush()


def wrote(output: Optional[Path], quiet: bool) -> None:
    """The last word of a run that wrote its report to a file: where it went."""
    if output is not None and not quiet:
        say(f"mend: wrote {output}")


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
def progress_hook(quiet: bool) -> Iterator[Callable[[str, int], Callable[..., None]]]:
    """The ``progress(description, total) -> advance(item, outcome=None)`` hook stages take
    (stages never print; ``outcome`` is the model object the item produced, for the line):
    a bar on a TTY, a line per item otherwise, nothing with --quiet. Every bar it opens is
    closed when the block ends."""
    enabled, lines = show_progress(quiet), progress_lines(quiet)
    with ExitStack() as stack:
        def progress(description: str, total: int) -> Callable[..., None]:
            if lines:
                return ProgressLines(description, total).advance
            return stack.enter_context(progress_bar(description, total, enabled)).advance

        yield progress


class Progressor:
    def __init__(self, progress, task):
        self._progress, self._task = progress, task

    def advance(self, item: str = "", outcome=None) -> None:
        if self._progress is not None:
            from rich.markup import escape

            self._progress.update(self._task, advance=1, item=escape(printable(item)))


CALLS_HELP = ("Calls per target and run mode: after the first, calls with the batch and sequence grown (or the "
              "target's Target(calls=[...])) through the same compiled function, so what Dynamo specialised on "
              "recompiles and each recompile is explained. 1: the first call only.")
FULLGRAPH_HELP = ("Compile as torch.compile(fullgraph=True) does: a target passes only as one graph; the first "
                  "break raises, and is its one break (the rest stay unseen), and data-dependent scalars and "
                  "shapes the default compile breaks on are traced.")
VERBOSE_HELP = "Text: every detail (Dynamo's explanations, hints, stacks, recompile guards), not only the summary."


def render_or_fail(report, fmt: str, output: Optional[Path], verbose: bool = False) -> None:
    emit(render_noted(report, fmt, color=output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ,
                      verbose=verbose), output)


def render_noted(report, fmt: str, color: bool = False, verbose: bool = False) -> str:
    """``reports.render`` of the report with its issues (merged when a saved or a check report
    lacks them); the renderer's notes (results a format's limits left out) go to stderr as
    warnings, an unknown format is a usage error."""
    from reports import render_with_notes

    if not report.issues:  # (the rule catalog correlate reads is loaded only then)
        from graphmend.correlate import with_issues

        report = with_issues(report)
    try:
        text, notes = render_with_notes(report, fmt, color=color, verbose=verbose)
    except ValueError as exc:
        raise fail(str(exc))
    for note in notes:
        say(f"mend: warning: {note}")
    return text
