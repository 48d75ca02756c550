"""Verification of fixes: no fix is offered as safe without it (DESIGN.md, "Verification").

* ``arms``    -- instruments the ORIGINAL source so each rewritten condition records which
                 way it went (evaluating the condition, same line numbers);
* ``inputs``  -- the example inputs, ``Target.inputs`` and perturbed ones (sign, scale,
                 zeros, random, integer boundaries, masks, the conditions' constants), and
                 ``convert``: inputs and modules moved and cast (bf16 mode, the bench);
* ``modes``   -- one call in one mode (eval, train with backward, autocast, float64, bf16; on the
                 example hooks, double backward, torch.func, a replica, compiled) as a
                 record of what a user can observe, and the comparison of two records;
* ``compare`` -- outputs (nested tuples/lists/dicts/dataclasses/ModelOutput of tensors)
                 compared with per-dtype tolerances, NaN/inf-aware: the one comparator (the
                 bench's compiled arms against eager use it too);
* ``worker``  -- ``python -m graphmend.verify.worker``: one side of the differential run
                 (original, or patched through ``graphmend.core.overlay``) plus the re-trace;
* ``run``     -- the parent side: ``run_original(...)`` once per target, then
                 ``verify_target(original, patches, ...) -> Verdict`` per set of rewrites,
                 and what identifies a break across a patch (``break_key``, ``split_key``).

Torch is imported only inside workers and inside functions that need it.
"""

# What every automatic fix is held to, as the rule docs say it (``mend rules CODE``).
PROOF = (
    "Every automatic fix is verified before it is offered, original against patched in fresh workers "
    "on the same weights and seeds: the re-trace on the installed torch, over the capture's calls of "
    "other sizes, must show the break gone, no new break, no more graphs and no more recompiles (a fix "
    "made for a recompile: fewer; a fix that removes a break may add warm-up recompiles, no more than "
    "the graphs each call loses, each on a Python value, an object's identity or a mode, none at the "
    "recompile limit, and the calls made once more must compile nothing); then each input (the "
    "example, the target's own "
    "`Target(..., inputs=[...])`, and perturbed ones until every rewritten branch has gone both ways) "
    "runs in eval under `no_grad`, in train mode with a backward (outputs, input and parameter "
    "gradients NaN-aware, buffers and the RNG state after the call), under autocast and with the "
    "model cast to bfloat16, and the example once more as mixed-precision training runs it (the "
    "forward under autocast, the backward after it, gradients compared in the autocast dtype); the "
    "example also runs the other ways a user runs a module: with a hook on every submodule (which "
    "modules ran, in which order, how often, forward and backward), through a gradient penalty "
    "(double backward, in float64), under `torch.func.grad` and `torch.func.vmap`, on a DataParallel-style "
    "replica (gradients on the original's parameters), and patched under "
    "`torch.compile(backend=\"aot_eager\")` against the original in eager on two batch sizes, each "
    "custom op in its graphs run against its fake (shapes and strides, which Inductor asserts), or, where "
    "the original compiled differs from its eager self, against the original compiled; the "
    "caller's inputs after the call, exceptions (type and message), whether each output is or views "
    "an input or a module tensor, the state of the module's own generators, and the numbers and "
    "strings a user reads off each submodule (its attributes and its class's properties) are compared "
    "too. Any difference rejects the fix (`rejected`, with the first difference); a "
    "rewritten branch no input took leaves it `unverified`; neither is written by `--write`, and "
    "`mend fix` exits 1. A mode the original itself cannot run in (no parameters, raises in train "
    "mode, not deterministic, raises under vmap, differs from itself once compiled where the patched "
    "program compiled differs from both) is skipped and "
    "named in the fix's `skipped_checks`. Where the original raises that way (or has nothing to train) "
    "there is no behaviour to keep; where it runs but could not be compared (not deterministic, compiled "
    "differs from eager, no output requiring grad) the fix is "
    "`partially verified` (what the proof lacks in its `partial`), written only with `--accept-partial`. "
    "A fix whose family documents a caveat no check can show (`--unsafe-fixes` plans it) is partially "
    "verified too."
)

# the one skipped check that leaves no gap in the proof: a train check of a function with no
# parameters and no floating-point input, which has no gradient and no train mode to observe
NOTHING_TO_TRAIN = "no parameters and no floating-point input to take gradients of"
