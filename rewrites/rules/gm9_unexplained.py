"""GM9xx: dynamic breaks no static rule explains. Documented here, reported by the tracer
with Dynamo's own words (reason, explanation, hints, gb_type)."""

from __future__ import annotations

from rewrites.rules.base import Rule

GM900 = Rule(
    code="GM900", name="unexplained-graph-break", category="unexplained",
    summary="A graph break Dynamo reported that matches no static rule.",
    why="Reported with Dynamo's reason, explanation and hints; the registry id links to PyTorch's page for that break type.",
    fix="Read Dynamo's hints; `TORCH_LOGS=graph_breaks` shows the full stack.",
    preconditions="No automatic fix.", static=False,
    advice="see Dynamo's explanation and hints in the report",
)

GM901 = Rule(
    code="GM901", name="unexplained-frame-skip", category="unexplained",
    summary="Dynamo skipped a whole frame (e.g. a break inside a loop) for a reason no static rule explains.",
    why=("A break Dynamo cannot resume from (inside a loop, in a `with` block it cannot reconstruct) makes it "
         "run the whole function eagerly; `torch._dynamo.explain` does not count it."),
    fix="Find the break inside the frame (often reported separately) and fix it; the frame then compiles.",
    preconditions="No automatic fix.", gb_ids=("GB7000",), static=False,
    advice="see Dynamo's explanation: the whole frame was skipped",
)

RULES = (GM900, GM901)
HOOKS: dict = {}
