"""The corpus manifest against what the installed torch reports.

Counts are checked twice: with bare ``torch._dynamo.explain`` (the definition of the
numbers) and with the tracer's capture (what ``mend analyze corpus/`` reports). Both come
from the session's ``corpus_capture`` (tests/conftest.py: one worker per corpus file, the
capture then explain after ``torch._dynamo.reset()``), shared with test_tracer_capture and
test_corpus_models. Each site's rule is checked against the tracer's and the static
scanner's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import sys
import tomllib
from pathlib import Path

import pytest

from graphmend.core.targets import normalise
from rewrites.rules import CATEGORIES, category_of

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"
# Patterns the corpus promises to exercise.
REQUIRED_RULES = {"GM101", "GM102", "GM103", "GM104", "GM201", "GM202", "GM203", "GM301", "GM302", "GM303",
                  "GM401", "GM402", "GM501", "GM502", "GM503", "GM504", "GM505", "GM601", "GM603", "GM604"}


MODES = ["eval", "train"]


def torch_key() -> str:
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def expected(entry: dict, mode: str = "eval") -> dict:
    """The manifest's counts for this torch in run ``mode`` (corpus/measure.py reads them so)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from corpus.measure import expected as measured

    return measured(entry, mode, torch_key())


def dynamic_lines(entry: dict, mode: str) -> set:
    """The sites Dynamo reports in ``mode``: ``dynamic = false`` in none, ``modes`` in those."""
    return {s["line"] for s in entry.get("sites", []) if s.get("dynamic", True) and mode in s.get("modes", MODES)}


@pytest.fixture(scope="module")
def manifest() -> dict:
    return tomllib.loads((CORPUS / "manifest.toml").read_text(encoding="utf-8"))["targets"]


@pytest.fixture(scope="module")
def local(manifest) -> dict:
    return {k: v for k, v in manifest.items() if not v.get("hf")}


@pytest.fixture(scope="module")
def discovered():
    from graphmend.core.config import Config
    from graphmend.core.discovery import discover

    found = discover([str(CORPUS)], Config(root=ROOT))
    assert not found.errors, found.errors
    return found.targets


def _load(name: str):
    file, fn = name.split("::")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    t = normalise(getattr(importlib.import_module(f"corpus.{Path(file).stem}"), fn)(), name)
    return t.fn, t.args, t.kwargs  # a tuple or a graphmend.Target


def _explained(local, corpus_capture, mode: str) -> dict:
    """name -> (graph_count, graph_break_count, break lines in the target's file)."""
    out = {}
    for name in local:
        ref = corpus_capture.of(mode)[1][name]
        assert not isinstance(ref, str), f"{name}: explain raised {ref}"
        graphs, breaks, stacks = ref
        file = Path(name.split("::")[0]).name
        lines = set()
        for stack in stacks:
            frames = [(f, ln) for f, ln in stack if str(Path(f).resolve()).startswith(str(CORPUS))]
            if frames:
                lines.add((Path(frames[-1][0]).name, frames[-1][1]))
        out[name] = (graphs, breaks, {ln for f, ln in lines if f == file})
    return out


@pytest.fixture(scope="module")
def explained(local, corpus_capture) -> dict:
    return _explained(local, corpus_capture, "eval")


@pytest.fixture(scope="module")
def explained_modes(local, corpus_capture) -> dict:
    return {mode: _explained(local, corpus_capture, mode) for mode in MODES}


def test_corpus_size_and_clean_models(local):
    broken_or_clean = {k: v for k, v in local.items() if "reference_of" not in v}
    assert len(broken_or_clean) >= 24
    clean = [k for k, v in broken_or_clean.items() if v["clean"] and v["graph_break_count"] == 0]
    assert len(clean) >= 3, clean
    assert sum(1 for v in local.values() if "reference" in v) >= 6
    assert "mlp_stack.py::mend_target_mlp_stack" in local and local["mlp_stack.py::mend_target_mlp_stack"].get("reference")


def test_every_rule_family_is_covered(local):
    rules = {s["rule"] for v in local.values() for s in v.get("sites", [])}
    assert REQUIRED_RULES <= rules, REQUIRED_RULES - rules
    categories = {c for v in local.values() for c in v["categories"]}
    assert set(CATEGORIES) - {"unexplained", "recompile"} <= categories
    # recompiles are no break: the manifest's `recompiles` entries cover their family
    assert {"GM701", "GM702"} <= {r["rule"] for v in local.values() for r in v.get("recompiles", [])}


