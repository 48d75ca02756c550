"""Record what the installed torch says about graph breaks, for tests/fixtures/messages.

    python benchmarks/record_messages.py                 # writes tests/fixtures/messages/torch_X_Y.json
    python benchmarks/record_messages.py -o out.json --skip-corpus

Two sources, both run under Dynamo with its ``graph_breaks`` log on:
- the small functions of benchmarks/message_cases.py, whose rule each case declares;
- every corpus target in eval mode, whose break sites' rules are corpus/manifest.toml's.

For every break it keeps the log record verbatim (paths shortened to /src, /torch and
/python), the gb_type and registry id (from the record's registry link read through
torch's own gb registry, else from the ``Unsupported`` Dynamo raised), and the source
line; for every function, what ``torch._dynamo.explain`` counts. Nothing is classified
here: tests/tracer/test_tracer_messages.py parses and classifies the recordings and compares
with what was declared, and tests/test_corpus_manifest.py compares the corpus counts.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import linecache
import re
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "messages"
_HEAD = re.compile(r"^Graph break(?: \([^)]*\))? in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_GBID = re.compile(r"/gb/gb(\d{4})\.html", re.I)


def _torch_key(version: str) -> str:
    return "_".join(version.split("+")[0].split(".")[:2])


class _Texts:
    """The graph_breaks log records and the Unsupported exceptions of one run."""

    def __init__(self) -> None:
        self.records: list[str] = []
        self.raised: list[str] = []  # gb_type of every Unsupported Dynamo constructed


@contextlib.contextmanager
def recording(texts: _Texts):
    import torch._dynamo.exc as exc

    from tracer.recorder import Recorder

    rec = Recorder()
    on_record = rec._on_record
    init = exc.Unsupported.__init__

    def keep(record):
        if not record.name.endswith("__recompiles"):
            texts.records.append(record.getMessage())
        on_record(record)

    def unsupported(self, *a, **k):
        init(self, *a, **k)
        texts.raised.append(getattr(self, "gb_type", "") or "")

    rec._on_record = keep
    exc.Unsupported.__init__ = unsupported
    try:
        with rec:
            yield rec
    finally:
        exc.Unsupported.__init__ = init


def _registry() -> dict[str, list[str]]:
    """gb id ("GB0170") -> its gb_types, from torch's own registry file."""
    import torch._dynamo.exc as exc

    try:
        by_type = exc._load_gb_type_to_gb_id_map()
    except Exception:
        return {}
    by_id: dict[str, list[str]] = {}
    for gb_type, gb_id in by_type.items():
        by_id.setdefault(gb_id.upper(), []).append(gb_type)
    return by_id


def _gb_type(registry_id: str | None, raised: list[str], registry: dict[str, list[str]]) -> str | None:
    """The gb_type of the record's registry id that Dynamo raised (several types can share an
    id, and some registry names are placeholders), else the registry's one real name for it,
    else the one type raised."""
    named = registry.get(registry_id or "", [])
    for gb_type in raised:
        if gb_type in named:
            return gb_type
    real = [t for t in named if not t.startswith("_")]
    if len(real) == 1:
        return real[0]
    return raised[0] if len(set(raised)) == 1 and raised[0] else None


def _shorten(text: str, src_dirs: list[Path]) -> str:
    import torch

    for d in src_dirs:
        text = text.replace(str(d), "/src")
    text = text.replace(str(Path(torch.__file__).parent), "/torch")
    return text.replace(sysconfig.get_paths()["stdlib"], "/python")


def _explain(fn, args) -> dict:
    import torch

    torch._dynamo.reset()
    with contextlib.redirect_stdout(io.StringIO()):
        out = torch._dynamo.explain(fn)(*args)
    return {"graph_count": out.graph_count, "graph_break_count": out.graph_break_count}


def _entry(text: str, raised: list[str], registry: dict[str, list[str]], src_dirs: list[Path]) -> dict:
    import torch

    head = _HEAD.search(text)
    file, line = (head["file"], int(head["line"])) if head else (None, None)
    gb = _GBID.search(text)
    registry_id = f"GB{gb[1]}" if gb else None
    gb_type = _gb_type(registry_id, raised, registry)
    # the lines after the break's: the classifier reads them (an `if` whose body raises)
    following = [linecache.getline(file, line + i).rstrip() for i in (1, 2, 3)] if file else []
    return {"torch": torch.__version__, "text": _shorten(text, src_dirs), "gb_type": gb_type,
            "registry_id": registry_id, "file": file, "line": line,
            "source_line": linecache.getline(file, line).strip() if file else None, "following": following}


