"""Agreement of ``mend sweep transformers`` with an independent sweep: the public corpus's
``corpus/golden_set.json`` (github.com/penguinwu/oss-model-graph-break-corpus; torch 2.11,
transformers 5.5.3; per class a status in eval and in train).

Mapping, per (class, mode): mend's ``one graph`` is the golden ``full_graph``, ``breaks`` is
``graph_break``; mend's ``not built`` and ``failed`` and the golden ``create_error``,
``eager_error``, ``compile_error``, ``timeout``, ``zombie`` are not a capture of the model. A pair
is compared when both sides captured it; agreement is the share of those pairs with the same
status. Every disagreement is listed with its reason (mend's break sites, or that mend saw one
graph where the public sweep saw a break: a capture bug until shown otherwise).

    # the sample: every K-th golden class that transformers exports, in the golden set's order
    python benchmarks/golden_compare.py sample --golden golden_set.json --every 8 > classes.txt
    python -m graphmend sweep transformers --only "$(paste -sd, classes.txt)" --modes eval,train \\
        -j 2 -f json -o sweep.json
    python benchmarks/golden_compare.py compare --golden golden_set.json --sweep sweep.json [more.json] \
        --sample "every 8th golden class" --out OUT [--amend EARLIER.json]

A disagreement where mend breaks and the public sweep saw one graph is reviewed with
``python benchmarks/golden_compare.py fullgraph CLASS [eval|train]``: the graphs of the class,
built as the sweep builds it, under the default ``torch.compile`` and under ``fullgraph=True``.

``--retry EARLIER.json`` compares again the pairs an earlier comparison could not (not captured by
both) that the sweeps ran again, after a builder fix; the pairs it compared keep their result.

``--amend`` adds an earlier comparison's counts and lists (of another sample, which must not share a
class with this one) to this one's: the sample grows without running the earlier sweeps again.
Sweep reports may be gzipped (``.json.gz``).

The public sweep compiles with ``fullgraph=True``, which traces data-dependent scalars and shapes
the default compile breaks on. ``--fullgraph-sweep`` takes ``mend sweep --fullgraph --calls 1``
reports (every class the default compile broke on, and a check sample of the rest) and compares the
pairs once more on those terms (the result's ``fullgraph``). ``same-program --worker-dir
CORPUS/sweep CLASS MODE`` runs the public sweep's own worker (its build, inputs and call) with its
``torch.compile`` made mend's capture: the disagreements run so (``--same-program`` takes the JSON
lines) say whether mend and the public sweep still differ on one program, or only ran different
inputs (mend places image tokens; the public sweep fed some vision-language models text alone).

Run it with the golden set's versions (a virtualenv with torch==2.11.0 transformers==5.5.3).
Writes ``OUT.json`` and ``OUT.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Optional

GOLDEN_CAPTURED = {"full_graph": "clean", "graph_break": "breaks"}
# mend's row statuses (graphmend.core.tables SWEEP_CLEAN, SWEEP_BREAKS)
MEND_CAPTURED = {"one graph": "clean", "breaks": "breaks"}
MODES = ("eval", "train")


# The public sweep compiles with fullgraph=True; mend captures the compile a user runs by default.
# With fullgraph=True, Dynamo lets the shape environment hold scalar outputs and data-dependent
# output shapes (torch/_dynamo/output_graph.py, "We want to allow capture scalar outputs and
# allow_dynamic_output_shape_ops when fullgraph=True"), so a `.tolist()` or `.max()` read that
# breaks a default compile is traced there.
FULLGRAPH = ("torch.compile(model, fullgraph=True, backend=<counting>) gives 1 graph on torch 2.11 where the "
             "default compile gives {n}, on the same inputs: fullgraph=True traces data-dependent scalars and "
             "shapes (torch/_dynamo/output_graph.py), and the public sweep compiles with fullgraph=True; mend's "
             "breaks are the default compile's")
# what inspecting a disagreement found, appended to its reason (class -> finding)
REVIEWED = {
    "GraniteMoeSharedModel": "the break is the router's `expert_size = expert_size.tolist()`, which every routed "
                             "forward runs in eval and train; " + FULLGRAPH.format(n=11),
    "GraniteMoeSharedForCausalLM": "the break is the router's `expert_size = expert_size.tolist()` "
                                   "(modeling_granitemoeshared.py:196), as in GraniteMoeSharedModel; "
                                   + FULLGRAPH.format(n=12),
    "JetMoeModel": "the break is the router's `expert_size = expert_size.tolist()` (modeling_jetmoe.py:214), "
                   "which every routed forward runs in eval and train; " + FULLGRAPH.format(n=16),
    "XmodForCausalLM": "the breaks are the language adapters' boolean-mask selection "
                       "`hidden_states[lang_mask]` (modeling_xmod.py:457, a data-dependent output shape) and the "
                       "output-capturing decorator; " + FULLGRAPH.format(n=6),
    "XmodModel": "the breaks are the language adapters' boolean-mask selection `hidden_states[lang_mask]` "
                 "(modeling_xmod.py:457), as in XmodForCausalLM; " + FULLGRAPH.format(n=6),
    "FlaubertWithLMHeadModel": "the break is the input check `assert lengths.max().item() <= slen` "
                               "(modeling_flaubert.py:835, a scalar read back) when no lengths are given; "
                               + FULLGRAPH.format(n=3),
    "VJEPA2Model": "the breaks are the output-capturing decorator and the predictor's "
                   "`max_patch_num = target_mask[0].max() + 1`; " + FULLGRAPH.format(n=6),
}

# a break site that explains a disagreement wherever mend breaks there and the golden set saw one graph
REVIEWED_SITES = {
    # transformers 5.5's image-token check: `torch_compilable_check` asks `callable(msg)`, which Dynamo cannot
    # trace; fullgraph=True on mend's inputs raises there (LlavaModel, torch 2.11), so the golden sweep's
    # one graph means its inputs never reached the check (no image placed among its tokens)
    "transformers/utils/import_utils.py:1525": "mend's inputs place image tokens and reach transformers' "
                                               "image-token check, which no compile traces whole on torch 2.11 "
                                               "(`callable(msg)`); the golden sweep's inputs did not reach it",
}


def load_golden(text: str) -> dict[str, dict[str, str]]:
    """{class: {mode: golden status}} from golden_set.json's text."""
    return {m["name"]: {mode: m[mode]["status"] for mode in MODES if mode in m}
            for m in json.loads(text)["models"]}


