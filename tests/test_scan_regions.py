"""Compiled regions: forward of nn.Module subclasses and what it calls (across files),
torch.compile in any spelling, --all-functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphmend.core.config import Config
from rewrites.scan import scan_paths

FIXTURE = Path(__file__).parent / "fixtures" / "static" / "regions"


@pytest.fixture(scope="module")
def both():
    compiled = scan_paths([str(FIXTURE)], Config(all_functions=False))
    everything = scan_paths([str(FIXTURE)], Config(all_functions=True))
    return ({(Path(f.file).name, f.function, f.rule) for f in compiled.findings},
            {(Path(f.file).name, f.function, f.rule) for f in everything.findings})


def test_regions(both):
    compiled, _ = both
    assert ("compiled.py", "decorated", "GM301") in compiled  # @th.compile (alias import)
    assert ("compiled.py", "decorated_alias", "GM302") in compiled  # @tc(...) (from torch import compile as tc)
    assert ("compiled.py", "passed", "GM201") in compiled  # th.compile(passed)
    assert ("helpers.py", "clamp_if_large", "GM101") in compiled  # called from Block.forward, other file
    assert ("layers.py", "Base._log", "GM201") in compiled  # self._log: inherited method
    assert ("compiled.py", "plain", "GM201") not in compiled
    assert ("helpers.py", "never_called", "GM201") not in compiled
    assert ("layers.py", "Block.unused", "GM201") not in compiled


def test_all_functions(both):
    compiled, everything = both
    assert compiled < everything
    assert {("compiled.py", "plain", "GM201"), ("helpers.py", "never_called", "GM201"),
            ("layers.py", "Block.unused", "GM201")} <= everything


def test_single_file_and_config_flag(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import torch\n\nclass Odd(torch.nn.Module):\n    def forward(self, x):\n"
                   "        return self.step(x)\n\n    def step(self, x):\n        print(x)\n        return x\n\n"
                   "def helper(x):\n    print(x)\n")
    found = scan_paths([str(src)], Config())
    assert [(f.function, f.line) for f in found.findings] == [("Odd.step", 8)]
    assert found.findings[0].file == str(src.resolve())


def test_generator_yield_only_in_roots(tmp_path):
    src = tmp_path / "g.py"
    src.write_text("import torch\n\ndef gen(xs):\n    yield from xs\n\n@torch.compile\ndef f(xs):\n    yield xs\n")
    found = scan_paths([str(src)], Config(all_functions=True))
    assert [(f.rule, f.function) for f in found.findings] == [("GM602", "f")]
