"""GM301/GM303 unbacked ints (rewrites/fixes/gm3_unbacked.py): a `.item()` / `int(t)` that feeds
only sizes and slice bounds becomes a custom op returning an unbacked int. `mend fix` verifies
and writes it on a corpus-like model (tests/fixtures/fix/unbacked), the mended file compiles
with fullgraph=True in one graph and gives the original's outputs, slices keep Python's
clamping, the op is made once per process, and a torch without custom_op is refused per site."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rewrites.fixes import fix_source
from rewrites.fixes import gm3_unbacked

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "fix" / "unbacked"
SIZED = gm3_unbacked.CASES[0]  # `.item()` feeding arange and a slice
SLICED = gm3_unbacked.CASES[1]  # `int(t)` bounding slices only


def _module(source: str, name: str) -> dict:
    ns: dict = {"__name__": name}
    exec(compile(source, f"<{name}>", "exec"), ns)
    return ns


def test_rewrite_answers_the_scalar_family_refusal():
    """The site is this family's: GM3's "reaches Python code" refusal of the same line is gone."""
    r = fix_source(SIZED.before, **SIZED.options())
    assert [(s.rule, s.strategy) for s in r.applied] == [("GM301", "unbacked")]
    assert r.refused == [], r.refused


def test_torch_without_custom_op_refused_per_site(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.delattr(torch.library, "custom_op")
    r = fix_source(SIZED.before, **SIZED.options())
    assert not r.changed
    assert [x.line for x in r.refused if "torch.library.custom_op" in x.reason] == [5], r.refused


def test_old_torch_refused_without_importing_it(monkeypatch):
    import graphmend.core.env as env

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(env, "torch_version", lambda: "2.3.1")
    r = fix_source(SIZED.before, **SIZED.options())
    assert not r.changed
    assert any("torch 2.3.1 is older than 2.4" in x.reason for x in r.refused), r.refused


def test_one_graph_and_slices_clamp_as_python_does():
    """Slice-only: no check, so a bound that is negative or past the end still clamps, compiled too."""
    torch = pytest.importorskip("torch")
    before, after = _module(SLICED.before, "unb_slice_a")["pooled"], _module(SLICED.after, "unb_slice_b")["pooled"]
    x = torch.randn(6, 5)
    torch._dynamo.reset()
    assert torch._dynamo.explain(before)(x, torch.tensor(2)).graph_break_count == 1
    mended = torch._dynamo.explain(after)(x, torch.tensor(2))
    assert (mended.graph_count, mended.graph_break_count) == (1, 0)
    compiled = torch.compile(after, fullgraph=True)
    for k in (2, 0, -2, 9, -9):
        want = before(x, torch.tensor(k))
        for got in (after(x, torch.tensor(k)), compiled(x, torch.tensor(k))):
            assert all(torch.equal(a, b) for a, b in zip(want, got)), k


def test_size_check_fails_where_the_original_failed():
    """`torch._check(n >= 0)` only states what arange already required."""
    torch = pytest.importorskip("torch")
    before, after = _module(SIZED.before, "unb_size_a")["pooled"], _module(SIZED.after, "unb_size_b")["pooled"]
    x = torch.randn(2, 8)
    lengths = torch.tensor([-3, -1])
    with pytest.raises(RuntimeError):
        before(x, lengths)
    with pytest.raises(RuntimeError):
        after(x, lengths)


def test_registered_once_per_process_and_a_name_taken_by_another_read_not_reused():
    torch = pytest.importorskip("torch")
    first = _module(SIZED.after, "unb_once_a")
    second = _module(SIZED.after, "unb_once_b")  # the same file imported again (the overlay)
    assert first["_mend_module_pooled_5_op"] is second["_mend_module_pooled_5_op"]
    other = _module(SIZED.after.replace("    return t.item()\n", "    return t.item() // 2\n"), "unb_once_c")
    assert other["_mend_module_pooled_5_op"] is not first["_mend_module_pooled_5_op"]
    assert other["_mend_module_pooled_5_op"](torch.tensor(8)) == 4


def _mend(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphmend", "fix", "--format", "json", "--quiet", "--write",
                           str(folder)], capture_output=True, text=True, timeout=900, cwd=folder,
                          env={**os.environ, "PYTHONPATH": str(REPO), "MEND_NO_CACHE": "1"})


def test_mend_fix_verifies_the_fixture_and_the_mended_model_is_one_graph(tmp_path):
    torch = pytest.importorskip("torch")
    work = tmp_path / "unbacked"
    shutil.copytree(FIXTURE, work)
    model = work / "pooled_model.py"
    original = model.read_text(encoding="utf-8")

    first = _mend(work)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    verified = [f for f in report["fixes"] if f["status"] == "verified"]
    assert [f["rule"] for f in verified] == ["GM301"], report["fixes"]
    assert {"eval", "train+grad", "autocast", "inputs"} <= set(verified[0]["checks"]), verified
    target = report["fix_targets"][0]
    assert target["breaks_before"] == 1 and target["breaks_after"] == 0 and target["outputs_equal"], target
    written = model.read_text(encoding="utf-8")
    assert '"mend::pooled_model_forward_16"' in written and "        torch._check(n >= 0)\n" in written

    old, new = _module(original, "unb_fixture_a"), _module(written, "unb_fixture_b")
    ref, _ = old["mend_target_length_pool"]()
    mended, _ = new["mend_target_length_pool"]()
    x = torch.randn(3, 12, 8)
    torch._dynamo.reset()
    assert torch._dynamo.explain(ref)(x, torch.tensor([5, 9, 7])).graph_break_count == 1
    one = torch._dynamo.explain(mended)(x, torch.tensor([5, 9, 7]))
    assert (one.graph_count, one.graph_break_count) == (1, 0)
    compiled = torch.compile(mended, fullgraph=True)
    for lengths in ([5, 9, 7], [1, 2, 3], [12, 12, 12]):
        lengths = torch.tensor(lengths)
        assert torch.allclose(compiled(x, lengths), ref(x, lengths), atol=1e-6)

    second = _mend(work)
    assert second.returncode == 0, second.stderr
    assert model.read_text(encoding="utf-8") == written
    assert json.loads(second.stdout)["fix_targets"][0]["breaks_before"] == 0
