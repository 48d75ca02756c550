"""GM5 opaque regions (rewrites/fixes/gm5_opaque.py): a data-dependent region with a static
output shape becomes one custom op. What the rewritten code computes (eager, compiled in one
graph, gradients of inputs and parameters, random numbers drawn in the region drawn again alike
by its backward), that its op is registered once per process and
another file's region of the same name gets an op of its own, the refusals for a torch without what the op is
made of, and that a second ``mend fix --write`` leaves the file as the first wrote it."""

from __future__ import annotations

import sys

import pytest

from rewrites.fixes import fix_source
from rewrites.fixes import gm5_opaque

REWRITE = gm5_opaque.CASES[0]  # the Moe of the family's cases, rewritten at its nonzero line


def _module(source: str, name: str) -> dict:
    import types

    mod = types.ModuleType(name)
    # importable, as a user's file is: torch.compile traces a region from whichever import of
    # its file first made the op (the op is registered once per process)
    sys.modules[name] = mod
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)
    return mod.__dict__


def _pair(torch, before: str, after: str, tag: str):
    """The original and the rewritten Moe, built from one seed (the same weights)."""
    modules = _module(before, f"{tag}_before"), _module(after, f"{tag}_after")
    built = []
    for ns in modules:
        torch.manual_seed(0)
        built.append(ns["Moe"]())
    return built


