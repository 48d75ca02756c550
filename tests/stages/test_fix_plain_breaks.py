"""The two breaks plain model code has first. ``print("block input",
x.shape)`` (a ``torch.Size`` Dynamo cannot replay after the graph) gets the
``is_compiling()`` guard; ``scale = h.abs().mean().item()`` used with a module's output
(``self.mlp(h)``, a loop's ``layer(x)``) stays a detached tensor. Both verified by mend's own
checks; eager output byte-identical; and the frame Dynamo skipped for a break in a loop is
compiled once its cause is fixed."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys

import pytest

PLAIN = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

    def forward(self, x):
        print("block input", x.shape)
        h = self.norm(x)
        scale = h.abs().mean().item()
        return h + self.mlp(h) * scale


class LoopNet(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            print("layer input", x.shape)
            x = layer(x)
            s = x.abs().mean().item()
            x = x + layer(x) * s
        return x


def mend_target_block():
    torch.manual_seed(0)
    return Block(8), (torch.randn(2, 8),)


def mend_target_loop():
    torch.manual_seed(0)
    return LoopNet(), (torch.randn(2, 8),)
'''


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _eager_stdout(mod) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for make in (mod.mend_target_block, mod.mend_target_loop):
            fn, args = make()
            fn(*args)
    return out.getvalue()


def test_print_of_a_size_and_item_with_a_module_output_are_fixed_and_the_loop_frame_compiles(tmp_path):
    pytest.importorskip("torch")
    from graphmend.core.config import load_config
    from graphmend.fixing import FixOptions, run_fix

    path = tmp_path / "plain.py"
    path.write_text(PLAIN, encoding="utf-8")
    run = run_fix([tmp_path], load_config([tmp_path]), FixOptions(timeout=300, cache=False))
    before = {t.name.split("::")[1]: t for t in run.report.targets}
    # a break in the loop made Dynamo skip the whole forward: it ran eagerly
    assert any(b.kind == "frame_skipped" for b in before["mend_target_loop"].breaks), before["mend_target_loop"].breaks
    fixes = {(f.rule, f.line): f for f in run.report.fixes}
    for key in (("GM201", 12), ("GM301", 14), ("GM201", 25), ("GM301", 27)):
        assert key in fixes and fixes[key].status == "verified", (key, fixes.get(key))
    for check in ("train", "autocast"):  # the full verification ran, gradients included
        assert any(check in c for c in fixes[("GM301", 14)].checks), fixes[("GM301", 14)].checks
    text = run.patches[str(path)]
    assert '        if not torch.compiler.is_compiling():\n            print("block input", x.shape)\n' in text
    assert "scale = h.abs().mean().detach()" in text and "s = x.abs().mean().detach()" in text
    # nothing left, no frame skipped, in the re-trace of the mended program
    for name, left in run.remaining.items():
        assert left == [], (name, left)
    # eager output of the mended program is byte-identical to the original's
    patched = tmp_path / "plain_mended.py"
    patched.write_text(text, encoding="utf-8")
    assert _eager_stdout(_load(path, "_plain_orig")) == _eager_stdout(_load(patched, "_plain_mended"))


def test_a_verification_that_does_not_finish_leaves_its_fixes_unverified_and_is_not_retried_alone(tmp_path,
                                                                                                  monkeypatch):
    """A verification run stopped by the machine (a timeout, memory, a killed worker) says
    nothing against the rewrites: each stays unverified (never written) with the reason, not
    rejected; and they are not tried one by one, which would time out once per rewrite."""
    pytest.importorskip("torch")
    import graphmend.verify.run as verify_run
    from graphmend.core.config import load_config
    from graphmend.fixing import FixOptions, run_fix

    attempts = []

    def unfinished(original, patches, before, texts, timeout, **kwargs):
        attempts.append(sorted(patches))
        return verify_run.Verdict(error=f"patched run: {before.name}: timed out after 5 s (raise it with --timeout)")

    monkeypatch.setattr(verify_run, "verify_target", unfinished)
    (tmp_path / "plain.py").write_text(PLAIN, encoding="utf-8")
    run = run_fix([tmp_path], load_config([tmp_path]), FixOptions(timeout=300, cache=False, only=("mend_target_block",)))
    fixes = [f for f in run.report.fixes if f.status != "advice"]
    assert len(fixes) >= 2 and run.patches == {}
    for f in fixes:
        assert f.status == "unverified" and f.reason.startswith("verification did not finish: patched run: "), f
    assert len(attempts) == 1  # the rewrites together, once