def test_manifest_entries_are_consistent(local):
    for name, entry in local.items():
        sites = entry.get("sites", [])
        assert entry["clean"] == (not sites), name
        assert entry["categories"] == sorted({category_of(s["rule"]) for s in sites}), name
        assert entry.get("breaks", len(sites)) == len(sites), name
        source = (CORPUS / name.split("::")[0]).read_text(encoding="utf-8").splitlines()
        for s in sites + entry.get("recompiles", []):
            assert 1 <= s["line"] <= len(source) and source[s["line"] - 1].strip(), (name, s)
            assert s["fixable"] or s.get("why"), \
                f"{name}:{s['line']} is unfixable without a why"
        if "reference" in entry:
            ref = f"{name.split('::')[0]}::{entry['reference']}"
            assert ref in local and local[ref]["clean"], ref


def test_discovered_targets_match_manifest(discovered, manifest):
    names = {t.name for t in discovered}
    assert names == set(manifest), (sorted(names - set(manifest)), sorted(set(manifest) - names))


@pytest.mark.parametrize("mode", MODES)
def test_counts_match_explain(local, explained_modes, mode):
    wrong = []
    for name, entry in local.items():
        want = expected(entry, mode)
        graphs, breaks, lines = explained_modes[mode][name]
        if (graphs, breaks) != (want["graph_count"], want["graph_break_count"]):
            wrong.append(f"{name} [{mode}]: explain {graphs}/{breaks}, "
                         f"manifest {want['graph_count']}/{want['graph_break_count']}")
        dynamic = dynamic_lines(entry, mode)
        if lines != dynamic:
            wrong.append(f"{name} [{mode}]: breaks at lines {sorted(lines)}, manifest {sorted(dynamic)}")
    assert not wrong, "\n".join(wrong)


def test_training_targets_break_only_in_train_mode(local, corpus_capture):
    """corpus/training.py: one graph in eval, breaks in train, each break marked train-only
    when both modes are compared; their references compile whole in both modes."""
    import copy

    from tracer.capture import mark_single_mode

    training = [k for k in local if k.startswith("training.py::")]
    broken = [k for k in training if "reference_of" not in local[k]]
    assert len(broken) >= 4, training
    for name in training:
        ev, tr = corpus_capture.results[name], corpus_capture.train_results[name]
        assert (ev.graph_break_count, ev.error) == (0, None), name
        if "reference_of" in local[name]:
            assert (tr.graph_break_count, tr.error) == (0, None), name
            continue
        assert tr.graph_break_count >= 1 and tr.error is None, (name, tr.error)
        runs = [copy.deepcopy(ev), copy.deepcopy(tr)]
        mark_single_mode(runs)
        assert runs[1].breaks and all(b.only_in_mode == "train" for b in runs[1].breaks), name


@pytest.mark.parametrize("mode", MODES)
def test_references_match_their_broken_sibling(local, explained_modes, mode):
    """A reference compiles whole in both run modes and computes what its broken sibling
    does in each (train mode draws the same random numbers: both are seeded alike)."""
    from graphmend.core.modes import run_mode

    pairs = [(k, f"{k.split('::')[0]}::{v['reference']}") for k, v in local.items() if "reference" in v]
    assert pairs
    for broken, ref in pairs:
        assert explained_modes[mode][ref][1] == 0, (ref, mode)
        fa, aa, ka = _load(broken)
        fb, ab, kb = _load(ref)
        with contextlib.redirect_stdout(io.StringIO()):
            with run_mode(fa, mode):
                torch.manual_seed(1)
                oa = fa(*aa, **ka)
            with run_mode(fb, mode):
                torch.manual_seed(1)
                ob = fb(*ab, **kb)
        flat_a = oa if isinstance(oa, (tuple, list)) else (oa,)
        flat_b = ob if isinstance(ob, (tuple, list)) else (ob,)
        assert len(flat_a) == len(flat_b), broken
        for x, y in zip(flat_a, flat_b):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5, msg=lambda m: f"{broken} vs {ref}: {m}")