def test_torch_without_custom_op_refused_per_site(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.delattr(torch.library, "custom_op")
    r = fix_source(REWRITE.before, **REWRITE.options())
    assert not r.changed
    assert [x.line for x in r.refused if "torch.library.custom_op" in x.reason] == [12], r.refused


def test_old_torch_refused_without_importing_it(monkeypatch):
    """The planner reads the installed torch's version when the process has not imported torch."""
    import graphmend.core.env as env

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(env, "torch_version", lambda: "2.3.1")
    r = fix_source(REWRITE.before, **REWRITE.options())
    assert not r.changed
    assert any("torch 2.3.1 is older than 2.4" in x.reason for x in r.refused), r.refused
    monkeypatch.setattr(env, "torch_version", lambda: "2.11.0")  # no opaque objects: the op takes the id
    assert fix_source(REWRITE.before, **REWRITE.options()).changed


def _batch(torch, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(9, 8, generator=g)
    expert = torch.tensor([0, 2, 2, 1, 0, 2, 3, 3, 0])  # every expert, unevenly
    return x, expert


def test_rewritten_moe_same_values_and_gradients_in_one_graph():
    torch = pytest.importorskip("torch")
    ref, new = _pair(torch, REWRITE.before, REWRITE.after, "opaque")
    x, expert = _batch(torch)

    # no break: the whole forward is one graph, and fullgraph compiles
    torch._dynamo.reset()
    assert torch._dynamo.explain(new)(x, expert).graph_count == 1
    compiled = torch.compile(new, backend="aot_eager", fullgraph=True)

    for fn in (new, compiled):
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ref.zero_grad()
        new.zero_grad()
        ya, yb = ref(xa, expert), fn(xb, expert)
        assert torch.allclose(ya, yb, atol=1e-6)
        (ya * torch.arange(8.0)).sum().backward()
        (yb * torch.arange(8.0)).sum().backward()
        assert torch.allclose(xa.grad, xb.grad, atol=1e-6)
        for (name, p), q in zip(ref.named_parameters(), new.parameters()):
            assert torch.allclose(p.grad, q.grad, atol=1e-6), name
    # experts no token picked (empty index sets) get zero gradient on both sides
    expert = torch.zeros(9, dtype=torch.long)
    ref.zero_grad()
    new.zero_grad()
    ref(x, expert).sum().backward()
    compiled(x, expert).sum().backward()
    for p, q in zip(ref.parameters(), new.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)


def test_inductor_gets_the_layouts_the_fakes_promise():
    """Inductor asserts each custom op output's strides against its fake's: an argument that
    is a transposed view gets, from the region and from autograd, other strides than
    ``empty_like`` of it gives. The op hands both back in the fake's layout."""
    torch = pytest.importorskip("torch")
    ref, new = _pair(torch, REWRITE.before, REWRITE.after, "opaque_layout")
    x, expert = _batch(torch)
    torch._dynamo.reset()
    compiled = torch.compile(new, backend="inductor", fullgraph=True)
    xa = x.t().contiguous().t().requires_grad_()  # the same values, strided (1, 9)
    xb = x.t().contiguous().t().requires_grad_()
    ya, yb = ref(xa, expert), compiled(xb, expert)
    assert torch.allclose(ya, yb, atol=1e-5)
    ya.sum().backward()
    yb.sum().backward()
    assert torch.allclose(xa.grad, xb.grad, atol=1e-5)
    for (name, p), q in zip(ref.named_parameters(), new.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5), name


def test_a_float32_accumulator_keeps_its_dtype_in_the_fake_and_the_graph():
    """gpt-oss's experts accumulate a bfloat16 model's outputs in float32 (`zeros_like(x,
    dtype=torch.float32, device=x.device)`): the op's fake must say float32, or the graph after
    it, which casts back (`.to(x.dtype)`, as gpt-oss does), is traced as a no-op."""
    torch = pytest.importorskip("torch")
    case = next(c for c in gm5_opaque.CASES if c.after and "dtype=torch.float32" in c.after)
    ref, new = (m.to(torch.bfloat16) for m in _pair(torch, case.before, case.after, "f32"))
    x, expert = _batch(torch)
    x = x.to(torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(new, backend="aot_eager", fullgraph=True)
    want, got = ref(x, expert), compiled(x, expert)
    assert want.dtype == got.dtype == torch.bfloat16
    assert torch.equal(want, got)


def test_the_callers_autocast_reaches_the_region_compiled_and_in_backward():
    """Under autocast the experts' matmuls run in bfloat16 in the original program. A compiled
    graph runs the op without autocast's state, and autograd runs the backward's recomputation
    without it: both must re-enter the caller's autocast, or the mended program computes the
    region in float32 (other outputs), and its gradients from a float32 recomputation."""
    torch = pytest.importorskip("torch")
    ref, new = _pair(torch, REWRITE.before, REWRITE.after, "amp")
    x, expert = _batch(torch)

    def step(module, fn):
        module.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = fn(xi, expert)
        (y.float() * torch.arange(8.0)).sum().backward()  # outside autocast, as AMP training does
        return y.detach(), xi.grad, [p.grad for p in module.parameters()]

    want = step(ref, ref)
    with torch.no_grad():
        assert not torch.allclose(want[0], ref(x, expert), atol=1e-4)  # autocast did change the values
    torch._dynamo.reset()
    for fn in (new, torch.compile(new, backend="aot_eager", fullgraph=True)):
        y, gx, gp = step(new, fn)
        assert torch.equal(y, want[0])
        assert torch.allclose(gx, want[1], atol=1e-6)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(gp, want[2]))


# experts that draw random numbers in training: a dropout module in each (switch_transformers'
# and nllb-moe's experts), or a dropout the region itself calls
DROPOUT_EXPERTS = gm5_opaque._MOE.replace(
    "nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))",
    "nn.ModuleList(nn.Sequential(nn.Linear(dim, dim), nn.Dropout(0.5)) for _ in range(n))")
DROPOUT_IN_REGION = gm5_opaque._MOE.replace(
    "out[idx] = self.experts[e](x[idx]).to(x.dtype)",
    "out[idx] = nn.functional.dropout(self.experts[e](x[idx]), 0.5, self.training).to(x.dtype)")


def _train_step(torch, module, fn, x, expert, seed=7):
    """One training step in train mode: output, input and parameter gradients, the RNG after it."""
    module.train()
    module.zero_grad(set_to_none=True)
    xi = x.clone().requires_grad_()
    torch.manual_seed(seed)
    y = fn(xi, expert)
    (y * torch.arange(8.0)).sum().backward()
    return y.detach(), xi.grad, {k: p.grad for k, p in module.named_parameters()}, torch.get_rng_state()


def _same_step(torch, want, got):
    assert torch.allclose(want[0], got[0], atol=1e-6)
    assert torch.allclose(want[1], got[1], atol=1e-6)
    for name, g in want[2].items():
        assert torch.allclose(g, got[2][name], atol=1e-6), name
    assert torch.equal(want[3], got[3]), "the RNG state after forward and backward differs"


@pytest.mark.parametrize("source", [DROPOUT_EXPERTS, DROPOUT_IN_REGION], ids=["dropout-module", "dropout-call"])
def test_random_numbers_in_the_region_drawn_once(source):
    """The forward draws the random numbers, the backward differentiates what it recorded:
    outputs, input and parameter gradients and the RNG state after forward + backward are the original's, eager and compiled in one graph."""
    torch = pytest.importorskip("torch")
    r = fix_source(source, lines={13}, module="module")
    assert [s.strategy for s in r.applied] == ["opaque"], r.refused
    ref, new = _pair(torch, source, r.new_source, "rng")
    x, expert = _batch(torch)
    want = _train_step(torch, ref, ref, x, expert)
    assert (want[0] == 0).sum() > 10  # dropout did drop: the random numbers matter
    assert not torch.equal(want[0], _train_step(torch, ref, ref, x, expert, seed=8)[0])
    torch._dynamo.reset()
    new.train()
    assert torch._dynamo.explain(new)(x, expert).graph_count == 1
    runs = [new, torch.compile(new, backend="aot_eager", fullgraph=True)]
    if source is DROPOUT_EXPERTS:
        runs.append(torch.compile(new, fullgraph=True))  # Inductor, the default mode
    for fn in runs:
        _same_step(torch, want, _train_step(torch, new, fn, x, expert))
    # eval mode: dropout off, the same values
    ref.eval()
    new.eval()
    with torch.no_grad():
        assert torch.equal(ref(x, expert), new(x, expert))


# the everyday programs the region must not change: a forward hook on the experts (an
# expert-load monitor), a module-owned generator drawing noise in the region, Python's
# `random` (a LayerDrop-style coin), each seen once per step as the original sees them
NOISY = gm5_opaque._MOE.replace(
    "        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))\n",
    "        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))\n"
    "        self.noise = torch.Generator().manual_seed(3)\n").replace(
    "out[idx] = self.experts[e](x[idx]).to(x.dtype)",
    "out[idx] = (self.experts[e](x[idx]) + 0.1 * torch.randn(idx.numel(), x.shape[-1], generator=self.noise)"
    " * random.random()).to(x.dtype)").replace("import torch\n", "import random\n\nimport torch\n", 1)


def _monitored_step(torch, module, fn, x, expert):
    """One training step with an expert-load monitor (a forward hook per expert): the rows
    each expert saw, the output, the gradients, the module generator's and `random`'s states."""
    import random

    seen = []
    hooks = [e.register_forward_hook(lambda mod, args, out, i=i: seen.append((i, args[0].shape[0])))
             for i, e in enumerate(module.experts)]
    try:
        module.zero_grad(set_to_none=True)
        random.seed(5)
        xi = x.clone().requires_grad_()
        y = fn(xi, expert)
        (y * torch.arange(8.0)).sum().backward()
    finally:
        for h in hooks:
            h.remove()
    return (seen, y.detach(), xi.grad, [p.grad for p in module.parameters()],
            module.noise.get_state() if hasattr(module, "noise") else None, random.random())


@pytest.mark.parametrize("source", [gm5_opaque._MOE, NOISY], ids=["hooks", "hooks-generator-random"])
def test_the_region_runs_once_per_step_hooks_generators_random(source):
    """The region runs once a training step, eager and compiled in one graph: a forward hook on
    an expert fires once (the backward differentiates what the forward recorded, it does not run
    the region again), a module-owned generator and Python's `random` are drawn once."""
    torch = pytest.importorskip("torch")
    line = source.splitlines().index("            idx = torch.nonzero(expert == e).squeeze(-1)") + 1
    r = fix_source(source, lines={line}, module="module")
    assert [s.strategy for s in r.applied] == ["opaque"], r.refused
    ref, new = _pair(torch, source, r.new_source, "once")
    x, expert = _batch(torch)
    want = _monitored_step(torch, ref, ref, x, expert)
    assert sorted(want[0]) == [(0, 3), (1, 1), (2, 3), (3, 2)]
    torch._dynamo.reset()
    for fn in (new, torch.compile(new, backend="aot_eager", fullgraph=True)):
        if hasattr(ref, "noise"):
            ref.noise.manual_seed(3)
            new.noise.manual_seed(3)
            want = _monitored_step(torch, ref, ref, x, expert)
            ref.noise.manual_seed(3)
        got = _monitored_step(torch, new, fn, x, expert)
        assert got[0] == want[0], "the experts' forward hooks fired another number of times"
        assert torch.allclose(got[1], want[1], atol=1e-6) and torch.allclose(got[2], want[2], atol=1e-6)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got[3], want[3]))
        if want[4] is not None:
            assert torch.equal(got[4], want[4]), "the module's generator was drawn again"
        assert got[5] == want[5], "Python's random was drawn again"
    assert not sys.modules["_mend_opaque_runtime"].saved, "a recorded graph outlived its backward"


