"""The evaluation harness's one entry point.

    python -m benchmarks                 # every script, with what it measures or makes
    python -m benchmarks NAME [ARGS...]  # run benchmarks/NAME.py with ARGS

Each script's own docstring says how it is run, what it writes and which page quotes it.
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def scripts() -> dict[str, str]:
    """{name: the first line of its docstring} of every script here."""
    out: dict[str, str] = {}
    for p in sorted(HERE.glob("*.py")):
        if p.name.startswith("_"):
            continue
        try:
            doc = ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or ""
        except (OSError, SyntaxError, UnicodeDecodeError) as exc:
            doc = f"(unreadable: {exc})"
        out[p.stem] = " ".join(doc.split("\n\n")[0].split())
    return out


def main(argv: list[str]) -> int:
    found = scripts()
    if not argv or argv[0] in ("-h", "--help"):
        width = max(map(len, found))
        print(__doc__.strip().splitlines()[0] + "\n")
        for name, doc in found.items():
            print(f"  {name:<{width}}  {doc[:110]}{'...' if len(doc) > 110 else ''}")
        return 0
    name = argv[0].removesuffix(".py")
    if name not in found:
        print(f"error: no benchmark script {argv[0]!r} (python -m benchmarks lists them)", file=sys.stderr)
        return 2
    # as `python benchmarks/NAME.py` runs it: its folder first (scripts import their siblings),
    # and the checkout (graphmend, corpus)
    for path in (str(HERE.parent), str(HERE)):
        if path not in sys.path:
            sys.path.insert(0, path)
    sys.argv = [str(HERE / f"{name}.py"), *argv[1:]]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as done:
        if isinstance(done.code, int) or done.code is None:
            return done.code or 0
        print(done.code, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
