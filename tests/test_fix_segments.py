"""The unsafe GM302 fix for split sizes read back with ``.tolist()`` (ScatterMoE-style experts):
the exact rewrite, its refusals, and that the rewritten layer computes the same and compiles
to one graph."""

from __future__ import annotations

import pytest

from rewrites.fixes import fix_source
from rewrites.fixes import gm5_segments

# the cases are transformers code: laid out at its ruff line-length
HF = {"line_length": 119}


# the family's cases: the split sizes (GM302) and X-MOD's runs by id (GM503, class LangAdapter)
SPLIT, BY_ID = [c for c in gm5_segments.CASES if c.after is not None]
SPLIT_REFUSED = [c for c in gm5_segments.CASES if c.after is None and "LangAdapter" not in c.before]
BY_ID_REFUSED = [c for c in gm5_segments.CASES if c.after is None and "LangAdapter" in c.before]


def test_segments_fix_text():
    """The text, idempotence and the refusal without --unsafe-fixes are test_fix_cases.py's."""
    safe = fix_source(SPLIT.before, **SPLIT.options(unsafe=False))
    assert [r.line for r in safe.refused if "--unsafe-fixes" in r.advice] == sorted(SPLIT.lines)
    r = fix_source(SPLIT.before, **SPLIT.options())
    assert [(s.rule, s.line, s.strategy) for s in r.applied] == [("GM302", min(SPLIT.lines), "segments")]


@pytest.mark.parametrize("case", SPLIT_REFUSED, ids=["across-rows", "chunks-escape", "other-name", "dim-1"])
def test_segments_fix_refused_by_every_family(case):
    assert not fix_source(case.before, **case.options()).changed


def test_segments_fix_only_at_a_break_line():
    assert not fix_source(SPLIT.before, lines={1}, unsafe=True, **HF).changed


@pytest.mark.parametrize("tokens,k,experts", [(5, 2, 4), (7, 1, 3), (3, 2, 6)])
def test_segments_same_values_and_one_graph(tokens, k, experts):
    """Sorted rows split by routed counts, some experts never chosen; an expert that
    overflows on rows it was not given must not leak into the result."""
    torch = pytest.importorskip("torch")
    before, after = SPLIT.before, SPLIT.after

    def load(src):
        ns: dict = {}
        exec(compile(src, "<segments>", "exec"), ns)
        return ns

    a, b = load(before), load(after)
    g = torch.Generator().manual_seed(tokens * 10 + k)
    weight = torch.randn(experts, 3, 4, generator=g)
    weight[-1] = float("inf")  # the last expert gives inf/nan: rows it was not given must not see them

    def layer(ns):
        e, gate = ns["Experts"](), ns["Gate"]()
        e.num_experts, e.weight = experts, weight
        return e, gate

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
            e, gate = layer(ns)
            _, sizes = gate.forward(gates)
            outs.append(e.forward(rows, sizes))
        torch.testing.assert_close(outs[1], outs[0], equal_nan=True)

    e, gate = layer(b)

    def run(gates, rows):
        return e.forward(rows, gate.forward(gates)[1])

    torch._dynamo.reset()
    compiled = torch.compile(run, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(gates, rows), run(gates, rows), equal_nan=True)


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
