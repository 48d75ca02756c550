"""How many transformers model classes ``mend sweep transformers`` builds tiny and runs to an
eager forward: every class of the enumeration (graphmend/sweep/hf.py ``enumerate_classes``),
each built by ``build_class`` (which ends with one eager forward), in worker processes with a
per-class timeout, so a hang or a crash costs only its class.

    python benchmarks/hf_build_rate.py --out benchmarks/results/hf-build-rate-5.25 -j 2
    python benchmarks/hf_build_rate.py --only BertModel WhisperForConditionalGeneration --out /tmp/b
    python benchmarks/hf_build_rate.py --every 10 --out /tmp/b            # every 10th class
    python benchmarks/hf_build_rate.py --every 5 --from-log LOG --wall S --out ...   # a stopped run's log

Writes ``OUT.json`` (per class: modality, built, seconds, why not) and ``OUT.md`` (the share
built per modality, then the reasons of the classes not built, grouped).
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import queue
import re
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from graphmend.core.sources import write_atomic  # noqa: E402


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _one(args: tuple[str, int]) -> dict:
    """Build one class in this worker; a SIGALRM stops one that runs past ``timeout``."""
    name, timeout = args
    from graphmend.core.worker import describe
    from graphmend.sweep.building import NotBuilt
    from graphmend.sweep.hf import build_class

    signal.signal(signal.SIGALRM, _alarm)
    start = time.perf_counter()
    signal.alarm(timeout)
    try:
        build_class(name)
        out = {"built": True, "why": ""}
    except _Timeout:
        out = {"built": False, "why": f"timed out after {timeout} s"}
    except NotBuilt as exc:
        out = {"built": False, "why": str(exc)}
    except BaseException as exc:  # a builder bug is a finding too
        out = {"built": False, "why": f"builder raised {describe(exc)}"}
    finally:
        signal.alarm(0)
    out["seconds"] = round(time.perf_counter() - start, 2)
    return {"class": name, **out}


def _worker(tasks, results, work) -> None:
    """Build (``work``) the classes ``tasks`` hands this process until it hands None."""
    for args in iter(tasks.get, None):
        results.put(work(args))


# a fresh worker every few classes: a model's memory and patched globals stay with it
PER_WORKER = 25
GRACE = 30  # seconds past the timeout before a worker whose alarm did not fire is killed


def _run_all(names: list[str], jobs: int, timeout: int, work=_one):
    """Each class's result as it comes, from ``jobs`` worker processes. A class whose build holds
    the interpreter in one native call past its alarm (a full-size backbone's convolution) has its
    worker killed after a grace period and is a row ``timed out``; the others go on."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    todo = list(reversed(names))
    slots: list[dict] = []  # each: process, its task queue, the class it builds and since when, classes done

    def start() -> dict:
        tasks = ctx.Queue()
        proc = ctx.Process(target=_worker, args=(tasks, results, work), daemon=True)
        proc.start()
        return {"proc": proc, "tasks": tasks, "name": None, "since": 0.0, "done": 0}

    def feed(slot: dict) -> None:
        if slot["done"] >= PER_WORKER or not todo:
            slot["tasks"].put(None)
            slot["proc"].join(timeout=GRACE)
            if slot["proc"].is_alive():
                slot["proc"].kill()
            slots.remove(slot)
            if todo:
                slots.append(new := start())
                feed(new)
            return
        slot["name"], slot["since"] = todo.pop(), time.perf_counter()
        slot["tasks"].put((slot["name"], timeout))

    for _ in range(min(jobs, len(names))):
        slots.append(slot := start())
        feed(slot)
    while slots:
        try:
            r = results.get(timeout=1)
        except queue.Empty:
            r = None
        if r is not None:
            slot = next((s for s in slots if s["name"] == r["class"]), None)
            if slot is None:  # from a worker killed as its result came: its row is written
                continue
            slot["done"] += 1
            slot["name"] = None
            yield r
            feed(slot)
            continue
        for slot in list(slots):
            spent = time.perf_counter() - slot["since"]
            if slot["name"] and (spent > timeout + GRACE or not slot["proc"].is_alive()):
                slot["proc"].kill()
                slot["proc"].join()
                why = (f"timed out after {timeout} s (killed)" if spent > timeout + GRACE
                       else f"worker died (exit code {slot['proc'].exitcode})")
                yield {"class": slot["name"], "built": False, "why": why, "seconds": round(spent, 2)}
                slots.remove(slot)
                if todo:
                    slots.append(new := start())
                    feed(new)


def _group(why: str) -> str:
    """A reason without its specifics (numbers, names in quotes), to group like failures."""
    why = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", why)
    return re.sub(r"\d+", "N", why)[:140]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="OUT.json and OUT.md are written")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per class")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--every", type=int, default=1, help="every k-th class of the enumeration")
    ap.add_argument("--from-log", default=None, help="summarise a stopped run from its progress lines "
                    "(reasons cut to 100 characters, no times)")
    ap.add_argument("--wall", type=float, default=None, help="with --from-log: the run's wall seconds")
    args = ap.parse_args(argv)
    import transformers

    from graphmend.sweep.hf import enumerate_classes

    units = {u["class"]: u for u in enumerate_classes()}
    names = args.only or list(units)[::args.every]
    start = time.perf_counter()
    rows = []
    if args.from_log:  # a run stopped before its end: its progress lines, the rest without a result
        seen = {}
        for line in Path(args.from_log).read_text(encoding="utf-8").splitlines():
            m = re.match(r"\[\d+/\d+\] (\w+): (.*)$", line)
            if m:
                seen[m.group(1)] = m.group(2)
        for n in names:
            why = seen.get(n, "no result: the run was stopped before this class finished")
            rows.append({"class": n, "built": why == "built", "why": "" if why == "built" else why,
                         "modality": units.get(n, {}).get("modality", "?")})
    else:
        for i, r in enumerate(_run_all(names, args.jobs, args.timeout)):
            r["modality"] = units.get(r["class"], {}).get("modality", "?")
            rows.append(r)
            print(f"[{i + 1}/{len(names)}] {r['class']}: {'built' if r['built'] else r['why'][:100]}",
                  file=sys.stderr, flush=True)
    order = {n: i for i, n in enumerate(names)}
    rows.sort(key=lambda r: order[r["class"]])
    by_mod: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for r in rows:
        by_mod[r["modality"]][0] += 1
        by_mod[r["modality"]][1] += r["built"]
    built = sum(r["built"] for r in rows)
    summary = {"transformers": transformers.__version__, "enumerated": len(units), "tried": len(rows),
               "selection": "all" if args.every == 1 and not args.only else
               (f"every {args.every}th class" if not args.only else "--only"),
               "built": built, "share": round(built / max(1, len(rows)), 4),
               "by_modality": {m: {"tried": t, "built": b} for m, (t, b) in sorted(by_mod.items())},
               "wall_s": args.wall if args.from_log else round(time.perf_counter() - start, 1), "jobs": args.jobs, "cpus": os.cpu_count(),
               "timeout_s": args.timeout}
    out = Path(args.out)
    write_atomic(Path(f"{out}.json"), json.dumps({"summary": summary, "classes": rows}, indent=1) + "\n")
    lines = [f"# transformers {summary['transformers']}: classes built tiny and run to an eager forward", "",
             f"`python benchmarks/hf_build_rate.py` ({summary['selection']}, {args.jobs} processes, "
             f"{args.timeout} s a class, {summary['wall_s']} s wall on {summary['cpus']} CPUs)", "",
             f"**{built} of {len(rows)} built and ran ({100 * summary['share']:.1f} %)**; "
             f"{len(units)} classes enumerated.", "", "| modality | tried | built | share |", "| --- | --- | --- | --- |"]
    for m, d in summary["by_modality"].items():
        lines.append(f"| {m} | {d['tried']} | {d['built']} | {100 * d['built'] / max(1, d['tried']):.1f} % |")
    groups = collections.defaultdict(list)
    for r in rows:
        if not r["built"]:
            groups[_group(r["why"])].append(r)
    lines += ["", "## Not built", ""]
    for key, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"- {len(rs)} × `{rs[0]['why'][:200]}`: {', '.join(r['class'] for r in rs[:12])}"
                     + (" …" if len(rs) > 12 else ""))
    write_atomic(Path(f"{out}.md"), "\n".join(lines) + "\n")
    print(f"{built}/{len(rows)} built ({100 * summary['share']:.1f} %)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