@pytest.mark.parametrize("mode", MODES)
def test_capture_matches_manifest(local, corpus_capture, mode):
    wrong = []
    for name, entry in local.items():
        r = corpus_capture.of(mode)[0][name]
        want = expected(entry, mode)
        if mode == "train" and want.get("trains") is False:
            # nothing to backward through: the forward's breaks are still recorded, with the reason
            if not (r.error or "").split(": ", 1)[-1].startswith("cannot train"):
                wrong.append(f"{name} [train]: expected 'cannot train', got {r.error!r}")
            r = dataclasses.replace(r, error=None)
        if r.error or (r.graph_count, r.graph_break_count) != (want["graph_count"], want["graph_break_count"]):
            wrong.append(f"{name}: capture {r.graph_count}/{r.graph_break_count} ({r.error}), "
                         f"manifest {want['graph_count']}/{want['graph_break_count']}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("mode", MODES)
def test_capture_rules_match_manifest_sites(local, corpus_capture, mode):
    """The tracer's rule at every site Dynamo reports (before any correlation with the scan)."""
    wrong = []
    captured = corpus_capture.of(mode)[0]
    for name, entry in local.items():
        file = CORPUS / name.split("::")[0]
        for s in entry.get("sites", []):
            if s["line"] not in dynamic_lines(entry, mode):
                continue
            rules = {b.rule for b in captured[name].breaks if b.file and Path(b.file).resolve() == file and b.line == s["line"]}
            if s["rule"] not in rules:
                wrong.append(f"{name}:{s['line']}: tracer {sorted(rules)}, manifest {s['rule']}")
    assert not wrong, "\n".join(wrong)


def test_scan_rules_match_manifest_sites(local):
    """The static scanner's rule at every site Dynamo breaks on (a ``dynamic = false`` site
    may be one the scanner rightly leaves out: Dynamo traces it)."""
    from rewrites.scan import scan_source

    found: dict[str, dict[int, set]] = {}
    wrong = []
    for name, entry in local.items():
        file = name.split("::")[0]
        if file not in found:
            res = scan_source((CORPUS / file).read_text(encoding="utf-8"), path=str(CORPUS / file), module=f"corpus.{Path(file).stem}")
            assert res.error is None, (file, res.error)
            found[file] = {}
            for f, _key, _root in res.findings:
                found[file].setdefault(f.line, set()).add(f.rule)
        for s in entry.get("sites", []):
            if s.get("dynamic", True) and s["rule"] not in found[file].get(s["line"], set()):
                wrong.append(f"{name}:{s['line']}: scanner {sorted(found[file].get(s['line'], set()))}, manifest {s['rule']}")
    assert not wrong, "\n".join(wrong)


def _tensors(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in _tensors(v)]
    return []


def test_targets_are_deterministic(local):
    """Two builds of a target (each seeds itself) give the same outputs: fix and bench rely on it."""
    for name in local:
        outs = []
        for _ in range(2):
            fn, args, kwargs = _load(name)
            with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
                outs.append(_tensors(fn(*args, **kwargs)))
        assert outs[0] and len(outs[0]) == len(outs[1]), name
        for a, b in zip(*outs):
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=lambda m: f"{name}: {m}")


@pytest.fixture(scope="module")
def recompiled() -> list:
    """corpus/recompiles.py captured as ``mend analyze`` does by default: three calls."""
    from graphmend.core.config import Config
    from graphmend.core.discovery import discover
    from tracer.capture import capture_targets

    specs = [t for t in discover([str(CORPUS / "recompiles.py")], Config(root=ROOT)).targets]
    return capture_targets(specs, modes=MODES, calls=3)


def test_recompiling_targets_show_what_the_manifest_says(local, recompiled):
    wanted = {k: v["recompiles"] for k, v in local.items() if v.get("recompiles")}
    assert len(wanted) >= 4
    got: dict = {}
    for t in recompiled:
        assert t.error is None, (t.name, t.error)
        assert t.calls == 3 and not t.breaks, t.name
        got[(t.name, t.run_mode)] = {(r.rule, r.guard_line, r.expression) for r in t.recompiles if r.rule}
    for name, entries in wanted.items():
        for mode in MODES:
            assert got[(name, mode)] == {(e["rule"], e["line"], e["expression"]) for e in entries}, (name, mode)
