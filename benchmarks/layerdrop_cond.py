"""Can M2M-100's LayerDrop (``if torch.rand([]) < self.layerdrop: skip the layer``, a graph
break in every training step) become a ``torch.cond`` on the installed torch? The probe
behind the train-mode rewrite still missing (docs/real-models.md): a tiny M2M-100 encoder in
train mode, its layer loop as transformers writes it and as a ``torch.cond`` per layer
(skip: the hidden states; else the layer), each run eagerly from one seed (same outputs and RNG
state after the call) and compiled (graphs, and whether ``fullgraph=True`` compiles
and runs a backward)::

    python benchmarks/layerdrop_cond.py
"""

from __future__ import annotations

import json


def main() -> int:
    import torch
    import transformers as T

    cfg = T.M2M100Config(vocab_size=100, d_model=16, encoder_layers=4, decoder_layers=2, encoder_attention_heads=2,
                         decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, encoder_layerdrop=0.5)
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
    row: dict = {"torch": torch.__version__}
    same = []
    for seed in range(8):
        torch.manual_seed(seed)
        a, state_a = original(h), torch.get_rng_state()
        torch.manual_seed(seed)
        b, state_b = with_cond(h), torch.get_rng_state()
        same.append(torch.equal(a, b) and torch.equal(state_a, state_b))
    row["eager_equal_over_8_seeds"] = all(same)
    for name, fn in (("original", original), ("cond", with_cond)):
        torch._dynamo.reset()
        explained = torch._dynamo.explain(fn)(h)
        row[f"{name}_graphs"], row[f"{name}_breaks"] = explained.graph_count, explained.graph_break_count
    try:
        x = h.clone().requires_grad_()
        torch.compile(with_cond, fullgraph=True)(x).sum().backward()
        row["cond_fullgraph_backward"] = bool(x.grad is not None)
    except Exception as e:  # noqa: BLE001 (the probe's answer)
        row["cond_fullgraph_backward"] = f"{type(e).__name__}: {str(e)[:300]}"
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