def sample(golden: dict[str, dict[str, str]], known, every: int, offset: int = 0) -> list[str]:
    """Every ``every``-th golden class that ``known`` (a container of class names) holds, from
    the ``offset``-th, in the golden set's order: deterministic, and across every modality it has."""
    return [c for c in golden if c in known][offset::every]


def with_sites(sweep: dict) -> None:
    """Each row's ``sites``: its ``where`` (the first break sites) with the sites of every root cause
    that names its model and mode, so that a reviewed site further down is seen."""
    for r in sweep["rows"]:
        more = [site for c in sweep.get("causes") or () if r["model"] in c.get("models", ())
                and r["run_mode"] in c.get("modes", (r["run_mode"],)) for site in c.get("sites", ())]
        r["sites"] = list(dict.fromkeys([*(r.get("where") or []), *more]))


def _why(r: dict, ours: str, reviewed: dict[str, str]) -> str:
    """Why mend's status of row ``r`` (``ours``) differs from the golden one: what mend saw, and
    what reviewing it found (by class in ``reviewed``, else by a break site in REVIEWED_SITES)."""
    cls = r["model"]
    if ours == "clean":
        why = "mend saw one graph where the public sweep saw a break (a capture bug until shown otherwise)"
    else:
        where = ", ".join(r.get("where") or []) or "no source line"
        why = f"mend saw {r.get('graph_break_count', 0)} break(s) where the public sweep saw one graph: {where}"
    if cls in reviewed:
        why += f"; reviewed: {reviewed[cls]}"
    elif ours == "breaks" and (site := next((w for w in r.get("sites") or r.get("where") or []
                                               if w in REVIEWED_SITES), None)):
        why += f"; reviewed: {REVIEWED_SITES[site]}"
    return why


