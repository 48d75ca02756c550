"""Survey which transformers models break under torch.compile, and where.

Builds TINY models from config classes (never ``from_pretrained``; random weights), feeds a
realistic batch (2 sequences, the second right-padded in the attention mask; encoder-decoders
get ``decoder_input_ids``) and records ``torch._dynamo.explain`` for each, in eval() under
no_grad. Each model runs in its own subprocess with a timeout, one at a time, so a hang or a
crash never stops the rest.

    PYTHONPATH=build/tf4 python benchmarks/survey_hf.py --out build/hf-survey-4.46.3
    python benchmarks/survey_hf.py --out build/hf-survey-5.x      # installed transformers
    python benchmarks/survey_hf.py --only bert gpt2 --out /tmp/s               # a few models

Writes ``OUT.json`` (every model, every break reason with its innermost transformers frame)
and ``OUT.md`` (summary table, then the distinct break sites ranked by how many models share
them, with their source line).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from graphmend.core.sources import write_atomic  # noqa: E402  (temp file + rename, mode kept)

# the tiny sizes, the config parameters they go to and what each architecture needs: mend sweep's
from graphmend.sweep.hf import OVERRIDES, VOCAB  # noqa: E402,F401
from graphmend.sweep.hf_config import config_kwargs  # noqa: E402,F401

# the architectures surveyed (transformers 4.46 and 5.x), each built as mend sweep builds it,
# with sweep's per-architecture overrides (graphmend/sweep/hf_overrides.py: OVERRIDES)
SURVEYED = [
    # encoders
    "bert", "roberta", "xlm-roberta", "camembert", "roberta-prelayernorm", "electra", "albert", "distilbert",
    "deberta", "deberta-v2", "megatron-bert", "ernie", "nezha", "convbert", "data2vec-text", "mpnet", "ibert",
    "layoutlm", "roformer", "rembert", "squeezebert", "mobilebert", "funnel", "esm", "luke", "xmod", "canine",
    "fnet", "nystromformer", "yoso", "mra", "mega", "longformer", "big_bird", "reformer", "xlm", "flaubert",
    "xlnet", "splinter", "tapas", "bert-generation",
    # decoders
    "gpt2", "openai-gpt", "gpt_bigcode", "gpt_neo", "gptj", "codegen", "gpt_neox", "gpt_neox_japanese", "opt",
    "bloom", "ctrl", "biogpt", "xglm", "falcon", "mpt", "llama", "mistral", "mixtral", "qwen2", "qwen2_moe",
    "phi", "phi3", "phimoe", "gemma", "gemma2", "olmo", "olmoe", "stablelm", "persimmon", "starcoder2",
    "cohere", "granite", "granitemoe", "jetmoe", "nemotron", "glm", "dbrx", "jamba", "recurrent_gemma",
    "mamba", "rwkv", "transfo-xl",
    # encoder-decoders
    "t5", "mt5", "umt5", "longt5", "bart", "mbart", "plbart", "mvp", "pegasus", "pegasus_x", "marian",
    "blenderbot", "blenderbot-small", "m2m_100", "led", "bigbird_pegasus", "prophetnet", "xlm-prophetnet",
    "fsmt", "switch_transformers", "nllb-moe",
]
SPECS: dict[str, tuple[dict, dict]] = {t: OVERRIDES.get(t, ({}, {})) for t in SURVEYED}


def build(model_type: str, **from_config):
    """The model (eval) and its inputs, or raise with why it cannot be built. ``from_config``:
    what AutoModel.from_config takes besides the config (``experts_implementation="eager"``).
    mend sweep's build, with this survey's table of what each model needs."""
    from graphmend.sweep.hf import build as sweep_build

    return sweep_build(model_type, from_config, SPECS[model_type])


def write_targets(folder, model_types) -> list:
    """One target file per model type in ``folder`` (``hf_<type>.py``, ``mend_target_<type>``
    building the model as :func:`build` does), for mend to run as it runs a user's targets."""
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    files = []
    for model_type in model_types:
        name = "".join(c if c.isalnum() else "_" for c in model_type)
        path = Path(folder) / f"hf_{name}.py"
        path.write_text(f"import sys\nsys.path.insert(0, {here!r})\nfrom survey_hf import build as _build\n\n\n"
                        f"def mend_target_{name}():\n    model, inputs = _build({model_type!r})\n"
                        f"    return model, (), inputs\n", encoding="utf-8")
        files.append(path)
    return files


def innermost(stack, marker: str):
    for fr in reversed(stack or []):
        fn = fr.filename.replace(os.sep, "/")
        if marker in fn:
            return fr, fn
    return None, None


