"""Compiled regions: forward of nn.Module subclasses and what it calls (across files),
torch.compile in any spelling, --all-functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphmend.core.config import Config
from rewrites.scan import scan_paths

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "static" / "regions"


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


def _found(tmp_path, src: str) -> set[tuple[str, str]]:
    f = tmp_path / "prog.py"
    f.write_text(src)
    return {(x.function, x.rule) for x in scan_paths([str(f)], Config()).findings}


TARGET_RETURNS = {
    "tuple": "def mend_target():\n    return step, (torch.ones(2),)\n",
    "target": "import graphmend\n\ndef mend_target_t():\n    return graphmend.Target(step, (torch.ones(2),))\n",
    "target_kw": "from graphmend import Target\n\ndef mend_target_t():\n    return Target(fn=step, args=(torch.ones(2),))\n",
    "compiled": "def mend_target():\n    return torch.compile(step), (torch.ones(2),)\n",
    "partial": "import functools\n\ndef mend_target():\n    return functools.partial(step, k=1), (torch.ones(2),)\n",
}


@pytest.mark.parametrize("ret", sorted(TARGET_RETURNS))
def test_function_a_target_returns_is_compiled(tmp_path, ret):
    src = ("import torch\n\ndef step(x, k=0):\n    print(x)\n    return x\n\ndef other(x):\n    print(x)\n\n"
           + TARGET_RETURNS[ret])
    assert _found(tmp_path, src) == {("step", "GM201")}


def test_method_of_object_a_target_builds(tmp_path):
    src = ("import time\nimport torch\n\nclass Scheduler:\n    def step(self, x):\n        t0 = time.perf_counter()\n"
           "        return x * 2, t0\n\n    def helper(self):\n        print('eager')\n\n"
           "def mend_target():\n    s = Scheduler()\n    return s.step, (torch.ones(2),)\n")
    assert _found(tmp_path, src) == {("Scheduler.step", "GM605")}


COMPILE_SPELLINGS = {
    "method_of_built": "def run():\n    s = Solver()\n    compiled = torch.compile(s.step)\n    return compiled\n",
    "factory_call": "run = torch.compile(backend='eager')(Solver().step)\nf = torch.compile(mode='max-autotune')(free)\n",
    "model_kw": "def run():\n    return torch.compile(model=free, fullgraph=False)\n",
    "self_method": "class Trainer:\n    def __init__(self):\n        self.fn = torch.compile(self.train_step)\n\n"
                   "    def train_step(self, x):\n        print(x)\n        return x\n",
}


@pytest.mark.parametrize("spelling", sorted(COMPILE_SPELLINGS))
def test_compile_spellings(tmp_path, spelling):
    src = ("import torch\n\nclass Solver:\n    def step(self, x):\n        print(x)\n        return x\n\n"
           "def free(x):\n    print(x)\n    return x\n\n" + COMPILE_SPELLINGS[spelling])
    found = _found(tmp_path, src)
    expected = {"method_of_built": {("Solver.step", "GM201")},
                "factory_call": {("Solver.step", "GM201"), ("free", "GM201")},
                "model_kw": {("free", "GM201")},
                "self_method": {("Trainer.train_step", "GM201")}}[spelling]
    assert found == expected


def test_calls_through_annotated_and_built_objects(tmp_path):
    src = ("import torch\n\nclass Scheduler:\n    def step(self, x):\n        print(x)\n        return x\n\n"
           "class Cache:\n    def update(self, x):\n        print(x)\n\n    def unused(self):\n        print(1)\n\n"
           "def loop(s: Scheduler, x):\n    c = Cache()\n    c.update(x)\n    return s.step(x)\n\n"
           "def mend_target():\n    return loop, (Scheduler(), torch.ones(2))\n")
    assert _found(tmp_path, src) == {("Scheduler.step", "GM201"), ("Cache.update", "GM201")}


def test_compile_of_a_module_level_object_method(tmp_path):
    src = ("import torch\n\nclass Solver:\n    def step(self, x):\n        print(x)\n        return x\n\n"
           "    def other(self, x):\n        print(x)\n\n"
           "solver = Solver()\nstep = torch.compile(solver.step)\n")
    assert _found(tmp_path, src) == {("Solver.step", "GM201")}
