"""Compact Markdown tables of saved bench reports (written by ``python -m benchmarks bench_table``
and on docs/results.md by ``results_page``): ``bench_table`` per report, ``summary_table`` one row
per target and mode across reports. Formatting only: every figure (ratios included) comes
from the reports as the bench stage wrote them."""

from __future__ import annotations

from typing import Optional, Sequence

from graphmend.core.model import Report


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
        out.append(f"| {b.target} | {b.arm} | {_f(b.cold_s, '{:.3f}')} | {_f(b.median_ms, '{:.3f}')}"
                   f"{' unstable' if b.unstable else ''} "
                   f"({_f(b.iqr_ms, '{:.3f}')}) | {_f(b.graph_count, '{}')} | {_f(b.break_count, '{}')} | "
                   f"{_f(b.kernel_count, '{}')} | {_f(b.peak_mem_mb, '{:.1f}')} | {match} |")
    if report.ratios:
        out += ["", "| target | ratio | value |", "| --- | --- | ---: |"]
        out += [f"| {x.target} | {x.name} | {_f(x.value, '{:.3f}')}{' unstable' if x.unstable else ''}"
                f"{' slower' if x.slower else ''} |"
                for x in report.ratios]
    return "\n".join(out) + "\n"


SUMMARY_RATIOS = ("original/eager", "mended/original", "mended/reference", "mended/original (cold)")


def summary_table(reports: Sequence[Report]) -> str:
    """One row per (target, mode): graphs/breaks and median ms per arm, then the ratios."""
    out = ["| target | mode | graphs / breaks: original → mended | eager ms | original ms | mended ms | "
           "reference ms | " + " | ".join(SUMMARY_RATIOS) + " |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in SUMMARY_RATIOS) + " |"]
    for report in reports:
        for target in dict.fromkeys(b.target for b in report.bench):
            rows = {b.arm: b for b in report.bench if b.target == target}
            first = next(iter(rows.values()))
            mode = first.mode + ((f", train ({first.optimizer})" if first.optimizer else ", train")
                                  if first.run_mode == "train" else "")

            def gb(arm):
                b = rows.get(arm)
                if b is None or b.error:
                    return "skipped" if b is not None and b.skipped else ("failed" if b is not None else "–")
                return f"{_f(b.graph_count, '{}')} / {_f(b.break_count, '{}')}"

            def ms(arm):
                b = rows.get(arm)
                return "–" if b is None or b.error else _f(b.median_ms, "{:.3f}") + (" unstable" if b.unstable else "")

            ratios = {x.name: x for x in report.ratios if x.target == target}

            def rt(name):
                x = ratios.get(name)
                return "–" if x is None else _f(x.value, "{:.3f}") + (" unstable" if x.unstable else "") + (
                    " slower" if x.slower else "")

            out.append(f"| {target.rpartition('/')[2]} | {mode} | {gb('original')} → {gb('mended')} | {ms('eager')} | "
                       f"{ms('original')} | {ms('mended')} | {ms('reference')} | "
                       + " | ".join(rt(n) for n in SUMMARY_RATIOS) + " |")
    return "\n".join(out) + "\n"