def categorize(reason: str, source: str) -> str:
    r, s = reason.lower(), (source or "").strip()
    if re.search(r"\blogger\.|logging|warnings\.warn|\bprint\(|warning_once", s) or \
            any(w in r for w in ("logger", "logging", "warnings.warn", "builtin print", "print(")):
        return "side effect (print/logger/warnings)"
    if "numpy" in r or re.search(r"\bnp\.|numpy", s):
        return "numpy"
    if "_local_scalar_dense" in r or r.startswith("data dependent operator"):  # a tensor used as a Python number (arange/np/range bounds): an implicit .item()
        return "host scalar (.item/.tolist/int/float)"
    if any(w in r for w in ("nonzero", "dynamic shape operator", "data dependent output", "data-dependent output",
                            "unique", "masked_select", "boolean mask", "dynamic-shape")):
        return "data-dependent shape"
    if any(w in r for w in (".item()", "tensor.item", "tolist", "__int__", "__float__", "__bool__", "scalar output",
                            "unbacked")) or re.search(r"\.item\(\)|\.tolist\(\)", s):
        return "host scalar (.item/.tolist/int/float)"
    if s.startswith("assert") or s.startswith("raise") or "assert" in r or "exception" in r:
        return "guard (assert/raise on tensor)"
    if "data-dependent branching" in r or "jump" in r or s.startswith(("if ", "elif ", "while ")) or \
            re.search(r"\bif\b.*\belse\b", s):
        return "control flow (if-on-tensor)"
    return "other: " + reason.splitlines()[0][:90] if reason else "other"


