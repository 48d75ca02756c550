"""The runtime fixes copy into the files they rewrite (rewrites/fixes/runtime/): real modules,
read as text by mend and copied whole; imported here, so each runs as the user's file runs it."""

from __future__ import annotations

import importlib

import pytest

from rewrites.fixes.runtime import helper


@pytest.mark.parametrize("module", ["size_op", "opaque"])
def test_a_helper_is_the_modules_functions_as_the_file_has_them(module):
    got = helper(module)
    mod = importlib.import_module(f"rewrites.fixes.runtime.{module}")
    assert got.name in vars(mod) and got.source.startswith(f"def {got.name}(")
    text = open(mod.__file__, encoding="utf-8").read()
    assert text.endswith(got.source) and "import torch" not in got.source.split("\n", 1)[0]


def test_the_size_op_keeps_a_read_in_one_graph_and_is_made_once():
    torch = pytest.importorskip("torch")
    from rewrites.fixes.runtime.size_op import _mend_size_op

    op = _mend_size_op("mend::test_runtime_read", lambda t: t.item())
    assert _mend_size_op("mend::test_runtime_read", lambda t: t.item()) is op  # the same read: the same op

    def pooled(x, k):
        n = op(k)
        torch._check(n >= 0)
        return x[:, :n].sum(1) + torch.arange(n).sum()

    x, k = torch.randn(3, 8), torch.tensor(5)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(pooled)(x, k)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    assert torch.equal(torch.compile(pooled, backend="eager")(x, k), pooled(x, k))
