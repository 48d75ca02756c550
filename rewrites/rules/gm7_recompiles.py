"""GM7xx: recompiles. Not graph breaks: Dynamo compiled a function again because a guard of
its cached graph failed on a later call. Reported by the tracer (``mend analyze --calls``),
each recompile classified by the failed guard in Dynamo's words (``guard_patterns``, tried
in code order) and placed at the line whose value the guard holds."""

from __future__ import annotations

from rewrites.rules.base import Rule

GM701 = Rule(
    code="GM701", name="size-specialised", category="recompile",
    summary="A tensor size (or its number of dimensions) the compiled graph was specialised on changed: the "
            "function recompiled.",
    why=("Dynamo guards on the sizes a graph was traced with. The first change of a size makes it dynamic "
         "(automatic dynamic shapes: one recompile, expected and not reported); a size that recompiles again "
         "was kept static (automatic dynamic off, `mark_static`), is 0 or 1 (always specialised), or fed Python "
         "control flow or a Python int (`if x.shape[1] > 4:`, `2 <= x.size()[1] <= 4`), which bounds it."),
    fix=("Mark the dimension dynamic before the first call (`torch._dynamo.maybe_mark_dynamic(x, 1)`; "
         "`mark_dynamic` raises where the code specialises the size) or compile with `dynamic=True`; keep sizes out "
         "of Python control flow (compute on the tensor, or pad to fixed buckets). The issue names the dimension "
         "where the guard names a tensor of your code."),
    preconditions="No automatic fix.", static=False,
    guard_patterns=(r"size mismatch at index", r"rank mismatch", r"\.size\(\)\[", r"\.shape\[", r"stride mismatch",
                    r"\.stride\(\)",
                    r"storage_offset\(\)"),
    advice="torch._dynamo.maybe_mark_dynamic(x, dim) on the input, or torch.compile(..., dynamic=True)",
)

GM702 = Rule(
    code="GM702", name="python-value-specialised", category="recompile", settles=True,
    summary="A Python int or float (a module attribute bumped each step, a hyper-parameter, an argument) changed: "
            "the function recompiled.",
    why=("Dynamo treats Python numbers as constants of the graph and guards on their value "
         "(`self.step == 3`, `L['temperature'] == 0.5`, a tensor's value read with `.item()`): every new value "
         "compiles a new graph, until the recompile limit makes the frame run in eager."),
    fix=("Hold the value in a 0-d tensor the methods that change it use, and keep its name a Python number for "
         "every other reader with a property (what `mend fix` writes for an attribute of `self`), or pass it as "
         "a tensor; for int attributes of modules, `torch._dynamo.config.allow_unspec_int_on_nn_module = True` "
         "makes them dynamic."),
    preconditions=("With `--unsafe-fixes`, for an attribute of `self` bound once in `__init__` to a number literal "
                   "and re-bound by the class's methods, when every read in the methods rewritten stays arithmetic "
                   "(`min` / `max` included) until it meets a tensor and every update keeps its type; verified, "
                   "and the patched target must recompile less over the same calls; partially verified for its "
                   "caveat (see Limits). Arguments and hyper-parameters read as numbers: advice only."),
    limits=("Under CUDA graphs (`torch.compile(..., mode=\"reduce-overhead\")` on a GPU) the 0-d tensor a call "
            "stores is an output of the recorded graph, which the next call overwrites: that call raises "
            "(\"accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run\"; measured "
            "on an H100 with torch 2.11). Updating it in place instead would reach the original module through "
            "a DataParallel replica, which the number never did. No check on a CPU shows this, so the fix is "
            "planned only with `--unsafe-fixes`; there, keep `mode=\"default\"` or hold the counter outside the "
            "compiled module."),
    static=False,
    guard_patterns=(r"^(?!len\()[\w.\[\]'\"()]+ == -?[\d.e+-]+$", r"^(?!len\()[\w.\[\]'\"()]+ == -?(?:inf|nan)$",
                    r"^[\w.\[\]'\"()]+ (?:is|is not|==) (?:True|False)$", r"\.item\(\)"),
    advice="hold the value in a 0-d tensor (a property keeps its name a Python number for other readers), "
           "or pass it as a tensor",
)

