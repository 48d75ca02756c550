"""The compact Markdown table of saved bench reports (docs/results.md shows the summary):
``python benchmarks/bench_table.py report.json [more.json ...]``, or ``--summary`` for one row
per target and mode across all the reports. The tables are ``reports.bench_md``'s; this reads
the files and prints them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from graphmend.core.model import Report  # noqa: E402
from reports.bench_md import bench_table, summary_table  # noqa: E402


def main(argv: Sequence[str]) -> int:
    summary = "--summary" in argv
    argv = [a for a in argv if a != "--summary"]
    if not argv:
        sys.stderr.write("usage: python benchmarks/bench_table.py [--summary] REPORT.json [...]\n")
        return 2
    if summary:
        sys.stdout.write(summary_table([Report.from_json(Path(p).read_text(encoding="utf-8")) for p in argv]))
        return 0
    for path in argv:
        sys.stdout.write(bench_table(Report.from_json(Path(path).read_text(encoding="utf-8"))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
