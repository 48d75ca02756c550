"""GM501's unsafe fix: sparse expert dispatch -> masked dense dispatch. The exact rewrite,
its refusals, and that the rewritten MoE loop computes the same and compiles to one graph."""

from __future__ import annotations

import pytest

from rewrites.fixes import fix_source
from rewrites.fixes import gm5_dispatch


# the family's cases (every text is test_fix_cases.py's): the dense dispatch of GM501 (the
# MoE loops, with the two whose `nonzero` loop is kept), the masked dispatch of GM502
DENSE = [c for c in gm5_dispatch.CASES
         if c.after is not None and "def moe(self, hidden_states, routing_weights" in c.before]
CASES = DENSE[:2]  # the loop over every expert, the loop over those hit
MASK_CASES = [c for c in gm5_dispatch.CASES if c.after is not None and c not in DENSE]


@pytest.mark.parametrize("case", CASES, ids=["range-loop", "nonzero-loop"])
def test_unsafe_fix_sites(case):
    safe = fix_source(case.before, **case.options(unsafe=False))
    # every site says the fix exists
    assert {r.line for r in safe.refused if "--unsafe-fixes" in r.advice} == case.lines
    r = fix_source(case.before, **case.options())
    assert {s.strategy for s in r.applied} <= {"dense_dispatch", "every_index"}


@pytest.mark.parametrize("case", DENSE[2:], ids=["effect", "read-after"])
def test_nonzero_loop_kept_when_an_extra_pass_shows(case):
    assert gm5_dispatch.WHERE_HELPER.name in case.after  # the dispatch itself is still rewritten
    assert gm5_dispatch.EVERY_HELPER.name not in case.after and ".nonzero()" in case.after


@pytest.mark.parametrize("case", [c for c in gm5_dispatch.CASES if c.after is None and c.unsafe], ids=lambda c: c.reason)
def test_unsafe_fix_refused_whatever_else_is_fixed(case):
    r = fix_source(case.before, **case.options())
    assert gm5_dispatch.WHERE_HELPER.name not in r.new_source
    assert any(case.reason in x.reason for x in r.refused), [x.reason for x in r.refused]


class _Moe:
    """Both spellings of an expert table: ``self.experts[i]`` and ``self[f"expert_{i}"]``."""

    def __init__(self, torch, n, poison):
        g = torch.Generator().manual_seed(0)
        self.num_experts = n
        self.ws = [torch.randn(4, 4, generator=g) for _ in range(n)]
        self.poison = poison
        self.experts = [self._expert(i) for i in range(n)]

    def _expert(self, i):
        torch = self.torch

        def run(x):
            y = torch.tanh(x @ self.ws[i])
            # an expert that overflows on rows it was not given must not leak into the sum
            return torch.where(x.abs().sum(-1, keepdim=True) > self.poison, torch.full_like(y, float("inf")), y)
        return run

    def __getitem__(self, key):
        return self.experts[int(key.rsplit("_", 1)[1])]


def _run(torch, source, moe, tokens, k, used):
    ns: dict = {}
    exec(compile(source, "<moe>", "exec"), ns)
    g = torch.Generator().manual_seed(tokens)
    h = torch.randn(tokens, 4, generator=g)
    logits = torch.randn(tokens, moe.num_experts, generator=g)
    logits[:, used:] = -1e9  # experts past `used` are never chosen
    w, sel = torch.softmax(logits, -1).topk(k, -1)
    mask = torch.nn.functional.one_hot(sel, moe.num_experts).permute(2, 1, 0)
    return ns["moe"], (moe, h, w, mask, torch.zeros(tokens, 4))


