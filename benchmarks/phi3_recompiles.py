"""Compiles per call of Phi-3's LongRoPE model, original against mended ("Phi-3 at 0
breaks, with no recompile on the second call").

Runs ``mend fix`` on ``benchmarks/graphmend_models.py``'s Phi-3 target (JSON), rebuilds the
verified patch of ``modeling_rope_utils.py`` at the line mend fixed, and then, in one fresh
process per arm (the patch served by mend's import overlay, as verification does), calls one
compiled module on short/short/long/long/short/short/long/short prompts in three modes: eval
under ``no_grad``, train with grad (a backward after each call), and ``inference_mode``. A
compile is one graph handed to a counting backend. Run it where transformers 4.52.4 is
installed (docs/real-models.md, "GraphMend's models")::

    PYTHONPATH=. /work/venv452/bin/python benchmarks/phi3_recompiles.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALLS = "short short long long short short long short".split()
MODES = ("eval", "train", "inference")

_TARGET = f'''import sys
sys.path.insert(0, {str(ROOT)!r})
from benchmarks import graphmend_models as G


def mend_target_phi3():
    return G.mend_target_phi3_longrope()
'''


def _patch(work: Path) -> dict[str, str]:
    """The verified GM101 fix, as {file: patched text}."""
    target = work / "phi3_target.py"
    target.write_text(_TARGET, encoding="utf-8")
    out = work / "fix.json"
    # (exit status 1: fixes were proposed; the JSON says which)
    subprocess.run([sys.executable, "-m", "graphmend", "fix", str(target), "-f", "json", "-o", str(out)],
                   cwd=ROOT, env={**_env(), "MEND_NO_CACHE": "1"})
    if not out.exists():
        raise SystemExit("phi3_recompiles: mend fix wrote no report")
    fixes = [f for f in json.loads(out.read_text())["fixes"] if f["status"] == "verified"]
    if not fixes:
        raise SystemExit("phi3_recompiles: mend verified no fix for the Phi-3 target")
    from rewrites.fixes import fix_source

    patched: dict[str, str] = {}
    for f in fixes:
        path, line = f["file"], int(f["line"])
        text = patched.get(path) or Path(path).read_text(encoding="utf-8")
        r = fix_source(text, lines={line}, tensor_lines={line}, rules=(f["rule"],))
        if r.error or not r.changed:
            raise SystemExit(f"phi3_recompiles: {path}:{line}: the fix did not apply ({r.error})")
        patched[path] = r.new_source
    return patched


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _arm(patches: dict[str, str]) -> dict[str, list[int]]:
    """In this process: compiles per call, per mode."""
    if patches:
        from graphmend.core.overlay import install_overlay

        install_overlay(patches)
    import torch

    from benchmarks.graphmend_models import _phi3

    torch.manual_seed(1)
    prompts = {"short": torch.randint(1, 1000, (2, 8)), "long": torch.randint(1, 1000, (2, 24))}
    result = {}
    for mode in MODES:
        torch._dynamo.reset()
        model = _phi3()
        model.train(mode == "train")
        graphs: list[int] = []

        def counting(gm, example_inputs):
            graphs.append(1)
            return gm.forward

        compiled = torch.compile(model, backend=counting)
        per_call = []
        for kind in CALLS:
            before = len(graphs)
            if mode == "train":
                compiled(input_ids=prompts[kind]).last_hidden_state.sum().backward()
            else:
                ctx = torch.no_grad() if mode == "eval" else torch.inference_mode()
                with ctx:
                    compiled(input_ids=prompts[kind])
            per_call.append(len(graphs) - before)
        result[mode] = per_call
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the counts here")
    ap.add_argument("--arm", help=argparse.SUPPRESS)  # a child process: a JSON file of patches, or "original"
    args = ap.parse_args(argv)
    if args.arm:
        patches = {} if args.arm == "original" else json.loads(Path(args.arm).read_text())
        print(json.dumps(_arm(patches)))
        return 0
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        patches = _patch(work)
        (work / "patches.json").write_text(json.dumps(patches))
        rows = {}
        for arm, flag in (("original", "original"), ("mended", str(work / "patches.json"))):
            out = subprocess.run([sys.executable, __file__, "--arm", flag], check=True, capture_output=True,
                                 text=True, cwd=ROOT, env=_env()).stdout
            rows[arm] = json.loads(out.strip().splitlines()[-1])
    print(f"transformers {transformers.__version__}; calls: {' '.join(CALLS)}")
    print("| arm | " + " | ".join(MODES) + " |")
    print("| --- |" + " --- |" * len(MODES))
    for arm, counts in rows.items():
        print(f"| {arm} | " + " | ".join(" ".join(map(str, counts[m])) for m in MODES) + " |")
    if args.json:
        args.json.write_text(json.dumps({"transformers": transformers.__version__, "calls": CALLS, "compiles": rows},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