def tally(pairs: list[dict]) -> dict:
    """compared, agree, share and the counts by mode of compared pairs ({class, mode, mend, golden})."""
    by_mode = {m: {"agree": 0, "compared": 0} for m in MODES}
    for p in pairs:
        by_mode[p["mode"]]["compared"] += 1
        by_mode[p["mode"]]["agree"] += p["mend"] == p["golden"]
    same = sum(m["agree"] for m in by_mode.values())
    return {"compared": len(pairs), "agree": same, "share": round(same / len(pairs), 4) if pairs else None,
            "by_mode": by_mode}


def compare(golden: dict[str, dict[str, str]], rows: list[dict], reviewed: Optional[dict[str, str]] = None) -> dict:
    """Per (class, mode) of mend's sweep rows (the last row of a pair run twice): both captured
    (agree or not, with why), or not both built (with each side's status). ``reviewed``: the
    findings by class a disagreement's reason gives (default REVIEWED, the default compile's). Pure."""
    pairs, disagree, not_both = [], [], []
    for r in {(r["model"], r["run_mode"]): r for r in rows}.values():
        cls, mode = r["model"], r["run_mode"]
        g = golden.get(cls, {}).get(mode)
        if g is None:
            continue
        ours, theirs = MEND_CAPTURED.get(r["status"]), GOLDEN_CAPTURED.get(g)
        if ours is None or theirs is None:
            not_both.append({"class": cls, "mode": mode, "mend": r["status"] + (f": {r['why']}" if r.get("why") else ""),
                             "golden": g})
            continue
        pairs.append({"class": cls, "mode": mode, "mend": ours, "golden": theirs})
        if ours != theirs:
            disagree.append({"class": cls, "mode": mode, "mend": ours, "golden": theirs,
                             "why": _why(r, ours, REVIEWED if reviewed is None else reviewed)})
    return {"classes": sorted({r["model"] for r in rows if r["model"] in golden}), **tally(pairs),
            "pairs": pairs, "disagreements": disagree, "not_both_built": not_both}


def pairs_of(res: dict, golden: dict[str, dict[str, str]]) -> list[dict]:
    """The pairs a comparison compared: its list, or, for one written before the list was kept,
    every pair of its classes that both sides captured less those it could not compare. There a
    pair not listed as a disagreement agreed, so mend's status is the golden one. Pure."""
    if "pairs" in res:
        return list(res["pairs"])
    apart = {(d["class"], d["mode"]) for d in res["not_both_built"]}
    differ = {(d["class"], d["mode"]): d["mend"] for d in res["disagreements"]}
    out = []
    for cls in res["classes"]:
        for mode in MODES:
            theirs = GOLDEN_CAPTURED.get(golden.get(cls, {}).get(mode, ""))
            if theirs is not None and (cls, mode) not in apart:
                out.append({"class": cls, "mode": mode, "mend": differ.get((cls, mode), theirs), "golden": theirs})
    return out


def amend(res: dict, meta: dict, earlier: dict, golden: dict[str, dict[str, str]]) -> tuple[dict, dict]:
    """``res`` and ``meta`` with an earlier comparison's pairs, lists, samples and sweep time
    added; ValueError where both compared a class (a pair counted twice). Pure."""
    seen = set(earlier.get("classes") or ()) | {d["class"] for k in ("disagreements", "not_both_built")
                                                for d in earlier[k]}
    both = sorted(seen & set(res["classes"]))
    if both:
        raise ValueError(f"the earlier comparison also has {', '.join(both[:5])}: samples must not overlap")
    pairs = pairs_of(earlier, golden) + res["pairs"]
    out = {**res, **tally(pairs), "pairs": pairs, "disagreements": earlier["disagreements"] + res["disagreements"],
           "not_both_built": earlier["not_both_built"] + res["not_both_built"],
           "classes": sorted(set(earlier.get("classes") or ()) | set(res["classes"]))}
    old = earlier["meta"]
    samples = [x for x in (old.get("sample"), meta.get("sample")) if x]
    return out, {**meta, "sample": "; and ".join(samples), "wall_s": old.get("wall_s", 0) + meta.get("wall_s", 0)}