def test_double_backward_through_the_region():
    """A gradient penalty (WGAN-GP): the input gradient taken with create_graph=True, then a
    backward through it. The mended region differentiates twice as the original does."""
    torch = pytest.importorskip("torch")
    ref, new = _pair(torch, gm5_opaque._MOE.replace("self.experts[e](x[idx])", "torch.tanh(self.experts[e](x[idx]))"),
                     REWRITE.after.replace("self.experts[e](x[idx])", "torch.tanh(self.experts[e](x[idx]))"), "gp")
    x, expert = _batch(torch)
    got = []
    for m in (ref, new):
        m.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(m(xi, expert).sum(), xi, create_graph=True)
        ((g.norm(dim=-1) - 1) ** 2).mean().backward()
        got.append([p.grad for p in m.parameters()])
    assert all(a is not None and torch.allclose(a, b, atol=1e-6) for a, b in zip(*got))


def test_torch_func_grad_over_the_module():
    """torch.func.grad over functional_call of the mended module: the original's gradients."""
    torch = pytest.importorskip("torch")
    from torch.func import functional_call, grad

    ref, new = _pair(torch, REWRITE.before, REWRITE.after, "func")
    x, expert = _batch(torch)
    got = []
    for m in (ref, new):
        params = {k: v.detach() for k, v in m.named_parameters()}
        got.append(grad(lambda p, m=m: functional_call(m, p, (x, expert)).pow(2).sum())(params))
    assert got[0].keys() == got[1].keys()
    assert all(torch.allclose(got[0][k], got[1][k], atol=1e-6) for k in got[0])