def survey_one(model_type: str) -> dict:
    import linecache
    import warnings

    import torch
    import transformers

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    out = {"model": model_type, "transformers": transformers.__version__, "torch": torch.__version__}
    t0 = time.perf_counter()
    try:
        model, inputs = build(model_type)
    except Exception as exc:  # recorded as unbuildable, the survey goes on
        out["build_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        return out
    out["model_class"] = type(model).__name__
    out["inputs"] = {k: list(v.shape) for k, v in inputs.items()}
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            ex = torch._dynamo.explain(model)(**inputs)
    except Exception as exc:
        out["explain_error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
        out["seconds"] = round(time.perf_counter() - t0, 1)
        return out
    finally:
        torch._dynamo.reset()
    out["graph_count"] = ex.graph_count
    out["graph_break_count"] = ex.graph_break_count
    out["op_count"] = ex.op_count
    reasons = []
    for br in ex.break_reasons:
        text = str(getattr(br, "reason", ""))
        stack = list(getattr(br, "user_stack", None) or [])
        fr, fn = innermost(stack, "/transformers/")
        rec = {"reason": (text.splitlines() or [""])[0][:400], "reason_full": text[:1500],
               "graph_break": bool(getattr(br, "graph_break", True))}
        if fr is not None:
            rel = fn.rsplit("/transformers/", 1)[1]
            src = (fr.line or linecache.getline(fr.filename, fr.lineno) or "").strip()
            rec.update(file=rel, line=fr.lineno, func=fr.name, source=src)
        if stack:
            last = stack[-1]
            rec["innermost"] = f"{last.filename.replace(os.sep, '/').split('/site-packages/')[-1]}:{last.lineno}"
        rec["category"] = categorize(text, rec.get("source", ""))
        reasons.append(rec)
    out["break_reasons"] = reasons
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def run_child(model_type: str, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", model_type]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
    except subprocess.TimeoutExpired:
        return {"model": model_type, "explain_error": f"timeout after {timeout:.0f}s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            res = json.loads(line)
            res["wall_seconds"] = round(time.perf_counter() - t0, 1)
            return res
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return {"model": model_type, "explain_error": f"child exited {proc.returncode}: {tail}"}


def site_table(results: list[dict]):
    """Distinct break sites (file:line) -> models hitting them, reasons, categories, source."""
    sites: dict[str, dict] = {}
    for res in results:
        for br in res.get("break_reasons", []):
            if not br.get("graph_break", True):
                continue
            key = f"{br['file']}:{br['line']}" if "file" in br else f"(no transformers frame) {br.get('innermost', '?')}"
            s = sites.setdefault(key, {"site": key, "models": [], "hits": 0, "source": br.get("source", ""),
                                       "func": br.get("func", ""), "categories": collections.Counter(),
                                       "reasons": collections.Counter()})
            s["hits"] += 1
            if res["model"] not in s["models"]:
                s["models"].append(res["model"])
            s["categories"][br["category"]] += 1
            s["reasons"][br["reason"][:160]] += 1
    ranked = sorted(sites.values(), key=lambda s: (-len(s["models"]), -s["hits"], s["site"]))
    for s in ranked:
        s["category"] = s["categories"].most_common(1)[0][0]
        s["categories"] = dict(s["categories"])
        s["reasons"] = dict(s["reasons"].most_common(3))
    return ranked


def render_md(meta: dict, results: list[dict], sites: list[dict]) -> str:
    esc = lambda t: str(t).replace("|", "\\|").replace("\n", " ")
    lines = [f"# torch.compile graph-break survey: transformers {meta['transformers']}, torch {meta['torch']}", "",
             f"{meta['models_tried']} architectures tried, {meta['built']} built and explained, "
             f"{meta['breaking']} break ({meta['total_breaks']} breaks in all, {len(sites)} distinct sites). "
             f"Wall time {meta['wall_seconds']:.0f} s.", "",
             "| model | graphs | breaks | distinct sites | site categories |", "|---|---|---|---|---|"]
    for r in results:
        if "graph_break_count" not in r:
            continue
        brs = [b for b in r.get("break_reasons", []) if b.get("graph_break", True)]
        keys = {(b.get("file"), b.get("line")) for b in brs}
        cats = collections.Counter(b["category"] for b in brs)
        lines.append(f"| {r['model']} | {r['graph_count']} | {r['graph_break_count']} | {len(keys)} | "
                     f"{esc(', '.join(f'{c} x{n}' for c, n in cats.most_common()))} |")
    lines += ["", "## Not measured", "", "| model | why |", "|---|---|"]
    for r in results:
        if "graph_break_count" not in r:
            lines.append(f"| {r['model']} | {esc(r.get('build_error') or r.get('explain_error'))} |")
    lines += ["", "## Break sites, most shared first", "",
              "| # | site | models | hits | category | source | reason (Dynamo) |", "|---|---|---|---|---|---|---|"]
    for i, s in enumerate(sites, 1):
        lines.append(f"| {i} | {esc(s['site'])} | {len(s['models'])}: {esc(', '.join(s['models']))} | {s['hits']} | "
                     f"{esc(s['category'])} | `{esc(s['source'])}` | {esc(next(iter(s['reasons']), ''))} |")
    cats = collections.Counter()
    for s in sites:
        for c, n in s["categories"].items():
            cats[c] += n
    lines += ["", "## Breaks by category", "", "| category | breaks |", "|---|---|"]
    lines += [f"| {esc(c)} | {n} |" for c, n in cats.most_common()]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="output prefix: writes OUT.json and OUT.md")
    ap.add_argument("--only", nargs="*", help="model types to survey (default: all in SPECS)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per model (subprocess)")
    ap.add_argument("--budget", type=float, default=1500, help="stop starting new models after this many seconds")
    ap.add_argument("--rerender", action="store_true",
                    help="re-categorise OUT.json's break reasons and rewrite OUT.json/OUT.md without running models")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(survey_one(a.one)), flush=True)
        return
    if not a.out:
        ap.error("--out is required")
    if a.rerender:
        out = Path(a.out)
        try:
            data = json.loads(out.with_name(out.name + ".json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            ap.error(f"--rerender: cannot read {out}.json: {exc}")
        for r in data["results"]:
            for br in r.get("break_reasons", []):
                br["category"] = categorize(br["reason_full"] if "reason_full" in br else br["reason"], br.get("source", ""))
        sites = site_table(data["results"])
        write_atomic(out.with_name(out.name + ".json"), json.dumps({**data, "sites": sites}, indent=1))
        write_atomic(out.with_name(out.name + ".md"), render_md(data["meta"], data["results"], sites))
        return
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    names = a.only or list(SPECS)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        ap.error(f"--only: unknown model type(s) {', '.join(unknown)}; known: {', '.join(SPECS)}")
    start = time.perf_counter()
    results = []
    for name in names:
        if name not in CONFIG_MAPPING_NAMES:
            results.append({"model": name, "build_error": f"not in transformers {transformers.__version__}"})
        elif time.perf_counter() - start > a.budget:
            results.append({"model": name, "explain_error": "skipped: survey budget spent"})
        else:
            results.append(run_child(name, a.timeout))
        r = results[-1]
        print(f"{name:24s} {r.get('graph_break_count', '-')!s:>4} breaks  "
              f"{r.get('build_error') or r.get('explain_error') or ''}"[:160] + f"  ({r.get('wall_seconds', 0)} s)",
              file=sys.stderr, flush=True)
    import torch
    sites = site_table(results)
    explained = [r for r in results if "graph_break_count" in r]
    meta = {"transformers": transformers.__version__, "torch": torch.__version__, "models_tried": len(results),
            "built": len(explained), "breaking": sum(1 for r in explained if r["graph_break_count"] > 0),
            "total_breaks": sum(r["graph_break_count"] for r in explained),
            "wall_seconds": round(time.perf_counter() - start, 1),
            "command": " ".join([os.path.relpath(sys.executable) if False else "python"] + sys.argv)}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out.with_name(out.name + ".json"), json.dumps({"meta": meta, "results": results, "sites": sites},
                                                               indent=1))
    write_atomic(out.with_name(out.name + ".md"), render_md(meta, results, sites))
    print(f"{meta['breaking']}/{meta['built']} models break, {meta['total_breaks']} breaks, {len(sites)} sites; "
          f"wrote {out}.json, {out}.md in {meta['wall_seconds']:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