GM703 = Rule(
    code="GM703", name="object-identity", category="recompile", settles=True,
    summary="Another object (a module attribute re-bound, a function or object passed in) stood where the graph "
            "was traced with one: the function recompiled.",
    why=("Dynamo guards on the identity or type of the objects it traced through (`___check_obj_id`, "
         "`___check_type_id`): re-binding `self.act = nn.GELU()` or passing another callable compiles a new graph. "
         "So does a tensor attribute that is `None` on some calls (`expected type of 'self.dt' to be a tensor "
         "type`: a sampler's state between its two stages; `'NoneType' object has no attribute 'size'` where "
         "the guard on the tensor fails on the `None` without naming it), and two arguments that are one tensor "
         "on some calls (`Duplicate tensors found`)."),
    fix=("Build the module once and keep its attributes; choose between alternatives inside the graph (both "
         "submodules held, selected by a flag set before compiling), or compile each variant once."),
    preconditions="No automatic fix.", static=False,
    guard_patterns=(r"___check_obj_id", r"___check_type_id", r" is not None$", r" is None$", r"\bid\(",
                    r"^expected type of '.+' to be a tensor type", r"^Duplicate tensors found",
                    r"^'NoneType' object has no attribute '(?:size|stride|dim|dtype|device|shape)'"),
    advice="keep the object the graph was traced with (bind module attributes once, in __init__)",
)

GM704 = Rule(
    code="GM704", name="container-length", category="recompile",
    summary="A list, tuple or dict passed in changed length: the function recompiled.",
    why="Dynamo unrolls Python containers and guards on their length (`len(L['xs']) == 2`, `not args`).",
    fix="Pass a stacked tensor instead of a list of tensors, or pad the container to a fixed length.",
    preconditions="No automatic fix.", static=False,
    guard_patterns=(r"^len\(", r"\blen\(.*\) ==", r"dict keys", r"^not [\w.\[\]'\"]+$"),
    advice="stack the items into one tensor (torch.stack) instead of passing a list of varying length",
)

GM705 = Rule(
    code="GM705", name="tensor-or-global-state", category="recompile", settles=True,
    summary="Grad mode, a tensor's requires_grad, dtype or device changed between calls: the function recompiled.",
    why=("Dynamo guards on global state (grad mode, autocast, default dtype) and on each input tensor's "
         "properties: a graph traced under `no_grad` or for float32 inputs does not serve a call with grad on or "
         "with float64 inputs."),
    fix=("Call the compiled function under one grad mode and with inputs of one dtype and device (cast before "
         "the call), or compile one function per setting."),
    preconditions="No automatic fix.", static=False,
    guard_patterns=(r"grad_mode", r"requires_grad", r"dtype mismatch", r"device mismatch", r"GLOBAL_STATE",
                    r"dispatch key set mismatch", r"autocast", r"default_dtype"),
    advice="call it under one grad mode, with inputs of one dtype and device",
)

GM706 = Rule(
    code="GM706", name="recompile-limit", category="recompile",
    summary="A function recompiled until Dynamo's recompile limit: it now runs in eager on every call.",
    why=("After `torch._dynamo.config.recompile_limit` compiled versions of one function (8 by default), Dynamo "
         "stops compiling it: the frame falls back to eager, every graph it held lost, as a skipped frame is. "
         "The guard that kept failing is the cause."),
    fix=("Remove the cause the last failed guard names (its own GM70x issue says how); raising the limit only "
         "delays it and compiles more graphs."),
    preconditions="No automatic fix.", static=False,
    advice="fix the guard that keeps failing; raising torch._dynamo.config.recompile_limit only delays it",
)

GM799 = Rule(
    code="GM799", name="unexplained-recompile", category="recompile",
    summary="A recompile whose failed guard matches no GM70x rule.",
    why="Reported with Dynamo's words for the guard that failed.",
    fix="Read the guard: it names the value that changed between calls; keep that value the same, or make it a tensor.",
    preconditions="No automatic fix.", static=False,
    advice="see the failed guard in the report: it names the value that changed",
)

RULES = (GM701, GM702, GM703, GM704, GM705, GM706, GM799)
HOOKS: dict = {}
