"""The real-model corpus (corpus/hf_models.py): builds offline, runs, and breaks as recorded.

Each model is built and run eagerly once per module; its outputs must be finite. Its
``torch._dynamo.explain`` counts come from the session's ``corpus_capture`` (tests/conftest.py,
shared with test_tracer_capture and test_corpus_manifest) and must equal the manifest's
``hf = true`` entries for the installed torch.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import sys
import tomllib
from pathlib import Path

import pytest

from graphmend.core.targets import normalise

torch = pytest.importorskip("torch")

# selectable with -m "not slow"; runs by default
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"
HF_FILE = CORPUS / "hf_models.py"


def _targets() -> list[str]:
    tree = ast.parse(HF_FILE.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("mend_target")]


def _module():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("corpus.hf_models")


def _flat(out) -> list:
    """Every tensor in a model output (ModelOutput, tuple, dict, nested)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict) or hasattr(out, "to_tuple"):
        return [t for v in (out.values() if isinstance(out, dict) else out.to_tuple()) for t in _flat(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in _flat(v)]
    return []


@pytest.fixture(scope="module")
def manifest() -> dict:
    data = tomllib.loads((CORPUS / "manifest.toml").read_text(encoding="utf-8"))["targets"]
    return {k: v for k, v in data.items() if v.get("hf")}


@pytest.fixture(scope="module")
def runs(corpus_capture) -> dict:
    """name -> (eager outputs, graph_count, graph_break_count)."""
    pytest.importorskip("transformers", reason='the hf corpus needs transformers: pip install "graphmend[hf]"')
    mod = _module()
    out = {}
    for fn_name in _targets():
        name = f"hf_models.py::{fn_name}"
        t = normalise(getattr(mod, fn_name)(), fn_name)  # a tuple or a graphmend.Target
        fn, args, kwargs = t.fn, t.args, t.kwargs
        with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
            eager = fn(*args, **kwargs)
        # explained as measure.py and the tracer do, in each run mode, after torch._dynamo.reset();
        # train mode is the capture's counts (explain's in eval, tests/tracer/test_tracer_capture.py)
        counts = {}
        for mode in ("eval", "train"):
            results, explained = corpus_capture.of(mode)
            ref = explained[name]
            assert not isinstance(ref, str), f"{name} [{mode}]: explain raised {ref}"
            counts[mode] = (ref[0], ref[1]) if ref is not None else (results[name].graph_count,
                                                                     results[name].graph_break_count)
        out[name] = (eager, counts)
    return out


def test_at_least_eight_breaking_models_are_recorded(manifest):
    assert set(manifest) == {f"hf_models.py::{t}" for t in _targets()}
    breaking = [k for k, v in manifest.items() if v["graph_break_count"] > 0 and not v["clean"]]
    assert len(breaking) >= 8, breaking
    for name, entry in manifest.items():
        assert entry.get("model") and entry["categories"], name


def test_models_run_and_outputs_are_finite(runs):
    for name, (eager, _) in runs.items():
        tensors = [t for t in _flat(eager) if t.is_floating_point()]
        assert tensors, f"{name}: no floating-point output"
        for t in tensors:
            assert torch.isfinite(t).all(), f"{name}: non-finite output"


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_counts_match_manifest(runs, manifest, mode):
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    from corpus.measure import expected

    key = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    wrong = []
    for name, (_, counts) in runs.items():
        graphs, breaks = counts[mode]
        entry = expected(manifest[name], mode, key)
        if (graphs, breaks) != (entry["graph_count"], entry["graph_break_count"]):
            wrong.append(f"{name} [{mode}]: explain {graphs}/{breaks}, "
                         f"manifest {entry['graph_count']}/{entry['graph_break_count']}")
    assert not wrong, "\n".join(wrong)


def test_targets_say_what_to_install_without_transformers(monkeypatch):
    """Without transformers every hf target raises ImportError naming the extra."""
    mod = _module()
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` raise ImportError
    for fn_name in _targets():
        with pytest.raises(ImportError, match=r'pip install "graphmend\[hf\]"'):
            getattr(mod, fn_name)()
