"""ScatterMoE's split sizes read back with ``.tolist()`` (jetmoe) and X-MOD's runs by id:
the list stays in the graph as unbacked ints (safe, gm3_unbacked), the runs go dense (unsafe,
gm5_segments); the exact rewrites, their refusals, and that each rewritten layer computes
the same and compiles to one graph."""

from __future__ import annotations

import pytest

from rewrites.fixes import fix_source
from rewrites.fixes import gm5_segments

# the cases are transformers code: laid out at its ruff line-length
HF = {"line_length": 119}

BY_ID = next(c for c in gm5_segments.CASES if c.after is not None)
BY_ID_REFUSED = [c for c in gm5_segments.CASES if c.after is None]

# JetMoE's experts (transformers 5.24, modeling_jetmoe.py): the router reads the per-expert
# counts back and returns them; the experts split the sorted rows by them
SPLIT = '''import torch
import torch.nn.functional as F


class Experts(torch.nn.Module):
    def forward(self, inputs, expert_size):
        input_list = inputs.split(expert_size, dim=0)
        output_list = []
        for i in range(self.num_experts):
            output_list.append(F.linear(input_list[i], self.weight[i]))
        results = torch.cat(output_list, dim=0)
        return results


class Gate(torch.nn.Module):
    def forward(self, gates):
        expert_size = gates.long().sum(0)
        expert_size = expert_size.tolist()
        order = gates.argmax(-1).sort(0)[1]
        return order, expert_size
'''


def test_split_sizes_are_kept_a_list_of_unbacked_ints_safely():
    r = fix_source(SPLIT, lines={18}, **HF)
    assert [(s.rule, s.line, s.strategy) for s in r.applied] == [("GM302", 18, "unbacked")]
    assert "        expert_size = _mend_module_forward_18_op(expert_size)\n" in r.new_source
    assert "many=True" in r.new_source and "inputs.split(expert_size, dim=0)" in r.new_source
    assert not fix_source(SPLIT, lines={1}, **HF).changed  # only where Dynamo broke


@pytest.mark.parametrize("tokens,k,experts", [(5, 2, 4), (7, 1, 3), (3, 2, 6)])
def test_split_sizes_same_values_and_one_graph(tokens, k, experts):
    """Sorted rows split by routed counts, some experts never chosen; an expert that
    overflows does so in the original's rows only."""
    torch = pytest.importorskip("torch")
    after = fix_source(SPLIT, lines={18}, module="jet", **HF).new_source

    def load(src):
        ns: dict = {}
        exec(compile(src, "<segments>", "exec"), ns)
        return ns

    a, b = load(SPLIT), load(after)
    g = torch.Generator().manual_seed(tokens * 10 + k)
    weight = torch.randn(experts, 3, 4, generator=g)
    weight[-1] = float("inf")

    def layer(ns):
        e, gate = ns["Experts"](), ns["Gate"]()
        e.num_experts, e.weight = experts, weight
        return e, gate

    e, gate = layer(b)

    def run(gates, rows):
        return e.forward(rows, gate.forward(gates)[1])

    torch._dynamo.reset()
    compiled = torch.compile(run, fullgraph=True, backend="eager")
    for trial in range(4):
        logits = torch.randn(tokens, experts, generator=g)
        top = logits.topk(k, dim=1).indices
        gates = torch.zeros(tokens, experts).scatter(1, top, 1.0)
        if trial % 2:
            gates[:, 0] = 0  # expert 0 never chosen
            gates[:, 1] = 1
        rows = torch.randn(int(gates.sum()), 4, generator=g)
        outs = []
        for ns in (a, b):
            e2, gate2 = layer(ns)
            _, sizes = gate2.forward(gates)
            assert type(sizes) is list and all(type(n) is int for n in sizes)  # eager: the same Python ints
            outs.append(e2.forward(rows, sizes))
        torch.testing.assert_close(outs[1], outs[0], equal_nan=True)
        torch.testing.assert_close(compiled(gates, rows), outs[0], equal_nan=True)


def test_runs_by_id_fix_text():
    """X-MOD's language adapters: unique_consecutive runs, split by their lengths, a module per run."""
    safe = fix_source(BY_ID.before, **BY_ID.options(unsafe=False))
    assert [r.rule for r in safe.refused if "--unsafe-fixes" in r.advice] == ["GM503"]
    r = fix_source(BY_ID.before, **BY_ID.options())
    assert [(s.rule, s.line, s.strategy) for s in r.applied] == [("GM503", min(BY_ID.lines), "rows_by_id")]
    assert not fix_source(BY_ID.before, lines={1}, unsafe=True, **HF).changed  # only where Dynamo broke


@pytest.mark.parametrize("case", BY_ID_REFUSED,
                         ids=["lengths-read-after", "ids-rebound", "reduced", "dim-1-runs", "dim-1-split"])
def test_runs_by_id_fix_refused_by_every_family(case):
    assert not fix_source(case.before, **case.options()).changed


@pytest.mark.parametrize("ids", [[0, 0, 1, 1, 1], [2, 0, 2, 1, 0, 0], [1], [0, 2, 2, 2]])
def test_runs_by_id_same_values_and_one_graph(ids):
    """Runs of one id and interleaved ids, an adapter never used; and an adapter that gives
    inf on every row must not leak into the rows that are not its own."""
    torch = pytest.importorskip("torch")
    before, after = BY_ID.before, BY_ID.after

    def load(src):
        ns: dict = {}
        exec(compile(src, "<runs>", "exec"), ns)
        torch.manual_seed(0)
        return ns["LangAdapter"](["en", "de", "fr", "unused"], 6).eval()

    a, b = load(before), load(after)
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        for m in (a, b):
            m.adapter_modules["unused"].bias.fill_(float("inf"))
    lang_ids = torch.tensor(ids)
    x = torch.randn(len(ids), 3, 6)
    with torch.no_grad():
        torch.testing.assert_close(b(lang_ids, x), a(lang_ids, x))
        torch._dynamo.reset()
        compiled = torch.compile(b, fullgraph=True, backend="eager")
        torch.testing.assert_close(compiled(lang_ids, x), a(lang_ids, x))
