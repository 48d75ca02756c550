"""The ``mend`` command line: one typer app, one module per command.

Every module imported here is torch-free at import time, so ``mend --help`` is fast.
"""

from __future__ import annotations

import signal
import sys

import typer
from typer.core import TyperCommand

from graphmend import __version__

# type labels (typer 0.29's own, shown in <...>; click's type names before it) -> click's placeholders
_TYPE_METAVARS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "path": "PATH",
                  "Path": "PATH", "int range": "INTEGER", "float range": "FLOAT", "integer range": "INTEGER"}


def _label_metavar(label: str) -> str:
    """``<list[str]>`` -> ``TEXT``, ``<int range>`` -> ``INTEGER``, ``<text|json>`` -> ``[text|json]``."""
    label = label.strip("<>")
    if label.startswith("list[") and label.endswith("]"):
        label = label[5:-1]  # a repeatable option: one value per use
    if "|" in label:
        return f"[{label}]"
    return _TYPE_METAVARS.get(label, label.upper())


def _option_metavar(param, ctx) -> str:
    """An option's placeholder. typer before 0.29 options are click's, with a click ``type``;
    typer 0.29 has its own parameters, which label their type themselves."""
    click_type = getattr(param, "type", None)
    if click_type is None:
        return _label_metavar(param.display_type(ctx))
    choices = getattr(click_type, "choices", None)
    if choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in choices) + "]"
    return _label_metavar(str(getattr(click_type, "name", "text")))


class MendCommand(TyperCommand):
    """Click's help placeholders, not typer's: typer 0.2x's plain help writes a required
    argument as ``{paths}...`` and types as ``<list[Path]>`` / ``<int range>``; here an
    argument reads ``PATHS...`` (``[CODE]`` when optional) and an option ``FLOAT``,
    ``TEXT``, ``[text|json]``, or the metavar it was given."""

    @staticmethod
    def _argument_metavar(param) -> str:
        name = param.metavar or param.name.upper()
        if not param.required:
            name = f"[{name}]"
        return name + ("..." if param.nargs != 1 else "")

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(self._argument_metavar(param))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx, formatter) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            given = param.metavar
            is_option = param.param_type_name == "option"
            if is_option and given is None and not (param.is_flag or param.count):
                param.metavar = _option_metavar(param, ctx)
            try:
                record = param.get_help_record(ctx)
            finally:
                param.metavar = given
            if record is None:
                continue
            # typer before 0.29 escapes "[" for rich even when rich does not render the help
            record = (record[0], record[1].replace("\\[", "["))
            if is_option:
                opts.append(record)
            elif param.param_type_name == "argument":
                args.append((self._argument_metavar(param), record[1]))
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


app = typer.Typer(
    name="mend",
    help="Find, explain, repair and measure torch.compile graph breaks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: typer's rich help formatter costs ~0.5 s of imports on every --help.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mend {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                        help="Show the version and exit.")) -> None:
    """Exit codes: 0 clean, 1 findings / new breaks / failed verification, 2 usage or internal error."""


def _register() -> None:
    # One line per command; each module is torch-free at import time.
    from graphmend.cli import analyze

    app.command("analyze", cls=MendCommand)(analyze.analyze)
    from graphmend.cli import rules

    app.command("rules", cls=MendCommand)(rules.rules)
    from graphmend.cli import run
    app.command("run", cls=MendCommand, context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                         "allow_interspersed_args": False})(run.run)
    from graphmend.cli import check
    app.command("check", cls=MendCommand)(check.check)
    from graphmend.cli import report
    app.command("report", cls=MendCommand)(report.report)
    from graphmend.cli import bench
    app.command("bench", cls=MendCommand)(bench.bench)
    from graphmend.cli import fix
    app.command("fix", cls=MendCommand)(fix.fix)
    from graphmend.cli import corpus
    app.command("corpus", cls=MendCommand)(corpus.corpus)
    from graphmend.cli import sweep
    app.command("sweep", cls=MendCommand)(sweep.sweep)


_register()


def _on_signal(signum: int, frame) -> None:
    """Ctrl-C, SIGTERM: the run's workers, what they started and the warm processes end now
    (graphmend.core.jobs.end_all), then mend unwinds as Python would (KeyboardInterrupt; an exit
    for SIGTERM, whose atexit handlers still shut a local Ray instance down)."""
    jobs = sys.modules.get("graphmend.core.jobs")  # not imported: no worker was started
    if jobs is not None:
        jobs.end_all()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    sys.stderr.write("mend: terminated\n")
    raise SystemExit(128 + signum)


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("mend: interrupted\n")
        sys.exit(2)
    except Exception as exc:  # an internal error: one line, exit 2, no traceback
        from reports.wording import printable

        sys.stderr.write(printable(f"mend: internal error: {type(exc).__name__}: {exc}") + "\n")
        sys.exit(2)