def retry(earlier: dict, golden: dict[str, dict[str, str]], rows: list[dict]) -> tuple[dict, int]:
    """``earlier`` with each pair it could not compare (not captured by both) that ``rows`` ran
    again compared anew (after a builder fix, say); a pair it compared keeps its result, so no
    pair counts twice. Pure. Returns the comparison and the number of pairs run again."""
    again = {(r["model"], r["run_mode"]): r for r in rows}
    redo = [again[(d["class"], d["mode"])] for d in earlier["not_both_built"] if (d["class"], d["mode"]) in again]
    new = compare(golden, redo)
    kept = [d for d in earlier["not_both_built"] if (d["class"], d["mode"]) not in again]
    base = {k: v for k, v in earlier.items() if k != "meta"}  # the caller writes the meta
    pairs = pairs_of(earlier, golden) + new["pairs"]
    return {**base, **tally(pairs), "pairs": pairs, "disagreements": earlier["disagreements"] + new["disagreements"],
            "not_both_built": kept + new["not_both_built"]}, len(redo)


def on_fullgraph(res: dict, golden: dict[str, dict[str, str]], rows: list[dict]) -> dict:
    """``res``'s pairs compared as the public sweep compiles them (``fullgraph=True``), from the
    rows of ``mend sweep --fullgraph`` (every class the default compile broke on, and a check
    sample of the rest). A pair without such a row that the default compile captured as one
    graph stays one graph: fullgraph=True differs only at a break. One the default compile broke
    on without a captured fullgraph row is not compared. Rows of classes ``res`` never had (a
    sample swept with --fullgraph alone), and of pairs it could not compare (a default compile
    that timed out), are compared as they are. Pure."""
    fg = {(r["model"], r["run_mode"]): r for r in rows}
    pairs, disagree, not_both = [], [], []
    inferred = checked = held = 0
    for p in pairs_of(res, golden):
        r = fg.get((p["class"], p["mode"]))
        ours = MEND_CAPTURED.get(r["status"]) if r else None
        if r is None and p["mend"] == "clean":
            ours, inferred = "clean", inferred + 1
        elif r is not None and p["mend"] == "clean" and ours is not None:
            checked, held = checked + 1, held + (ours == "clean")
        if ours is None:
            got = f"{r['status']}: {r.get('why', '')}".rstrip(": ") if r else "not run with --fullgraph"
            not_both.append({"class": p["class"], "mode": p["mode"], "mend": got, "golden": p["golden"]})
            continue
        pairs.append({**p, "mend": ours})
        if ours != p["golden"]:
            disagree.append({"class": p["class"], "mode": p["mode"], "mend": ours, "golden": p["golden"],
                             "why": _why(r or {"model": p["class"]}, ours, {})})
    apart = {(d["class"], d["mode"]) for d in res["not_both_built"]}
    new = compare(golden, [r for r in rows if r["model"] not in set(res["classes"])
                           or (r["model"], r["run_mode"]) in apart], reviewed={})
    pairs += new["pairs"]
    more = set(new["classes"]) - set(res["classes"])
    return {**tally(pairs), "classes": len(res["classes"]) + len(more), "more_classes": len(more),
            "pairs": pairs, "disagreements": disagree + new["disagreements"],
            "not_both_built": not_both + new["not_both_built"], "kept_clean": inferred,
            "check": {"run": checked, "one_graph": held}}


