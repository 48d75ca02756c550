"""Can M2M-100's LayerDrop (``if torch.rand([]) < self.layerdrop: skip the layer``, a graph
break in every training step) become a ``torch.cond`` per layer (skip: the hidden states; else
the layer)? The probe behind GM101's LayerDrop refusal: a tiny M2M-100 encoder in train mode, its
layer loop as transformers writes it and as a ``torch.cond``, with the layers' dropout at
M2M-100's default 0.1 and at 0. From each of 8 seeds it compares the forward (output and RNG
state after it), then a train step eagerly and compiled with ``aot_eager`` (output, input and
layer gradients, RNG state after the backward), and counts the cond form's graphs::

    python benchmarks/layerdrop_cond.py

On torch 2.13 the forward matches at both rates, but with dropout the gradients and the RNG
state after the step differ: the backward re-runs the branch and draws its dropout again. So
the cond form is not a safe rewrite (a layer that draws nothing is not something mend can
prove from the loop).
"""

from __future__ import annotations

import json


def main() -> int:
    for dropout in (0.1, 0.0):  # M2M-100's default, and a layer that draws nothing
        print(json.dumps(probe(dropout)))
    return 0


def probe(dropout: float) -> dict:
    import torch
    import transformers as T

    cfg = T.M2M100Config(vocab_size=100, d_model=16, encoder_layers=4, decoder_layers=2, encoder_attention_heads=2,
                         decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, encoder_layerdrop=0.5,
                         dropout=dropout, attention_dropout=dropout, activation_dropout=dropout)
    torch.manual_seed(0)
    enc = T.M2M100Model(cfg).train().encoder

    def original(h):
        for layer in enc.layers:
            if torch.rand([]) < enc.layerdrop:
                continue
            h = layer(h, None)
        return h

    def with_cond(h):
        for layer in enc.layers:
            h = torch.cond(torch.rand([]) < enc.layerdrop, lambda h: h.clone(), lambda h, layer=layer: layer(h, None),
                           (h,))
        return h

    h = torch.randn(2, 5, 16)
    params = list(enc.layers.parameters())
    row: dict = {"torch": torch.__version__, "transformers": T.__version__, "dropout": cfg.dropout}
    forward_same = []
    for seed in range(8):
        torch.manual_seed(seed)
        a, state_a = original(h), torch.get_rng_state()
        torch.manual_seed(seed)
        b, state_b = with_cond(h), torch.get_rng_state()
        forward_same.append(torch.equal(a, b) and torch.equal(state_a, state_b))
    row["eager_forward_equal_over_8_seeds"] = all(forward_same)

    def step(fn, seed):
        """One train step from ``seed``: output, input and layer gradients, RNG state after it."""
        torch.manual_seed(seed)
        x = h.clone().requires_grad_()
        for p in params:
            p.grad = None
        y = fn(x)
        y.sum().backward()
        grads = [x.grad] + [torch.zeros_like(p) if p.grad is None else p.grad for p in params]
        return y.detach(), grads, torch.get_rng_state()

    for name, fn in (("eager", with_cond), ("aot_eager", torch.compile(with_cond, backend="aot_eager"))):
        torch._dynamo.reset()
        same = {"output": True, "gradients": True, "rng_state": True}
        try:
            for seed in range(8):
                (ya, ga, ra), (yb, gb, rb) = step(original, seed), step(fn, seed)
                same["output"] &= torch.allclose(ya, yb)
                same["gradients"] &= all(torch.allclose(u, v) for u, v in zip(ga, gb))
                same["rng_state"] &= torch.equal(ra, rb)
            row[f"train_step_equal_{name}"] = same
        except Exception as e:  # noqa: BLE001 (the probe's answer)
            row[f"train_step_equal_{name}"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    # the cond form's count only: after the loop's break torch 2.13 skips the loop's frame, so
    # explain() of the original counts the layers' own frames, not the break
    torch._dynamo.reset()
    explained = torch._dynamo.explain(with_cond)(h)
    row["cond_graphs"], row["cond_breaks"] = explained.graph_count, explained.graph_break_count
    return row


if __name__ == "__main__":
    raise SystemExit(main())
