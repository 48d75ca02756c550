"""The ``mend`` command line: one typer app, one module per command.

Every module imported here is torch-free at import time, so ``mend --help`` is fast.
"""

from __future__ import annotations

import sys

import typer

from graphmend import __version__

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

    app.command("analyze")(analyze.analyze)
    from graphmend.cli import rules

    app.command("rules")(rules.rules)
    from graphmend.cli import run
    app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                         "allow_interspersed_args": False})(run.run)
    from graphmend.cli import check
    app.command("check")(check.check)
    from graphmend.cli import report
    app.command("report")(report.report)
    from graphmend.cli import bench
    app.command("bench")(bench.bench)
    from graphmend.cli import fix
    app.command("fix")(fix.fix)
    from graphmend.cli import corpus
    app.command("corpus")(corpus.corpus)


_register()


def main() -> None:
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("mend: interrupted\n")
        sys.exit(2)
    except Exception as exc:  # an internal error: one line, exit 2, no traceback
        sys.stderr.write(f"mend: internal error: {type(exc).__name__}: {exc}\n")
        sys.exit(2)
