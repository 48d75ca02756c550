"""GM501's rewritten MoE (``gm5_opaque.CASES[0]``) under plain ``torch.compile`` (Inductor,
its FX-graph cache on, as a user compiles), per runtime path of the op: ``chosen``, the path
the runtime takes on this torch (the module's ``id`` before 2.13, the module handle from
2.13; ``opaque_object`` says which), and ``handle``, the handle (a reference-typed opaque
object) forced on any torch that registers one, also with the FX-graph cache off. Each case
runs in a process of its own, on every device there is, with grad off (a call) and on (a call
and a backward); a line per case says whether the compiled output (and the input's gradient)
equals eager, or the error::

    python benchmarks/opaque_paths.py [OUT.json]

The measurement behind the runtime's torch-2.13 threshold (docs/benchmarks.md, "The opaque op's two paths on torch 2.11").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r'''
import json, sys, traceback, types
import torch
from rewrites.fixes import gm5_opaque

path, device, grad, cache = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
src = gm5_opaque.CASES[0].after
THRESHOLD = "torch.__version__ < (2, 13)"  # the runtime's version check
if path == "handle":
    if THRESHOLD not in src:
        raise SystemExit(f"the runtime no longer reads {THRESHOLD!r}: the handle cannot be forced")
    src = src.replace(THRESHOLD, "torch.__version__ < (2, 0)")
torch._inductor.config.fx_graph_cache = cache
mod = types.ModuleType("opaque_paths_after")
sys.modules[mod.__name__] = mod
exec(compile(src, "opaque_paths_after.py", "exec"), mod.__dict__)
torch.manual_seed(0)
m = mod.Moe().to(device)
x = torch.randn(9, 8, device=device)
expert = torch.tensor([0, 2, 2, 1, 0, 2, 3, 3, 0], device=device)
out = {"path": path, "device": device, "grad": grad, "fx_graph_cache": cache,
       "opaque_object": mod._mend_opaque_runtime().opaque, "torch": torch.__version__}
try:
    compiled = torch.compile(m)
    if grad:
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        y = compiled(xa, expert)
        y.sum().backward()
        ref = m(xb, expert)
        ref.sum().backward()
        out["ok"] = bool(torch.allclose(y, ref, atol=1e-5) and torch.allclose(xa.grad, xb.grad, atol=1e-5))
    else:
        with torch.no_grad():
            out["ok"] = bool(torch.allclose(compiled(x, expert), m(x, expert), atol=1e-5))
except BaseException as e:
    out["ok"] = False
    out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    out["frames"] = [l.strip() for l in "".join(traceback.format_exception(e)).splitlines()
                     if l.strip().startswith("File")][-25:]
print("RESULT " + json.dumps(out))
'''


def main(argv=None) -> int:
    import torch

    argv = sys.argv[1:] if argv is None else argv
    devices = (["cuda"] if torch.cuda.is_available() else []) + ["cpu"]
    rows = []
    for path in ("chosen", "handle"):
        for device in devices:
            for grad in ("0", "1"):
                for cache in (("1", "0") if path == "handle" else ("1",)):
                    case = {"path": path, "device": device, "grad": grad == "1", "fx_graph_cache": cache == "1"}
                    try:
                        run = subprocess.run([sys.executable, "-c", CHILD, path, device, grad, cache], cwd=ROOT,
                                             capture_output=True, text=True, timeout=300)
                    except subprocess.TimeoutExpired:  # one case hung: the others still run
                        rows.append({**case, "ok": False, "error": "timed out after 300 s"})
                    else:
                        line = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
                        rows.append(json.loads(line[-1][7:]) if line else
                                    {**case, "ok": False, "error": run.stderr[-2000:]})
                    print(json.dumps({k: v for k, v in rows[-1].items() if k != "frames"}), flush=True)
    if argv:
        Path(argv[0]).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["ok"] for r in rows if r["path"] == "chosen") else 1


if __name__ == "__main__":
    sys.exit(main())