def _markdown(res: dict, meta: dict) -> str:
    lines = ["# mend sweep transformers against the public golden set", "",
             f"Golden set: {meta['golden']} (torch 2.11, transformers 5.5.3). mend ran with torch "
             f"{meta.get('torch')}, transformers {meta.get('transformers')} on {meta['sample'] or 'the classes named'} "
             f"({meta['wall_s']:.0f} s of sweeps).", "",
             f"**{res['agree']} of {res['compared']} (class, mode) pairs both sides captured agree"
             + (f" ({100 * res['share']:.1f} %)**" if res["share"] is not None else "**"), ""]
    for m, d in res["by_mode"].items():
        share = f"{100 * d['agree'] / d['compared']:.1f} %" if d["compared"] else "-"
        lines.append(f"- {m}: {d['agree']} / {d['compared']} ({share})")
    lines += ["", "## Disagreements", ""]
    lines += [f"- {d['class']} [{d['mode']}]: mend {d['mend']}, golden {d['golden']}: {d['why']}"
              for d in res["disagreements"]] or ["(none)"]
    lines += ["", "## Not captured by both", ""]
    lines += [f"- {d['class']} [{d['mode']}]: mend {d['mend'][:160]}; golden {d['golden']}"
              for d in res["not_both_built"]] or ["(none)"]
    if "fullgraph" in res:
        fg = res["fullgraph"]
        lines += ["", "## Compiled as the public sweep compiles (fullgraph=True)", "",
                  f"**{fg['agree']} of {fg['compared']} pairs agree**"
                  + (f" ({100 * fg['share']:.1f} %)" if fg["share"] is not None else ""), ""]
        lines += [f"- {d['class']} [{d['mode']}]: mend {d['mend']}, golden {d['golden']}: {d['why']}"
                  for d in fg["disagreements"]]
    return "\n".join(lines) + "\n"


def fullgraph(name: str, mode: str) -> dict[str, object]:
    """{"default": graphs, "fullgraph": graphs} of ``name`` built as ``mend sweep`` builds it,
    compiled with a counting backend (an int, or what the call raised)."""
    import torch

    from graphmend.sweep.hf import target

    def count(full: bool) -> object:
        torch._dynamo.reset()
        torch.manual_seed(0)
        model, args, kwargs = target(name)
        model.train(mode == "train")
        graphs = [0]

        def backend(gm, example_inputs):
            graphs[0] += 1
            return gm.forward

        try:
            with torch.set_grad_enabled(mode == "train"):
                torch.compile(model, fullgraph=full, backend=backend)(*args, **kwargs)
        except Exception as exc:  # the comparison's finding: what fullgraph=True refuses
            return f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        return graphs[0]

    return {"default": count(False), "fullgraph": count(True)}


def same_program(worker_dir: Path, name: str, mode: str, theirs: bool = False) -> dict[str, object]:
    """mend's capture (``fullgraph=True``) of ``name`` run exactly as the public sweep runs it:
    its own worker (``worker_dir``, the corpus repository's ``sweep/`` folder) builds the model
    and inputs, runs eager (placing image tokens again where eager rejects their count) and
    compiles; its ``torch.compile`` is mend's capture of that call. {"status": mend's row status,
    "why": its error, "where": break sites}; with ``theirs``, "worker_here": the status the
    worker gives on this machine compiling as it does (the golden set was recorded on a GPU)."""
    sys.path.insert(0, str(worker_dir))
    import models  # the corpus's sweep/models.py and sweep/worker.py
    import torch
    import worker

    from tracer.worker import capture_loaded

    spec = next((s for s in models.enumerate_hf() if s["name"] == name), None)
    if spec is None:
        return {"status": "not built", "why": f"the corpus's worker does not enumerate {name}"}
    got = []

    def compile_(model, **_):
        def call(*args, **kwargs):
            if not got:  # the first call is the one its identify pass compiles; later ones recheck numerics
                torch.compile = real  # the capture's own compile
                try:
                    got.append(capture_loaded(name, "", "forward", model, args, kwargs, mode=mode, fullgraph=True))
                finally:
                    torch.compile = compile_
            return model(*args, **kwargs)
        return call

    here = worker.run_identify(spec, "cpu", mode).get("status") if theirs else None
    real = torch.compile
    torch.compile = compile_
    try:
        ran = worker.run_identify(spec, "cpu", mode)
    finally:
        torch.compile = real
    if not got:
        return {"status": "failed", "why": f"the worker never compiled: {ran.get('status')}: {ran.get('error', '')}"[:300]}
    r = got[0]
    status = "failed" if r.error else "breaks" if (r.breaks or r.graph_break_count) else "one graph"
    return {"status": status, "why": r.error or "", "where": [f"{b.file}:{b.line}" for b in r.breaks],
            **({"worker_here": here} if theirs else {})}