def record_cases(registry: dict[str, list[str]]) -> tuple[list[dict], list[str]]:
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import message_cases

    src = [Path(message_cases.__file__).resolve().parent]
    cases, quiet = [], []
    for name, (fn, rule, skipped) in message_cases.CASES.items():
        texts = _Texts()
        torch._dynamo.reset()
        with contextlib.redirect_stdout(io.StringIO()), recording(texts) as rec, \
                torch._dynamo.config.patch(verbose=False), warnings_off():
            torch.compile(fn, backend=rec.backend, dynamic=name in message_cases.DYNAMIC or None)(torch.randn(8))
        first = [t for t in texts.records if "duplicate graph break" not in t]
        if not first:
            quiet.append(name)
            continue
        entry = _entry(first[0], texts.raised, registry, src)
        cases.append({"case": name, **entry, "rule": rule, "frame_skipped": skipped,
                      "explain": _explain(fn, (torch.randn(8),))})
    return cases, quiet


@contextlib.contextmanager
def warnings_off():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def record_corpus(registry: dict[str, list[str]], skip_hf: bool) -> tuple[list[dict], list[dict]]:
    """One record per manifest break site the log shows, and explain's counts per target."""
    import torch

    sys.path.insert(0, str(ROOT))
    from corpus.measure import CORPUS, measure, target_names, unpack
    from graphmend.core.config import tomllib
    from graphmend.core.modes import run_mode

    manifest = tomllib.loads((CORPUS / "manifest.toml").read_text(encoding="utf-8"))["targets"]
    skip = {"measure.py", "__init__.py"} | ({"hf_models.py"} if skip_hf else set())
    records, counts, seen = [], [], set()
    for path in sorted(CORPUS.glob("*.py")):
        if path.name in skip:
            continue
        for function in target_names(path):
            row = measure(path.name, function, "eval")
            counts.append({k: row.get(k) for k in ("target", "mode", "graph_count", "graph_break_count", "error")
                           if row.get(k) is not None})
            entry = manifest.get(f"{path.name}::{function}", {})
            if entry.get("hf") or not entry.get("sites"):
                continue  # hf sites are transformers' lines, which move with its version
            rules: dict[int, list[str]] = {}
            for site in entry["sites"]:
                rules.setdefault(site["line"], []).append(site["rule"])
            mod = importlib.import_module(f"corpus.{path.stem}")
            texts = _Texts()
            try:
                fn, args, kwargs = unpack(getattr(mod, function)())
                torch._dynamo.reset()
                with contextlib.redirect_stdout(io.StringIO()), recording(texts) as rec, warnings_off(), \
                        torch._dynamo.config.patch(verbose=False), run_mode(fn, "eval"):
                    torch.compile(fn, backend=rec.backend)(*args, **kwargs)
            except Exception as e:  # one broken target never stops the rest
                print(f"{path.name}::{function}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            for text in texts.records:
                if "duplicate graph break" in text:
                    continue
                e = _entry(text, texts.raised, registry, [CORPUS.parent])
                if e["file"] is None or Path(e["file"]).resolve().parent != CORPUS or e["line"] not in rules:
                    continue
                key = (path.name, e["line"])
                if key in seen:
                    continue
                seen.add(key)
                # frame_skipped None: the manifest does not say (a site's rule is what it pins);
                # a line with two sites (an int() inside a logging call) pins either rule
                which = rules[e["line"]]
                records.append({"case": f"corpus-{path.stem}-{e['line']}", **e,
                                **({"rule": which[0]} if len(which) == 1 else {"rules": which}),
                                "frame_skipped": None})
    return records, counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", type=Path, help="default: tests/fixtures/messages/torch_X_Y.json")
    p.add_argument("--skip-corpus", action="store_true")
    p.add_argument("--skip-hf", action="store_true", help="leave out hf_models.py's explain counts")
    ns = p.parse_args(argv)
    import torch

    sys.path.insert(0, str(ROOT))
    registry = _registry()
    cases, quiet = record_cases(registry)
    corpus_cases, counts = ([], []) if ns.skip_corpus else record_corpus(registry, ns.skip_hf)
    for c in cases + corpus_cases:
        del c["file"], c["line"]
    out = ns.output or FIXTURES / f"torch_{_torch_key(torch.__version__)}.json"
    doc = {"torch": torch.__version__, "recorded_by": "benchmarks/record_messages.py",
           "no_break": quiet, "cases": cases + corpus_cases, "corpus_explain": counts}
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"torch {torch.__version__}: {len(cases)} cases ({len(quiet)} do not break: {', '.join(quiet) or '-'}), "
          f"{len(corpus_cases)} corpus records, {len(counts)} corpus targets counted -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
