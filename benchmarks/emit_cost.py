"""What a warning kept firing in compiled code costs (GM202 / GM203's ``emit_if``): a model with
a NaN check between its layers, compiled three ways in one run -- the original (the check
breaks the graph), mended (one graph; the effectful op reads the condition: a host sync), and
without the check at all (one graph, nothing read) -- timed alternately, medians reported as
ratios to the original.

    python benchmarks/emit_cost.py            # CPU
    python benchmarks/emit_cost.py --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
exec(compile((Path(__file__).resolve().parent.parent / "rewrites/fixes/runtime/emit.py").read_text(), "emit.py",
             "exec"))  # the helpers as a rewritten file holds them


class Net(nn.Module):
    def __init__(self, how: str, width: int):
        super().__init__()
        self.how = how
        self.a, self.b = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        h = torch.relu(self.a(x))
        if self.how == "original":
            if torch.isnan(h).any():
                warnings.warn("NaN in the hidden state")
        elif self.how == "mended":
            _mend_warn_if(torch.isnan(h).any(), "NaN in the hidden state", UserWarning, 36)  # noqa: F821
        return self.b(h)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.width, device=args.device)
    arms = {}
    for how in ("original", "mended", "unchecked"):
        torch._dynamo.reset()
        m = Net(how, args.width).to(args.device).eval()
        explained = torch._dynamo.explain(m)(x)
        torch._dynamo.reset()
        arms[how] = (torch.compile(m), explained.graph_count)
    times: dict[str, list[float]] = {k: [] for k in arms}
    with torch.no_grad():
        for fn, _ in arms.values():
            for _ in range(5):
                fn(x)
        for _ in range(args.runs):
            for how, (fn, _) in arms.items():
                if args.device == "cuda":
                    torch.cuda.synchronize()
                t = time.perf_counter()
                fn(x)
                if args.device == "cuda":
                    torch.cuda.synchronize()
                times[how].append(time.perf_counter() - t)
    base = statistics.median(times["original"])
    print(f"torch {torch.__version__}, {args.device}, batch {args.batch}, width {args.width}, {args.runs} runs each")
    for how, (_, graphs) in arms.items():
        med = statistics.median(times[how])
        print(f"{how:10} graphs {graphs}  median {med * 1e6:8.1f} us  / original {med / base:.2f}")


if __name__ == "__main__":
    main()
