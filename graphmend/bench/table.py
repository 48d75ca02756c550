"""A compact Markdown table of saved bench reports, for docs/benchmarks.md:
``python -m graphmend.bench.table report.json [more.json ...]``. Formatting only: every
figure (ratios included) comes from the reports as the bench stage wrote them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence

from graphmend.model import Report


def _f(value: Optional[float], fmt: str) -> str:
    return "–" if value is None else fmt.format(value)


def bench_table(report: Report) -> str:
    out = []
    first = report.bench[0] if report.bench else None
    if first:
        out.append(f"device `{first.device}`, mode `{first.mode}`, dtype `{first.dtype}`, torch "
                   f"{report.torch_version or '?'}; times: median (IQR) of {first.runs or '?'} runs")
        out.append("")
    out += ["| target | arm | cold s | median ms (IQR) | graphs | breaks | kernels | peak MiB | outputs |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for b in report.bench:
        if b.error:
            out.append(f"| {b.target} | {b.arm} | | | | | | | {b.error.replace('|', '/')[:120]} |")
            continue
        match = {True: "match", False: f"MISMATCH {b.mismatch or ''}", None: "–"}[b.outputs_match]
        out.append(f"| {b.target} | {b.arm} | {_f(b.cold_s, '{:.3f}')} | {_f(b.median_ms, '{:.3f}')} "
                   f"({_f(b.iqr_ms, '{:.3f}')}) | {_f(b.graph_count, '{}')} | {_f(b.break_count, '{}')} | "
                   f"{_f(b.kernel_count, '{}')} | {_f(b.peak_mem_mb, '{:.1f}')} | {match} |")
    if report.ratios:
        out += ["", "| target | ratio | value |", "| --- | --- | ---: |"]
        out += [f"| {x.target} | {x.name} | {_f(x.value, '{:.3f}')} |" for x in report.ratios]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str]) -> int:
    if not argv:
        sys.stderr.write("usage: python -m graphmend.bench.table REPORT.json [...]\n")
        return 2
    for path in argv:
        sys.stdout.write(bench_table(Report.from_json(Path(path).read_text(encoding="utf-8"))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
