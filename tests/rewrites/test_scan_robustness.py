"""Installed torch and transformers files scan without an exception (a fixed sample here;
the full trees in benchmarks/bench_scan.py --robustness)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from graphmend.core.config import Config
from rewrites.scan import scan_paths

BIG = ["transformers/models/llama/modeling_llama.py", "transformers/modeling_utils.py",
       "torch/nn/modules/module.py", "torch/_dynamo/symbolic_convert.py", "torch/_tensor.py"]


def _package_dir(name: str):
    spec = importlib.util.find_spec(name)  # finds the folder without importing the package
    return Path(spec.origin).parent if spec and spec.origin else None


def sample(n: int = 60) -> list[Path]:
    roots = [d for d in (_package_dir("torch"), _package_dir("transformers")) if d is not None]
    if not roots:
        return []
    files = sorted(p for r in roots for p in r.rglob("*.py"))
    site = roots[0].parent
    chosen = [site / b for b in BIG if (site / b).is_file()]
    step = max(1, len(files) // (n - len(chosen)))
    chosen += files[::step][: n - len(chosen)]
    return chosen


def test_sample_scans_without_exception():
    files = sample()
    if not files:
        pytest.fail("neither torch nor transformers is installed")
    result = scan_paths([str(f) for f in files], Config(all_functions=True))
    assert result.files_scanned == len(set(files))
    for err in result.errors:
        assert "internal error" not in err.message, err
        # only files this Python genuinely cannot parse (e.g. 3.12-only syntax) may be skipped
        with pytest.raises(SyntaxError):
            ast.parse(Path(err.file).read_bytes())
    assert result.findings, "a sample of torch/transformers without a single pattern is implausible"