def _replicate(module, torch):
    """What nn.parallel.replicate makes of a module (on the CPU, one replica): a shallow copy of
    every submodule whose parameters are differentiable copies held as plain attributes."""
    copies = {id(m): m._replicate_for_data_parallel() for m in module.modules()}
    for m in module.modules():
        r = copies[id(m)]
        for k, child in m._modules.items():
            r._modules[k] = copies[id(child)]
        for k, p in m._parameters.items():
            setattr(r, k, p * 1)  # Broadcast's copy: differentiable back to the original
    return copies[id(module)]


def test_a_data_parallel_replica_runs_its_own_parameters():
    """nn.DataParallel's replicas share the original's __dict__, its handle included: the
    region must run on the replica it was called on, and the gradients reach the original."""
    torch = pytest.importorskip("torch")
    ref, new = _pair(torch, REWRITE.before, REWRITE.after, "dp")
    x, expert = _batch(torch)
    torch._dynamo.reset()
    for compiled in (False, True):  # compiled: the replica's region is traced as the original's
        for m in (ref, new):
            m.zero_grad(set_to_none=True)
            rep = _replicate(m, torch)
            fn = torch.compile(rep, backend="aot_eager") if compiled and m is new else rep
            (fn(x, expert) * torch.arange(8.0)).sum().backward()
        for (name, p), q in zip(ref.named_parameters(), new.parameters()):
            assert q.grad is not None and torch.allclose(p.grad, q.grad, atol=1e-6), (compiled, name)