def _short(path: str) -> str:
    return path.split("site-packages/", 1)[-1]


def with_same_program(fg: dict, runs: list[dict]) -> dict:
    """``fg`` (``on_fullgraph``'s result) with each disagreement that ``same-program`` ran again
    (``runs``: its JSON lines) given what mend's capture saw on the public sweep's own model and
    inputs; ``same_program`` counts them, those that agree there, and of the rest those where the
    corpus's worker itself, run on this machine, gives mend's status. Pure."""
    by = {(r["model"], r["mode"]): r for r in runs}
    out, agree, ran, here = [], 0, 0, 0
    for d in fg["disagreements"]:
        r = by.get((d["class"], d["mode"]))
        ours = MEND_CAPTURED.get(r["status"]) if r else None
        if ours is None:
            out.append(d)
            continue
        ran += 1
        agree += ours == d["golden"]
        seen = f"{r['status']}" + (f" at {', '.join(_short(w) for w in r['where'])}" if r.get("where") else "")
        if r.get("worker_here"):
            seen += f"; its worker compiling as it does, on this machine: {r['worker_here']}"
            here += ours != d["golden"] and GOLDEN_CAPTURED.get(r["worker_here"]) == ours
        out.append({**d, "same_program": ours,
                    "why": f"{d['why']}; on the public sweep's own model and inputs (its worker's build and "
                           f"call, captured by mend with fullgraph=True): {seen}"})
    return {**fg, "disagreements": out, "same_program": {"run": ran, "agree": agree, "worker_here_same": here}}


_PAIR = re.compile(r'\{\n\s+"class": ("[^"]*"),\n\s+"mode": ("[^"]*"),\n\s+"mend": ("[^"]*"),\n\s+'
                   r'"golden": ("[^"]*")\n\s+\}')


