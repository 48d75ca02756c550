"""Graphs compiled per training step of I-BERT, original against mended (docs/real-models.md,
"Train mode"): the mended calibration re-binds its range buffers inside the graph, and a
second step must not compile again.

The verified fixes of ``quant_modules.py`` are read from a ``mend fix --train -f json``
report and re-planned on the installed file (``rewrites.fixes.fix_source`` at those lines);
each arm runs in a fresh process, three training steps of one module compiled with
``aot_eager``, and prints the graphs each step compiled::

    python benchmarks/ibert_recompiles.py benchmarks/results/fix-hf-5.24-train-torch2.13.json.gz
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from graphmend.core.sources import read_report_text  # noqa: E402

_ARM = r'''
import json, sys
import torch
import torch._dynamo.utils as du
import transformers.models.ibert.modeling_ibert as mi
import transformers.models.ibert.quant_modules as qm

lines = json.loads(sys.argv[1])
if lines:  # the mended arm: quant_modules' classes replaced by the patched file's
    from rewrites.fixes import fix_source

    with open(qm.__file__, encoding="utf-8") as f:
        new = fix_source(f.read(), lines=set(lines)).new_source
    old = dict(vars(qm))
    exec(compile(new, qm.__file__, "exec"), vars(qm))
    for k, v in list(vars(mi).items()):
        if isinstance(v, type) and old.get(k) is v:
            setattr(mi, k, vars(qm)[k])
from graphmend.sweep.hf import build

model, inputs = build("ibert")
model.train()
torch._dynamo.reset()
step = torch.compile(model, backend="aot_eager")
graphs = []
for _ in range(3):
    du.counters.clear()
    step(**inputs).last_hidden_state.sum().backward()
    graphs.append(du.counters["stats"]["unique_graphs"])
print(json.dumps(graphs))
'''


def main(argv=None) -> int:
    report = json.loads(read_report_text((argv or sys.argv[1:])[0]))
    lines = sorted({f["line"] for f in report["fixes"]
                    if f["status"] == "verified" and f["file"].endswith("ibert/quant_modules.py")})
    out = {}
    for arm, at in (("original", []), ("mended", lines)):
        proc = subprocess.run([sys.executable, "-c", _ARM, json.dumps(at)], capture_output=True, text=True,
                              cwd=ROOT, timeout=900)
        if proc.returncode:
            sys.exit(f"ibert_recompiles: the {arm} arm failed: {proc.stderr.strip().splitlines()[-1]}")
        out[arm] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps({"fixed_lines": lines, "graphs_per_step": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