@pytest.mark.parametrize("case", [0, 1], ids=["range-loop", "nonzero-loop"])
@pytest.mark.parametrize("tokens,k,used", [(7, 2, 4), (5, 1, 2), (1, 2, 2)])
def test_dense_dispatch_same_values_and_one_graph(case, tokens, k, used):
    torch = pytest.importorskip("torch")
    before, after = CASES[case].before, CASES[case].after
    _Moe.torch = torch
    moe = _Moe(torch, 4, poison=2.5)
    f0, args = _run(torch, before, moe, tokens, k, used)
    f1, _ = _run(torch, after, moe, tokens, k, used)
    want = f0(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    got = f1(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    assert torch.isfinite(want).all() == torch.isfinite(got).all()
    torch.testing.assert_close(got, want)
    torch._dynamo.reset()
    compiled = torch.compile(f1, backend="eager", fullgraph=True)  # fullgraph: any break raises
    torch.testing.assert_close(compiled(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]), want)
    torch._dynamo.reset()


MIXTRAL_LIKE = '''import torch
from torch import nn


class Moe(nn.Module):
    def __init__(self, dim=8, n=4, k=2):
        super().__init__()
        self.num_experts, self.top_k = n, k
        self.gate = nn.Linear(dim, n, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(dim, 16), nn.GELU(), nn.Linear(16, dim))
                                     for _ in range(n))

    def forward(self, hidden_states):
        b, s, d = hidden_states.shape
        hidden_states = hidden_states.view(-1, d)
        routing_weights = torch.softmax(self.gate(hidden_states), dim=1)
        routing_weights, selected = torch.topk(routing_weights, self.top_k, dim=-1)
        final = torch.zeros_like(hidden_states)
        expert_mask = torch.nn.functional.one_hot(selected, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[None, top_x].reshape(-1, d)
            current = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, current)
        return final.view(b, s, d)


def mend_target_moe():
    torch.manual_seed(0)
    return Moe().eval(), (torch.randn(2, 6, 8),)
'''


def test_mend_fix_unsafe_end_to_end(tmp_path):
    """Without the flag: the safe fix, an opaque custom op (rewrites/fixes/gm5_opaque.py),
    verified, and the file untouched without --write. With it: the dense dispatch (the opaque
    op leaves those lines to it), verified, the target re-traces with no break and the outputs
    are equal; --write applies it."""
    pytest.importorskip("torch")
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    model = tmp_path / "moe.py"
    model.write_text(MIXTRAL_LIKE, encoding="utf-8")

    def mend(*args):
        return subprocess.run([sys.executable, "-m", "graphmend", "fix", "--calls", "1", "--format", "json", "--quiet", *args,
                               str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(repo)})

    safe = mend()
    report = json.loads(safe.stdout)
    opaque = [f for f in report["fixes"] if f["rule"] == "GM501"]
    assert [f["status"] for f in opaque] == ["verified"], report["fixes"]
    assert "opaque custom op" in opaque[0]["reason"] and "_mend_dense_where" not in opaque[0]["diff"]
    assert model.read_text(encoding="utf-8") == MIXTRAL_LIKE
    assert report["fix_targets"][0]["breaks_before"] > 0

    unsafe = mend("--unsafe-fixes", "--write")
    assert unsafe.returncode == 0, unsafe.stderr
    report = json.loads(unsafe.stdout)
    verified = [f for f in report["fixes"] if f["status"] == "verified"]
    assert [f["rule"] for f in verified] == ["GM501"], report["fixes"]
    target = report["fix_targets"][0]
    assert target["breaks_after"] == 0 and target["outputs_equal"] is True, target
    assert "_mend_dense_where(expert_mask[expert_idx])" in model.read_text(encoding="utf-8")
    assert "_mend_opaque_op" not in model.read_text(encoding="utf-8")


MASK_IDS = ["xmod-adapters", "switch-4.x", "nllb-4.x"]


class _Table:
    """Expert tables in the three spellings: a dict of adapters, ``expert_{i}`` attributes,
    ``.values()`` of a module dict; each a row-wise map."""

    def __init__(self, torch, n):
        g = torch.Generator().manual_seed(1)
        self.fns = [self._fn(torch, torch.randn(4, 4, generator=g)) for _ in range(n)]
        self.adapter_modules = {f"lang{i}": f for i, f in enumerate(self.fns)}
        self.experts = self
        self.moe_token_dropout, self.training = 0.25, False
        for i, f in enumerate(self.fns):
            setattr(self, f"expert_{i}", f)

    @staticmethod
    def _fn(torch, w):
        return lambda x: torch.tanh(x @ w)

    def values(self):
        return self.fns


def _mask_args(torch, case, used):
    g = torch.Generator().manual_seed(used)
    n = 3
    pick = torch.randint(0, used, (2, 5), generator=g)  # languages / experts past `used` never chosen
    h = torch.randn(2, 5, 4, generator=g)
    if case == 0:
        return h, pick
    if case == 1:
        return h, torch.nn.functional.one_hot(pick, n)
    probs = torch.rand(10, generator=g) + 0.5
    return h.reshape(10, 4), torch.nn.functional.one_hot(pick.reshape(10), n) * probs[:, None]


@pytest.mark.parametrize("case", [0, 1, 2], ids=MASK_IDS)
@pytest.mark.parametrize("used", [3, 1])
def test_masked_dispatch_same_values_and_one_graph(case, used):
    torch = pytest.importorskip("torch")
    before, after = MASK_CASES[case].before, MASK_CASES[case].after
    table = _Table(torch, 3)
    fns = []
    for src in (before, after):
        ns: dict = {}
        exec(compile(src, "<dispatch>", "exec"), ns)
        fns.append(next(v for k, v in ns.items() if k in ("adapt", "moe")))
    args = _mask_args(torch, case, used)
    want = fns[0](table, *[a.clone() for a in args])
    torch.testing.assert_close(fns[1](table, *[a.clone() for a in args]), want)
    torch._dynamo.reset()
    compiled = torch.compile(fns[1], backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(table, *[a.clone() for a in args]), want)
    torch._dynamo.reset()
