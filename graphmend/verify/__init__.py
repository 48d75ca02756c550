"""Verification of fixes: no fix is offered as safe without it (DESIGN.md, "Verification").

* ``arms``    -- instruments the ORIGINAL source so each rewritten condition records which
                 way it went (evaluating the condition, same line numbers);
* ``inputs``  -- the example inputs and perturbed ones (negated, x10, x0.1, zeros, random);
* ``compare`` -- outputs (nested tuples/lists/dicts/dataclasses/ModelOutput of tensors)
                 compared with per-dtype tolerances;
* ``worker``  -- ``python -m graphmend.verify.worker``: one side of the differential run
                 (original, or patched through ``graphmend.overlay``) plus the re-trace;
* ``run``     -- the parent side: ``verify_target(...) -> Verdict``.

Torch is imported only inside workers and inside functions that need it.
"""
