"""Which of torch's opaque-region tools compiles a region with a `nonzero` inside, on the
installed torch: the measurement behind GM501's safe fix (docs/rules/GM501.md) choosing
`torch.library.custom_op` over `torch._dynamo.nonstrict_trace` and `leaf_function`.

    python benchmarks/opaque_choice.py        # one line per tool and backend

Each tool wraps the same sparse expert dispatch (``torch.where(mask[e])`` gathers, an
``index_add_`` scatter); a line says whether ``torch.compile(fullgraph=True)`` ran it in
train mode with outputs and input and parameter gradients equal to eager, or the error.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def region(m, h, mask):
    import torch

    out = torch.zeros_like(h)
    for e in range(len(m.experts)):
        idx = torch.where(mask[e])[0]
        out.index_add_(0, idx, m.experts[e](h[idx]))
    return out


def _custom_op():
    """The shape mend writes (rewrites/fixes/gm5_opaque.py's helpers, run from their source)."""
    from rewrites.fixes.gm5_opaque import RUNTIME

    ns: dict = {}
    exec("import torch\n" + RUNTIME.source, ns)
    op = ns["_mend_opaque_op"]("mend_probe::region", lambda m, h, mask: region(m, h, mask), "module tensor tensor", 0)
    return lambda m, h, mask: op(m, [*m.parameters(), *m.buffers()], h, mask), ns["_mend_module_ref"]


def tools():
    import torch
    from torch._dynamo.decorators import leaf_function

    leaf = leaf_function(lambda m, h, mask: region(m, h, mask))
    leaf.register_fake(lambda m, h, mask: torch.empty_like(h))
    return {"nonstrict_trace": torch._dynamo.nonstrict_trace(region), "leaf_function": leaf}


def probe(name: str, fn, backend: str, ref=None) -> str:
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))
            if ref is not None:
                self._mend_opaque = ref(self)

        def forward(self, h):
            mask = nn.functional.one_hot(h.argmax(-1) % 3, 3).T.bool()
            return fn(self, h * 2, mask)

    torch.manual_seed(0)
    m = M()
    x = torch.randn(5, 8)
    try:
        torch._dynamo.reset()
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya = torch.compile(m, fullgraph=True, backend=backend)(xa)
        ya.sum().backward()
        got = [xa.grad] + [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        yb = region(m, xb * 2, nn.functional.one_hot(xb.argmax(-1) % 3, 3).T.bool())
        yb.sum().backward()
        want = [xb.grad] + [p.grad for p in m.parameters()]
        same = torch.allclose(ya, yb) and all(torch.allclose(a, b) for a, b in zip(got, want))
        return f"{name:16} {backend:10} {'ok: one graph, outputs and gradients equal' if same else 'values differ'}"
    except Exception as exc:  # what the tool cannot do is the measurement
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{name:16} {backend:10} fails: {type(exc).__name__}: {first[:120]}"


def main() -> None:
    import torch

    print(f"torch {torch.__version__}")
    op, ref = _custom_op()
    for backend in ("aot_eager", "inductor"):
        for name, fn in tools().items():
            print(probe(name, fn, backend))
        print(probe("custom_op", op, backend, ref))


if __name__ == "__main__":
    main()
