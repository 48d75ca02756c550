"""GM101 with Python inside the arms (rewrites/fixes/gm1_hoist.py): transformers 4.52's
LongRoPE update, as tests/adversarial/longrope_buffer_select.py writes it, is rewritten
(the lazy cache and the device move hoisted, the buffer re-registered with a torch.where),
computes what the original computes across a long and a short prompt where the in-place
``copy_`` form does not, and compiles whole, with no recompile on the calls after the first."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from rewrites.fixes import fix_source

torch = pytest.importorskip("torch")

PROGRAM = Path(__file__).resolve().parents[2] / "tests" / "adversarial" / "longrope_buffer_select.py"
IF_LINE = 31  # ``if seq_len > original_max_position_embeddings:``, where Dynamo breaks


def _source() -> str:
    return PROGRAM.read_text(encoding="utf-8")


def _mended() -> str:
    r = fix_source(_source(), lines={IF_LINE}, tensor_lines={IF_LINE})
    assert r.error is None and r.changed, [x.reason for x in r.refused]
    return r.new_source


def _load(text: str, tmp_path: Path, name: str):
    sys.path.insert(0, str(PROGRAM.parent))  # for ``_adv``
    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_longrope_is_hoisted_and_selected():
    r = fix_source(_source(), lines={IF_LINE}, tensor_lines={IF_LINE})
    assert [(s.rule, s.line, s.strategy) for s in r.applied] == [("GM101", IF_LINE, "where")]
    assert not r.refused
    body = r.new_source.split("def longrope_frequency_update", 1)[1].split("@wraps", 1)[0]
    assert "if seq_len >" not in body  # the tensor branch is gone
    # the Python part runs in front, as written; the buffer takes the selected table
    # (the cache filled on every compiled call, and the buffer stored without
    # register_buffer, whose checks would make Dynamo guard on the old buffer)
    assert body.index('if torch.compiler.is_compiling() or not hasattr(self, "long_inv_freq"):') \
        < body.index("torch.where(")
    assert "self.original_inv_freq = self.original_inv_freq.to(device)" in body
    assert "register_buffer(" not in body
    assert body.index('self._buffers["inv_freq"] = torch.where(') \
        < body.index('self._non_persistent_buffers_set.add("inv_freq")')
    assert fix_source(r.new_source, lines={IF_LINE}, tensor_lines={IF_LINE}).new_source == r.new_source


def _run(mod, cast_bf16: bool = False):
    torch.manual_seed(0)
    model = mod.TwoPrompts()
    if cast_bf16:
        model = model.to(torch.bfloat16)
    g = torch.Generator().manual_seed(1)
    dtype = torch.bfloat16 if cast_bf16 else torch.float32
    long, short = torch.randn(2, 9, 8, generator=g).to(dtype), torch.randn(2, 4, 8, generator=g).to(dtype)
    with torch.no_grad():
        first = model(long, short)
        again = model(short, short)  # the module's state after a long prompt decides this one
    return first, again, model.rotary.inv_freq.dtype


@pytest.mark.parametrize("cast_bf16", [False, True], ids=["float32", "cast-bf16"])
def test_mended_matches_original_and_copy_form_does_not(tmp_path, cast_bf16):
    original = _load(_source(), tmp_path, "lr_original")
    mended = _load(_mended(), tmp_path, "lr_mended")
    # the in-place form (transformers 5.x; GraphMend's output on 4.52)
    start = _mended().index('        self._buffers["inv_freq"] = torch.where(')
    end = _mended().index('self._non_persistent_buffers_set.add("inv_freq")\n', start) \
        + len('self._non_persistent_buffers_set.add("inv_freq")\n')
    where = _mended()[start:_mended().index("\n        )\n", start)].split("torch.where(", 1)[1]
    in_place = _load(_mended()[:start] + f"        self.inv_freq.copy_(torch.where({where}))\n" + _mended()[end:],
                     tmp_path, "lr_copy")
    want = _run(original, cast_bf16)
    got = _run(mended, cast_bf16)
    assert got[2] == want[2]
    for a, b in zip(got[:2], want[:2]):
        assert torch.equal(a, b)
    bad = _run(in_place, cast_bf16)
    assert not all(torch.equal(a, b) for a, b in zip(bad[:2], want[:2])) or bad[2] != want[2]


def test_mended_longrope_compiles_whole_without_recompiles(tmp_path):
    mod = _load(_mended(), tmp_path, "lr_compiled")
    torch.manual_seed(0)
    rope = mod.RotaryEmbedding({"dim": 8, "original_max": 6, "short_factor": [1.0, 1.1, 1.2, 1.3],
                                "long_factor": [2.0, 2.5, 3.0, 3.5]})
    x = torch.randn(2, 9, 8)
    long_ids = torch.arange(9)[None].repeat(2, 1)
    short_ids = long_ids % 4  # the same shape, positions inside the original window
    torch._dynamo.reset()
    with torch.no_grad():
        explained = torch._dynamo.explain(rope)(x, short_ids)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    torch._dynamo.reset()
    compiles = []

    def counting(gm, example_inputs):
        compiles.append(1)
        return gm.forward

    fresh = mod.RotaryEmbedding(rope.config)
    compiled = torch.compile(fresh, backend=counting)
    per_call = []
    with torch.no_grad():
        for ids in (short_ids, short_ids, long_ids, short_ids, long_ids, short_ids):
            before = len(compiles)
            got = compiled(x, ids)
            want = rope(x, ids)
            assert all(torch.equal(a, b) for a, b in zip(got, want))
            per_call.append(len(compiles) - before)
    # one compile: no guard on the cache's ``hasattr`` (filled on every compiled call) nor on
    # the buffer's identity (stored without register_buffer); the tables share one graph
    assert per_call == [1, 0, 0, 0, 0, 0], per_call


GROWING = PROGRAM.parent / "hoist_rope_cache_growing.py"


def test_a_cache_filled_from_the_call_is_not_hoisted(tmp_path):
    """A lazy cache whose fill reads ``seq_len`` (dynamic NTK scaling builds the long table
    for the sequence that first needs it): hoisted, a short prompt first would fill it and a
    longer one after it would reuse the short one's table. mend refuses, naming the value."""
    src = GROWING.read_text(encoding="utf-8")
    line = next(i for i, text in enumerate(src.splitlines(), 1) if 'if seq_len > self.config["original_max"]' in text)
    r = fix_source(src, lines={line}, tensor_lines={line})
    assert not r.changed, r.new_source
    assert any("reads `seq_len`, a value of this call" in x.reason for x in r.refused), [x.reason for x in r.refused]
    # what the hoist did (the program's NAIVE form): a short call, then a longer one, differ in eager
    original = _load(src, tmp_path, "growing_original")
    hoisted = _load(original.NAIVE, tmp_path, "growing_hoisted")
    outs = []
    for mod in (original, hoisted):
        t = mod.mend_target_hoist_rope_cache_growing()
        with torch.no_grad():
            outs.append(t.fn(*t.args))
    assert outs[0][0] == outs[1][0]  # the short prompt: the short table either way
    assert (outs[0][1] - outs[1][1]).abs() > 0.1, outs  # the long one: a table built for the short prompt