def test_forward_reads_the_modules_own_tensors_in_place_and_backward_swaps_its_leaves(monkeypatch):
    """Without a backward to follow (no_grad), the compiled op runs the region on the module's
    own parameters without a reparametrization per call; with one, its forward swaps detached
    leaves in to record the graph it differentiates, so the gradients are the original
    program's; and parameters given in place of the module's (functional_call-style) are the
    ones the region reads."""
    torch = pytest.importorskip("torch")
    import torch.nn.utils.stateless as stateless

    ref, new = _pair(torch, REWRITE.before, REWRITE.after, "own")
    x, expert = _batch(torch, 5)
    swaps = []
    real = stateless._reparametrize_module
    # the region's swaps only (AOTAutograd swaps a graph module of its own while tracing)
    spy = (lambda mod, *a, **k: (swaps.append(1) if mod is new else None) or real(mod, *a, **k))
    monkeypatch.setattr(stateless, "_reparametrize_module", spy)
    compiled = torch.compile(new, backend="aot_eager", fullgraph=True)
    with torch.no_grad():
        for fn in (new, compiled):
            assert torch.allclose(fn(x, expert), ref(x, expert), atol=1e-6)
    assert swaps == []
    for fn in (new, compiled):
        ref.zero_grad()
        new.zero_grad()
        ref(x, expert).pow(2).sum().backward()
        fn(x, expert).pow(2).sum().backward()
        for (name, p), q in zip(ref.named_parameters(), new.parameters()):
            assert torch.allclose(p.grad, q.grad, atol=1e-6), name
    assert swaps, "the backward differentiates with respect to leaves it swaps in"
    # other tensors than the module's own: the region must read those, not the module's
    doubled = {n: p.detach() * 2 for n, p in new.named_parameters()}
    with torch.no_grad():
        want = torch.func.functional_call(ref, {n: p.detach() * 2 for n, p in ref.named_parameters()}, (x, expert))
        got = torch.func.functional_call(new, doubled, (x, expert))
    assert torch.allclose(want, got, atol=1e-5)
    assert not torch.allclose(got, new(x, expert).detach(), atol=1e-3)


def test_ops_kept_out_of_cuda_graphs():
    """The region syncs and the stash reads the generator's host-side state: both ops say they
    cannot be captured, so reduce-overhead partitions around them."""
    torch = pytest.importorskip("torch")
    call = _module(REWRITE.after, "opaque_tags")["_mend_module_forward_11_op"]
    ops = sys.modules["_mend_opaque_runtime"].ops
    name = next(n for n, (c, _) in ops.items() if c is call).split("::")[1]
    for op in (getattr(torch.ops.mend, name), getattr(torch.ops.mend, name + "_backward")):
        assert torch.Tag.cudagraph_unsafe in op.default.tags, op


def test_registered_once_per_process_and_a_name_taken_by_another_region_not_reused():
    torch = pytest.importorskip("torch")
    first = _module(REWRITE.after, "opaque_once_a")
    second = _module(REWRITE.after, "opaque_once_b")  # the same file imported again (the overlay)
    assert first["_mend_module_forward_11_op"] is second["_mend_module_forward_11_op"]
    # another file whose region has the same site name (stem, function, line) gets its own op
    other = _module(REWRITE.after.replace("out[idx] = self.experts[e](x[idx]).to(x.dtype)",
                                          "out[idx] = self.experts[e](x[idx]).to(x.dtype) * 3"), "opaque_once_c")
    assert other["_mend_module_forward_11_op"] is not first["_mend_module_forward_11_op"]
    x, expert = _batch(torch, 1)
    torch.manual_seed(0)
    m, m3 = second["Moe"](), other["Moe"]()
    m3.load_state_dict(m.state_dict())
    assert torch.allclose(m3(x, expert), m(x, expert) * 3)


