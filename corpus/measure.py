"""Measure corpus targets with bare ``torch._dynamo.explain`` and print what it reports.

The manifest (``manifest.toml``) is filled from this output, never by guessing::

    python corpus/measure.py                    # every target in corpus/
    python corpus/measure.py attention.py       # one file
    python corpus/measure.py --json             # machine-readable
    python corpus/measure.py --toml             # manifest skeleton (counts + break sites)
    python corpus/measure.py --check            # differences from manifest.toml, as TOML to paste
    python corpus/measure.py --mode train       # in train mode (default eval: .eval() under no_grad)

Run from anywhere; it imports corpus modules as the package ``corpus``.
"""

from __future__ import annotations

import argparse
import contextlib
import ast
import importlib
import json
import linecache
import sys
import time
import traceback
from pathlib import Path

CORPUS = Path(__file__).resolve().parent


def target_names(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("mend_target")]


def unpack(made):
    """``(fn, args, kwargs)`` of what a target returns: a tuple or a ``graphmend.Target``."""
    from graphmend.core.targets import normalise

    t = normalise(made, "target")
    return t.fn, t.args, t.kwargs


def _site(user_stack) -> tuple[str | None, int | None, str | None]:
    """The innermost frame of a break that lies in a corpus file (else the innermost)."""
    frames = list(user_stack or [])
    for fr in reversed(frames):
        if str(Path(fr.filename).resolve()).startswith(str(CORPUS)):
            return Path(fr.filename).name, fr.lineno, fr.name
    if frames:
        fr = frames[-1]
        return fr.filename, fr.lineno, fr.name
    return None, None, None


def _rule(reason: str, user_stack) -> str | None:
    """The rule code the tracer's classifier gives this break (None without the tracer)."""
    try:
        from tracer.classify import classify
    except ImportError:
        return None
    frames = list(user_stack or [])
    if not frames:
        return classify(None, reason)
    fr = frames[-1]
    following = [linecache.getline(fr.filename, fr.lineno + i).rstrip() for i in (1, 2, 3)]
    return classify(None, reason, linecache.getline(fr.filename, fr.lineno).strip(), following)


def measure(file: str, function: str, mode: str = "eval") -> dict:
    """explain's counts in run ``mode``: eval = the module in .eval() under no_grad, train =
    .train() with grad on (explain traces the forward; the backward runs eagerly)."""
    import torch

    if str(CORPUS.parent) not in sys.path:
        sys.path.insert(0, str(CORPUS.parent))
    from graphmend.core.modes import run_mode
    mod = importlib.import_module(f"corpus.{Path(file).stem}")
    row: dict = {"target": f"{file}::{function}", "mode": mode}
    t0 = time.perf_counter()
    try:
        fn, args, kwargs = unpack(getattr(mod, function)())
        torch._dynamo.reset()
        # targets may print (that is a break pattern); keep stdout for our own output
        with contextlib.redirect_stdout(sys.stderr), run_mode(fn, mode):
            out = torch._dynamo.explain(fn)(*args, **kwargs)
    except Exception as exc:  # one broken target never stops the rest
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc(limit=3)
        return row
    row["graph_count"] = out.graph_count
    row["graph_break_count"] = out.graph_break_count
    row["seconds"] = round(time.perf_counter() - t0, 3)
    sites, seen = [], set()
    for r in out.break_reasons:
        f, line, func = _site(getattr(r, "user_stack", None))
        key = (f, line)
        if key in seen:
            continue
        seen.add(key)
        sites.append({"file": f, "line": line, "function": func, "reason": str(r.reason).splitlines()[0][:160],
                      "rule": _rule(str(r.reason), getattr(r, "user_stack", None))})
    row["sites"] = sites
    return row


def expected(entry: dict, mode: str, torch_key: str) -> dict:
    """The manifest's counts for one run mode and torch: eval counts are the entry's own,
    train mode's its ``train`` table; a ``torch."X.Y"`` table inside either overrides."""
    base = {**entry, **entry.get("train", {})} if mode == "train" else entry
    return {**base, **base.get("torch", {}).get(torch_key, {})}


def check(rows: list[dict]) -> int:
    """Print, as a per-torch TOML table to paste, every target whose counts differ."""
    import torch

    from graphmend.core.config import tomllib  # tomli on Python 3.10

    key = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    manifest = tomllib.loads((CORPUS / "manifest.toml").read_text(encoding="utf-8"))["targets"]
    bad = 0
    for r in rows:
        entry = manifest.get(r["target"])
        if entry is None:
            print(f"# {r['target']}: not in manifest.toml")
            bad += 1
            continue
        want = expected(entry, r["mode"], key)
        got = (r.get("graph_count"), r.get("graph_break_count"))
        if "error" in r or got != (want["graph_count"], want["graph_break_count"]):
            bad += 1
            print(f"# {r['target']}: manifest {want['graph_count']}/{want['graph_break_count']}, "
                  f"measured {r.get('error') or '%s/%s' % got}")
            if "error" not in r:
                table = f'targets."{r["target"]}"' + (".train" if r["mode"] == "train" else "")
                print(f'[{table}.torch."{key}"]\ngraph_count = {got[0]}\ngraph_break_count = {got[1]}\n')
    print(f"# {len(rows)} targets measured on torch {torch.__version__}, {bad} differ")
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", help="corpus files (default: all)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--toml", action="store_true")
    p.add_argument("--check", action="store_true", help="compare with manifest.toml; exit 1 on a difference")
    p.add_argument("--skip-hf", action="store_true", help="leave out hf_models.py (slow; needs transformers)")
    p.add_argument("-k", default="", help="only targets whose name contains this")
    p.add_argument("--mode", default="eval", choices=["eval", "train", "both"], help="run mode(s) to measure in")
    ns = p.parse_args(argv)
    skip = {"measure.py", "__init__.py"} | ({"hf_models.py"} if ns.skip_hf else set())
    files = ns.files or sorted(f.name for f in CORPUS.glob("*.py") if f.name not in skip)
    rows = []
    for f in files:
        for fn in target_names(CORPUS / Path(f).name):
            for mode in (("eval", "train") if ns.mode == "both" else (ns.mode,)):
                if ns.k not in fn:
                    continue
                rows.append(measure(Path(f).name, fn, mode))
                if not (ns.json or ns.toml or ns.check):
                    r = rows[-1]
                    if "error" in r:
                        print(f"{r['target']}: ERROR {r['error']}")
                        continue
                    print(f"{r['target']} [{r['mode']}]: graphs={r['graph_count']} breaks={r['graph_break_count']} "
                          f"({r['seconds']}s)")
                    for s in r["sites"]:
                        print(f"    {s['file']}:{s['line']} in {s['function']}: {s['reason']}")
    if ns.check:
        return check(rows)
    if ns.json:
        import torch
        print(json.dumps({"torch": torch.__version__, "targets": rows}, indent=2))
    elif ns.toml:
        for r in rows:
            if "error" in r:
                print(f"# {r['target']}: ERROR {r['error']}")
                continue
            print(f'[targets."{r["target"]}"]')
            print(f"graph_count = {r['graph_count']}\ngraph_break_count = {r['graph_break_count']}")
            for s in r["sites"]:
                print(f'[[targets."{r["target"]}".sites]]\nline = {s["line"]}  # {s["reason"][:70]}')
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
