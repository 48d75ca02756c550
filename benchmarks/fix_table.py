"""A per-model table from one ``mend fix -f json`` report:
break sites and Dynamo's break count before → after per target, whether outputs stayed
equal, the verified fixes in the model's directory and the sites that remain.

    python benchmarks/cost_sweep.py corpus/hf_models.py --split corpus/hf_models.py \\
        tests/targets/hf_bench_targets.py --survey bigbird_pegasus xmod --out build/real --write-units
    python -m graphmend fix build/real/units --jobs 2 -f json -o build/real.json
    python benchmarks/fix_table.py build/real.json [--skip hf_xmod_two_languages]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from graphmend.core.sources import read_report_text  # noqa: E402


def table(report: dict, skip: set[str]) -> str:
    verified: dict[str, list[str]] = {}  # the model's directory -> its files' verified fixes
    for f in report["fixes"]:
        if f["status"] == "verified":
            name = os.path.basename(f["file"])
            folder = os.path.basename(os.path.dirname(f["file"]))
            verified.setdefault(folder, []).append(f"{name}:{f['line']} {f['rule']}")
    lines = ["| model | break sites before → after | Dynamo breaks before → after | outputs equal | verified fixes | "
             "remaining sites |", "| --- | ---: | ---: | :---: | --- | --- |"]
    sites = [0, 0]
    dynamo = [0, 0]
    for t in sorted(report["fix_targets"], key=lambda t: t["name"]):
        model = t["name"].split("::")[-1].removeprefix("mend_target_").removeprefix("hf_")
        if model in skip:
            continue
        # the model's own directory, as transformers names it (big_bird's is spelt apart): its
        # modeling file and helpers beside it (I-BERT's quant_modules.py)
        own = {"bigbird": "big_bird"}.get(model, model)
        left = collections.Counter(re.sub(r": .*", "", r) for r in t["remaining"])
        lines.append(f"| {model} | {t['breaks_before']} → {t['breaks_after']} | {t['graph_breaks_before']} → "
                     f"{t['graph_breaks_after']} | {'yes' if t['outputs_equal'] else 'NO'} | "
                     f"{'<br>'.join(verified.get(own, [])) or '–'} | "
                     f"{'<br>'.join(k + (f' ×{n}' if n > 1 else '') for k, n in left.items()) or '–'} |")
        sites = [sites[0] + t["breaks_before"], sites[1] + t["breaks_after"]]
        dynamo = [dynamo[0] + (t["graph_breaks_before"] or 0), dynamo[1] + (t["graph_breaks_after"] or 0)]

    def removed(pair):
        return f"{pair[0]} → {pair[1]} ({round(100 * (1 - pair[1] / pair[0])) if pair[0] else 0} % removed)"

    lines.append(f"| **total** | {removed(sites)} | {removed(dynamo)} | | | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--skip", nargs="*", default=[], help="targets left out of the table (a model built twice)")
    a = ap.parse_args(argv)
    print(table(json.loads(read_report_text(a.report)), set(a.skip)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