def _dumps(obj: dict) -> str:
    """JSON indented by one, each compared pair on a line of its own (a comparison holds a thousand)."""
    return _PAIR.sub(r'{"class": \1, "mode": \2, "mend": \3, "golden": \4}', json.dumps(obj, indent=1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--golden", required=True, type=Path)
    s.add_argument("--every", type=int, default=1)
    s.add_argument("--offset", type=int, default=0)
    f = sub.add_parser("fullgraph")
    f.add_argument("model")
    f.add_argument("mode", nargs="?", default="eval", choices=MODES)
    sp = sub.add_parser("same-program")
    sp.add_argument("--worker-dir", required=True, type=Path, help="the corpus repository's sweep/ folder")
    sp.add_argument("model")
    sp.add_argument("mode", nargs="?", default="eval", choices=MODES)
    sp.add_argument("--theirs", action="store_true", help="also the worker's own status on this machine")
    c = sub.add_parser("compare")
    c.add_argument("--golden", required=True, type=Path)
    c.add_argument("--sweep", type=Path, nargs="*", default=[], help="mend sweep JSON reports (rows joined); "
                   "none with --retry: the earlier comparison as it is (to add --fullgraph-sweep)")
    c.add_argument("--out", required=True, type=Path)
    c.add_argument("--sample", default="", help="how the classes were chosen, for the report")
    c.add_argument("--amend", type=Path, help="an earlier comparison's JSON (another sample) to add to this one")
    c.add_argument("--fullgraph-sweep", type=Path, nargs="+", help="mend sweep --fullgraph reports: the pairs "
                   "compared once more as the public sweep compiles them (the result's \"fullgraph\")")
    c.add_argument("--same-program", type=Path, help="same-program's JSON lines: the fullgraph disagreements run "
                   "again on the public sweep's own model and inputs")
    c.add_argument("--retry", type=Path, help="an earlier comparison's JSON whose pairs not captured by both "
                                              "the sweeps ran again: compared anew, the rest kept")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    if args.cmd == "fullgraph":
        print(json.dumps({"model": args.model, "mode": args.mode, **fullgraph(args.model, args.mode)}))
        return 0
    if args.cmd == "same-program":
        got = same_program(args.worker_dir.resolve(), args.model, args.mode, args.theirs)
        print(json.dumps({"model": args.model, "mode": args.mode, **got}))
        return 0
    golden = load_golden(args.golden.read_text(encoding="utf-8"))
    if args.cmd == "sample":
        import transformers

        from graphmend.sweep.hf import enumerate_classes

        known = {u["class"] for u in enumerate_classes() if hasattr(transformers, u["class"])}
        print("\n".join(sample(golden, known, args.every, args.offset)))
        return 0
    from graphmend.core.sources import read_report_text, write_atomic

    if not args.sweep and not args.retry:
        print("error: --sweep: give the sweep reports to compare (or --retry EARLIER.json)", file=sys.stderr)
        return 2
    sweeps = [json.loads(read_report_text(p)) for p in args.sweep]
    full = [json.loads(read_report_text(p)) for p in args.fullgraph_sweep or ()]
    for path, s in zip(args.fullgraph_sweep or (), full):
        if not s.get("fullgraph"):
            print(f"error: --fullgraph-sweep {path}: not a mend sweep --fullgraph report", file=sys.stderr)
            return 2
    sweep = sweeps[0] if sweeps else {}
    for s in sweeps + full:
        with_sites(s)
    res = compare(golden, [r for s in sweeps for r in s["rows"]])
    meta = {"golden": "penguinwu/oss-model-graph-break-corpus corpus/golden_set.json",
            "torch": sweep.get("torch_version"), "transformers": sweep.get("library_version"),
            "selection": "; ".join(s.get("selection", "") for s in sweeps),
            "wall_s": sum(s.get("totals", {}).get("wall_s", 0) for s in sweeps), "sample": args.sample}
    if args.retry:
        try:
            earlier = json.loads(args.retry.read_text(encoding="utf-8"))
            res, n = retry(earlier, golden, [r for s in sweeps for r in s["rows"]])
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: --retry {args.retry}: {exc}", file=sys.stderr)
            return 2
        old = earlier["meta"]
        note = f"; {n} pairs not captured by both run again" + (f" ({args.sample})" if args.sample else "")
        meta = {**old, "sample": f"{old.get('sample')}{note if n else ''}", "wall_s": old.get("wall_s", 0) + meta["wall_s"]}
    elif args.amend:
        try:
            res, meta = amend(res, meta, json.loads(args.amend.read_text(encoding="utf-8")), golden)
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: --amend {args.amend}: {exc}", file=sys.stderr)
            return 2
    if full:
        res["fullgraph"] = on_fullgraph(res, golden, [r for s in full for r in s["rows"]])
        if args.same_program:
            runs = [json.loads(line) for line in args.same_program.read_text(encoding="utf-8").splitlines() if line.strip()]
            res["fullgraph"] = with_same_program(res["fullgraph"], runs)
        meta = {**meta, "fullgraph_wall_s": sum(s.get("totals", {}).get("wall_s", 0) for s in full),
                "fullgraph_selection": "; ".join(s.get("selection", "") for s in full)}
    write_atomic(Path(f"{args.out}.json"), _dumps({"meta": meta, **res}) + "\n")
    write_atomic(Path(f"{args.out}.md"), _markdown(res, meta))
    print(f"{res['agree']}/{res['compared']} agree" + (f"; with fullgraph=True {res['fullgraph']['agree']}/"
                                                         f"{res['fullgraph']['compared']}" if full else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