MODEL = gm5_opaque._MOE + '''

def mend_target_moe():
    torch.manual_seed(0)
    return Moe().eval(), (torch.randn(9, 8), torch.tensor([0, 2, 2, 1, 0, 2, 3, 3, 0]))
'''


def test_mend_fix_write_twice(tmp_path):
    """Verified in every mode and written; a second --write finds no break and leaves the file."""
    pytest.importorskip("torch")
    import json
    import os
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    model = tmp_path / "moe_model.py"
    model.write_text(MODEL, encoding="utf-8")

    path = os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])  # keep what the caller's path adds

    def mend():
        return subprocess.run([sys.executable, "-m", "graphmend", "fix", "--calls", "1", "--format", "json", "--quiet", "--write",
                               str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": path, "MEND_NO_CACHE": "1"})

    first = mend()
    report = json.loads(first.stdout)
    verified = [f for f in report["fixes"] if f["status"] == "verified"]
    assert [f["rule"] for f in verified] == ["GM501"], report["fixes"]
    assert {"eval", "train+grad", "autocast", "inputs"} <= set(verified[0]["checks"]), verified
    target = report["fix_targets"][0]
    assert target["breaks_before"] > 0 and target["breaks_after"] == 0 and target["outputs_equal"], target
    written = model.read_text(encoding="utf-8")
    assert 'torch.library.custom_op' in written and '"mend::moe_model_forward_11"' in written
    assert first.returncode == 0, first.stderr

    second = mend()
    assert second.returncode == 0, second.stderr
    assert model.read_text(encoding="utf-8") == written
    assert json.loads(second.stdout)["fix_targets"][0]["breaks_before"] == 0


def test_module_copies_keep_their_own_handle():
    """deepcopy and torch.save / torch.load of a mended module: its handle is the copy's."""
    torch = pytest.importorskip("torch")
    import copy
    import io
    import types

    mod = types.ModuleType("opaque_copies")
    sys.modules[mod.__name__] = mod  # pickle finds the class by its module
    try:
        exec(compile(REWRITE.after, "opaque_copies.py", "exec"), mod.__dict__)
        torch.manual_seed(0)
        m = mod.Moe()
        x, expert = _batch(torch, 2)
        buf = io.BytesIO()
        torch.save(m, buf)
        buf.seek(0)
        for twin in (copy.deepcopy(m), torch.load(buf, weights_only=False)):
            assert twin._mend_opaque.module is twin
            assert torch.allclose(twin(x, expert), m(x, expert))
    finally:
        del sys.modules[mod.__name__]


# what a torch without reference-typed opaque objects (before 2.13) runs: the op takes the
# module's id; each instance (a copy, an unpickled one) must reach the region as itself
_WITHOUT_OPAQUE = r"""
import copy, gc, io, sys, types
import torch
import torch._dynamo, torch._functorch.aot_autograd

def absent(*args, **kwargs):
    raise ImportError("no opaque objects")

try:
    import torch._library.opaque_object as oo
except ImportError:
    pass  # a torch before them
else:
    oo.register_opaque_type = absent  # torch itself registered its own already
mod = types.ModuleType("opaque_by_id")
sys.modules[mod.__name__] = mod
exec(compile(sys.stdin.read(), "opaque_by_id.py", "exec"), mod.__dict__)
assert sys.modules["_mend_opaque_runtime"].opaque is False
g = torch.Generator().manual_seed(0)
x, expert = torch.randn(9, 8, generator=g), torch.tensor([0, 2, 2, 1, 0, 2, 3, 3, 0])
torch.manual_seed(0)
a = mod.Moe(scale=1.0)
assert torch._dynamo.explain(a)(x, expert).graph_count == 1
buf = io.BytesIO()
torch.save(a, buf)
buf.seek(0)
twins = [copy.deepcopy(a), torch.load(buf, weights_only=False)]
for i, t in enumerate(twins):
    t.scale = 2.0 + i  # read only inside the region: Dynamo does not guard it
want = [m(x, expert) for m in [a, *twins]]
del a
gc.collect()  # the copies outlive the module they were made from
for m, w in zip(twins, want[1:]):
    xg = x.clone().requires_grad_()
    y = torch.compile(m, backend="aot_eager", fullgraph=True)(xg, expert)
    assert torch.allclose(y, w, atol=1e-6), "the region ran with another module"
    y.sum().backward()
    assert xg.grad is not None and all(p.grad is not None for p in m.experts[0].parameters())
print("ok")
"""


def test_without_opaque_objects_the_op_takes_the_module_by_id():
    """torch 2.9-2.12 have `custom_op` but no reference-typed opaque objects: the module's id,
    guarded by Dynamo, reaches the op, which finds copies and unpickled modules as themselves."""
    pytest.importorskip("torch")
    import subprocess

    scaled = gm5_opaque._MOE.replace("def __init__(self, dim=8, n=4):\n        super().__init__()\n",
                                     "def __init__(self, dim=8, n=4, scale=1.0):\n        super().__init__()\n"
                                     "        self.scale = scale\n")
    scaled = scaled.replace("self.experts[e](x[idx]).to(x.dtype)", "(self.experts[e](x[idx]) * self.scale).to(x.dtype)")
    r = fix_source(scaled, **{**REWRITE.options(), "lines": {14}})  # the nonzero, one line down
    assert "_mend_module_ref(self)" in r.new_source, r.refused
    run = subprocess.run([sys.executable, "-c", _WITHOUT_OPAQUE], input=r.new_source, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


def test_unsafe_dense_dispatch_still_offered_and_taken_with_the_flag():
    """Mixtral's loop: without --unsafe-fixes the opaque op, and the site still says the dense
    dispatch exists (verification may reject the op); with the flag
    the dense dispatch, and no opaque op."""
    from test_fix_dispatch import MIXTRAL_LIKE

    safe = fix_source(MIXTRAL_LIKE, lines={22}, module="moe")
    assert [(s.rule, s.strategy) for s in safe.applied] == [("GM501", "opaque")]
    assert any(r.line == 22 and "--unsafe-fixes" in r.advice for r in safe.refused), safe.refused
    unsafe = fix_source(MIXTRAL_LIKE, lines={22}, module="moe", unsafe=True)
    assert {s.strategy for s in unsafe.applied} == {"dense_dispatch"}
    assert "_mend_opaque_op" not in unsafe.new_source


def test_before_torch_2_13_the_handle_is_not_an_opaque_object():
    """torch 2.11 accepts reference-typed opaque objects, but its Inductor fails to hash a
    handle into the FX-graph cache key: before 2.13 the op takes the module's id."""
    pytest.importorskip("torch")
    import subprocess

    script = ("import sys, torch\nfrom torch.torch_version import TorchVersion\n"
              "torch.__version__ = TorchVersion(sys.argv[1])\n"
              "ns = {}\nexec(sys.stdin.read(), ns)\nprint(ns['_mend_opaque_runtime']().opaque)\n")
    seen = {}
    for version in ("2.11.0+cu130", "2.13.0"):
        out = subprocess.run([sys.executable, "-c", script, version], input="import torch\n" + gm5_opaque.RUNTIME.text,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        seen[version] = out.stdout.strip()
    assert seen["2.11.0+cu130"] == "False"
    have = True
    try:
        from torch._library.opaque_object import register_opaque_type  # noqa: F401
        from torch._opaque_base import OpaqueBase  # noqa: F401
    except ImportError:
        have = False
    assert seen["2.13.0"] == str(have)
