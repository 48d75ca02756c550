"""Fixtures shared by several test files because they are expensive.

``corpus_capture``: every target of the tracer's small fixtures and of ``corpus/`` (the
transformers models included) captured ONCE per session by the tracer's worker in both run
modes (eval, train), with ``torch._dynamo.explain`` run on the same target in the same mode
right after in the same worker (one torch start-up per file); the transformers models'
train mode has no explain (None: the capture alone). test_tracer_capture (capture == explain), test_corpus_manifest and
test_corpus_models (both == corpus/manifest.toml) all read it. ``mend_fix_write``: ``mend fix
--write`` on one file in a process of its own, as a user runs it.

Under pytest-xdist every worker process has its own session: the first one to ask computes
the capture and leaves it as JSON next to the session's temp folders; the others wait on a
lock and read it. Nothing here imports torch at import time (the static-scan tests run
without it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    # mend's cache of captures and verdicts (graphmend.core.cache) in a folder of this run's
    # own: a verdict an earlier run kept must not stand in for what a test means to run
    if "MEND_CACHE_DIR" not in os.environ:
        import tempfile

        os.environ["MEND_CACHE_DIR"] = config._mend_cache = tempfile.mkdtemp(prefix="mend-test-cache-")


@pytest.fixture(autouse=True)
def _print_helpers_of_exec_code_unregistered():
    """A case's mended code, run with exec(), registers its print helper in Dynamo's
    reorderable_logging_functions with no module; Inductor writes every registered function's
    module into each compile's repro text and fails on that one. Drop them after each test."""
    yield
    config = sys.modules.get("torch._dynamo.config")
    if config is not None:
        for fn in [f for f in config.reorderable_logging_functions if getattr(f, "__module__", "") is None]:
            config.reorderable_logging_functions.discard(fn)


def pytest_unconfigure(config):
    if getattr(config, "_mend_cache", None):
        import shutil

        shutil.rmtree(config._mend_cache, ignore_errors=True)
        os.environ.pop("MEND_CACHE_DIR", None)
SMALL = ROOT / "tests" / "fixtures" / "dynamic" / "models"
CORPUS = ROOT / "corpus"


@dataclasses.dataclass
class CorpusCapture:
    specs: list  # TargetSpec, tracer fixtures then corpus, discovery order
    results: dict  # name -> TargetResult, eval mode
    # name -> [graph_count, graph_break_count, [[file, line], ...] per break reason] or the
    # error text when explain itself raised; eval mode
    explained: dict
    train_results: dict  # the same two in train mode
    train_explained: dict

    def of(self, mode: str) -> tuple[dict, dict]:
        """(results, explained) of one run mode."""
        return (self.train_results, self.train_explained) if mode == "train" else (self.results, self.explained)


def corpus_specs() -> list:
    from graphmend.core.config import Config
    from graphmend.core.discovery import discover

    specs = list(discover([str(SMALL)], Config(root=ROOT)).targets)
    if CORPUS.is_dir():
        found = discover([str(CORPUS)], Config(root=ROOT))
        assert not found.errors, found.errors
        specs += found.targets
    return specs


def _capture(specs: list) -> dict[str, Any]:
    from graphmend.core.jobs import Job, run_jobs
    from tracer.capture import WORKER

    groups: dict[str, list] = {}
    for s in specs:
        groups.setdefault(s.file, []).append(s)
    # A big file (the transformers models: ~4 of the ~5 minutes of CPU) is split in halves,
    # started first, so that both cores stay busy to the end; its train mode is captured
    # without explain (None), which its eval mode and every other file's two modes check.
    ordered: list[tuple[list, list[str], bool]] = []
    for g in sorted(groups.values(), key=len, reverse=True):
        halves = (g[0::2], g[1::2]) if len(g) >= 6 else (g,)
        if Path(g[0].file).name == "hf_models.py":
            ordered += [(h, ["eval"], True) for h in halves] + [(h, ["train"], False) for h in halves]
        else:
            ordered += [(h, ["eval", "train"], True) for h in halves]
    jobs = [Job(WORKER, {"targets": [dataclasses.asdict(s) for s in g], "explain": explain, "modes": modes},
                label=g[0].file, timeout=400 * len(g), warm=True) for g, modes, explain in ordered]
    out: dict[str, dict] = {"results": {}, "explained": {}, "train_results": {}, "train_explained": {}}
    for (g, modes, explain), outcome in zip(ordered, run_jobs(jobs, parallel=2)):
        assert outcome.result and "results" in outcome.result, (g[0].file, outcome.error or outcome.stderr)
        got = outcome.result["results"]
        for i, s in enumerate(g):
            for j, mode in enumerate(modes):
                prefix = "train_" if mode == "train" else ""
                out[prefix + "results"][s.name] = got[i * len(modes) + j]
                out[prefix + "explained"][s.name] = outcome.result["explain"][i * len(modes) + j] if explain else None
    return out


def _shared(tmp_path_factory) -> dict[str, Any]:
    """The capture, computed once across pytest-xdist workers (one per session without xdist)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _capture(corpus_specs())
    try:
        import fcntl
    except ImportError:  # no flock (Windows): each worker captures for itself
        return _capture(corpus_specs())
    # getbasetemp() is per worker; its parent is the run's, shared by all workers
    root = tmp_path_factory.getbasetemp().parent
    data, lock = root / "corpus_capture.json", root / "corpus_capture.lock"
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            if data.exists():
                return json.loads(data.read_text(encoding="utf-8"))
            out = _capture(corpus_specs())
            tmp = data.with_suffix(".tmp")
            tmp.write_text(json.dumps(out), encoding="utf-8")
            tmp.replace(data)
            return out
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def corpus_capture(tmp_path_factory) -> CorpusCapture:
    from graphmend.core.model import TargetResult
    from graphmend.core.serial import from_dict

    raw = _shared(tmp_path_factory)
    specs = corpus_specs()
    def results(key: str) -> dict:
        return {k: from_dict(TargetResult, v) for k, v in raw[key].items()}

    return CorpusCapture(specs=specs, results=results("results"), explained=raw["explained"],
                         train_results=results("train_results"), train_explained=raw["train_explained"])


@pytest.fixture(scope="session", autouse=True)
def _mend_cache(tmp_path_factory):
    """mend fix's cache lives in this session's temp folder, not the user's ~/.cache: no run
    of the suite reads what an earlier one (or the user) left."""
    from graphmend.core.cache import ENV_DIR

    old = os.environ.get(ENV_DIR)
    os.environ[ENV_DIR] = str(tmp_path_factory.mktemp("mend-cache"))
    yield
    if old is None:
        os.environ.pop(ENV_DIR, None)
    else:
        os.environ[ENV_DIR] = old


@pytest.fixture
def mend_fix_write(tmp_path):
    """``run(path)``: ``mend fix --write -f json --calls 1 PATH`` in a process of its own, with a
    cache of its own; (the finished process, its JSON report)."""

    def run(path: Path) -> tuple[subprocess.CompletedProcess, dict]:
        r = subprocess.run([sys.executable, "-m", "graphmend", "fix", "--write", "-f", "json", "--calls", "1",
                            str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=900,
                           env={**os.environ, "PYTHONPATH": str(ROOT), "MEND_CACHE_DIR": str(tmp_path / "cache")})
        return r, json.loads(r.stdout)

    return run

