"""GM6xx: Python that Dynamo does not trace (deepcopy, generators, requires_grad mutation,
NumPy on tensors, skipped or disabled functions)."""

from __future__ import annotations

import ast

from rewrites.file_index import DISABLE_NAMES
from rewrites.rules._util import snippet
from rewrites.rules.base import Rule
from rewrites.rules.gm3_host_scalars import numpy_conversion
from rewrites.tensors import LIMITS, TENSORISH

GM601 = Rule(
    code="GM601", name="deepcopy", category="unsupported-python",
    summary="`copy.deepcopy(...)` inside a compiled region.",
    why="Dynamo does not trace `copy.deepcopy` of tensors or modules (`copy.deepcopy()`): the graph breaks.",
    fix="Use `t.clone()` for tensors; copy modules outside the compiled region.",
    preconditions="Advice only (automatic only for a tensor argument: `.clone()`).",
    limits="`copy.deepcopy` and `from copy import deepcopy` aliases.",
    gb_ids=("GB0179", "GB4198"),
    gb_types=("copy.deepcopy()", "Attempted to copy.deepcopy a tensor"),
    message_patterns=(r"deepcopy",),
    source_patterns=(r"deepcopy\(",),
    advice="build the copy outside the compiled region, or t.clone() for a plain tensor",
    message="`copy.deepcopy` is not traceable", hint="t.clone() for tensors",
    valid=("import torch\n\ndef f(x: torch.Tensor):\n    return x.clone()\n",),
    invalid=("import copy\n\ndef f(x):\n    return copy.deepcopy(x)\n",
             "from copy import deepcopy\n\ndef f(x):\n    return deepcopy(x)\n"),
)

GM602 = Rule(
    code="GM602", name="generator", category="unsupported-python",
    summary="A generator in a compiled region: `yield` in a compiled function, or a generator expression passed to a non-builtin callable.",
    why=("Dynamo inlines generator expressions consumed by builtins (`tuple`, `sum`, `any`...) but breaks "
         "on generator objects that escape to other code (`Attempt to trace generator`)."),
    fix="Materialise the values first: pass a list comprehension (`f([g(x) for x in xs])`) instead of a generator.",
    preconditions="The generator is finite and has no side effects.",
    limits=("`yield` is reported only in functions that are compiled roots (a `forward` or a `torch.compile`d "
            "function), not in generator helpers."),
    gb_ids=("GB0003",),
    message_patterns=(r"generator",),
    advice="materialise the generator as a list before the compiled region",
    messages={"argument": "generator expression passed to `{callee}`",
              "yield": "`yield` makes the compiled function a generator"},
    hints={"argument": "pass a list comprehension", "yield": "return a list or tuple"},
    valid=("def f(xs):\n    return sum(x * 2 for x in xs), tuple(x for x in xs), ''.join(str(x) for x in xs)\n",),
    invalid=("def f(xs, g):\n    return g(x * 2 for x in xs)\n",
             "import torch\n\n@torch.compile\ndef f(xs):\n    for x in xs:\n        yield x\n"),
)

GM603 = Rule(
    code="GM603", name="requires-grad-mutation", category="unsupported-python",
    summary="Setting `requires_grad` (`t.requires_grad = ...`, `t.requires_grad_()`) inside a compiled region.",
    why="Autograd metadata changes cannot be recorded in the graph (`setattr() on Tensor.requires_grad`).",
    fix="Set `requires_grad` before calling the compiled function.",
    preconditions="Advice only.",
    limits="Attribute assignment and the `requires_grad_` method, on any receiver.",
    gb_ids=("GB0206", "GB0125"),
    gb_types=("Unsupported Tensor.requires_grad_() call", "setattr() on Tensor.requires_grad"),
    message_patterns=(r"requires_grad",),
    # torch 2.9 says only "STORE_ATTR-caused graph break"
    source_patterns=(r"\.requires_grad\s*=(?!=)", r"\.requires_grad_\("),
    advice="set requires_grad outside the compiled function",
    messages={"method": "`{receiver}.requires_grad_()` mutates autograd state",
              "assign": "assigning `{target}` mutates autograd state"},
    hint="set requires_grad before the compiled call",
    valid=("import torch\n\ndef f(x: torch.Tensor):\n    return x.requires_grad\n",),
    invalid=("import torch\n\ndef f(x: torch.Tensor):\n    x.requires_grad_(True)\n    return x\n",
             "import torch\n\ndef f(x: torch.Tensor):\n    x.requires_grad = False\n    return x\n"),
)

GM604 = Rule(
    code="GM604", name="numpy-call-on-tensor", category="unsupported-python",
    summary="A NumPy function called with a tensor argument.",
    why=("NumPy calls on tensors are traced only when `torch._dynamo.config.trace_numpy` supports the "
         "function; otherwise the graph breaks (`attempted to trace numpy function`)."),
    fix=("Use the torch equivalent (`np.exp(t)` → `torch.exp(t)`; `np.interp` has none: `torch.searchsorted` "
         "finds the interval and `torch.lerp` interpolates in it). On Python numbers use Python: "
         "`np.lcm`/`np.gcd`/`np.sqrt` → `math.*`, and a one-argument `np.sum`/`np.prod`/`np.max`/`np.min` of "
         "a list → `sum`/`math.prod`/`max`/`min`. `mend fix` turns `np.interp(x, xp, fp)` into a call to "
         "`_mend_interp`, a helper defined once in the file: eager code calls `np.interp` itself; compiled "
         "code runs NumPy's interpolation loop (the interval by `searchsorted`, float64, NumPy's rules at "
         "the points, the ends and NaN) in NumPy operations Dynamo traces."),
    preconditions=("A torch function with the same semantics exists (advice). `mend fix` rewrites the "
                   "Python-number calls on the lines torch names: the source of a branch's value in its "
                   "explanation (Reformer's `np.lcm`), or a break that is itself the NumPy call (BigBird's "
                   "`np.zeros((n, np.sum(plan[:k])))`, a NumPy value read back as a size); verification "
                   "rejects it where the argument was an array after all. It rewrites `np.interp` with three "
                   "positional arguments where the break is the call itself (the diffusers schedulers' "
                   "`set_timesteps`); under torch.compile a scalar `x` then gives a 0-d array (Dynamo's rule "
                   "for every NumPy result), complex `fp` or a single point still calls `np.interp`, and a "
                   "descending `xp` (NumPy's values are then its search's) is rejected by verification."),
    limits=("An argument must be provably a tensor, or a tensor's `.numpy()` (Dynamo traces that as a "
            "tensor and breaks on the NumPy function); or a NumPy call in the size of a NumPy factory "
            "(`np.zeros((n, np.sum(plan[:k])))`: the NumPy value is a tensor to Dynamo, read back as a size). "
            + LIMITS),
    gb_ids=("GB0293", "GB0294"),
    gb_types=(
        "attempted to trace numpy function with config.trace_numpy=False",
        "attempted to trace numpy function unsupported by PyTorch",
        "attempted to trace numpy.* function as a method",
    ),
    message_patterns=(r"numpy",),
    advice="use the torch equivalent of the numpy call",
    messages={"tensor": "NumPy `{module}.{func}` on a tensor",
              "size": "`{call}` is traced as a tensor and read back as the size of `{module}.{func}`"},
    # a tensor argument's hint is the torch function for that NumPy one (numpy_hint: its table)
    hints={"tensor": "{instead}", "size": "compute the size with Python (sum / math.prod / max over a list)"},
    valid=("import numpy as np\n\ndef f(n: int):\n    return np.arange(n)\n",
           "import numpy as np\n\ndef f(plan):\n    return np.zeros((3, len(plan))), np.ones(sum(plan))\n"),
    invalid=("import numpy as np\nimport torch\n\ndef f(x: torch.Tensor):\n    return np.exp(x)\n",
             "import numpy as np\nimport torch\n\ndef f(x: torch.Tensor, xp, fp):\n    return np.interp(x.detach().numpy(), xp, fp)\n",
             "import numpy as np\n\ndef f(plan, k):\n    return np.zeros((4, np.sum(plan[:k])), dtype=np.int32)\n"),
)

GM605 = Rule(
    code="GM605", name="non-traceable-call", category="unsupported-python",
    summary=("A call Dynamo will not trace: `torch._dynamo.graph_break()`, `breakpoint()`, `pdb.set_trace()`, "
             "`torch.jit.isinstance`, a function marked `torch.compiler.disable`, or a skipped host call "
             "(`time.perf_counter()`, `time.time()`, `random.random()`, `os.getpid()`, `torch.manual_seed()`...)."),
    why="Dynamo skips these functions on purpose (`Skip calling torch.compiler.disable()d function`): the graph ends at the call.",
    fix=("Remove the debugging call, or drop `disable` from the function once its body traces. Read clocks, "
         "randomness and process state outside the compiled region, or only in eager runs: "
         "`if not torch.compiler.is_compiling(): t0 = time.perf_counter()`. What `mend fix` does: "
         "`torch.jit.isinstance(x, T)` with `T` a plain class or a tuple of them becomes `isinstance(x, T)`, "
         "the test `torch.jit.isinstance` itself ends in, which Dynamo decides while tracing."),
    preconditions=("Only `torch.jit.isinstance` is rewritten, and only with a plain class (not a typing generic "
                   "such as `List[int]`, whose elements it checks, nor a bare typing name); the rest is advice."),
    limits=("`disable`d functions are recognised by their decorator in the same file (functions and methods of "
            "the same class). Host calls: the ones checked to break on torch 2.13 (`SKIPPED_HOST_CALLS`: the "
            "`time` clocks and `sleep`, `timeit.default_timer`, `datetime.now`, `random.random`/`choice`/"
            "`shuffle`..., `os.getpid`/`getcwd`/`path.exists`, `gc.collect`, `uuid.uuid4`, the RNG-state and "
            "CUDA memory-statistics functions of torch); `os.getenv`, `random.randint` and `torch.seed` trace "
            "and are not flagged."),
    gb_ids=("GB0098", "GB0025", "GB0007"),
    gb_types=(
        "Attempted to call function marked as skipped",
        "Attempted to inline function marked as skipped",
        "Attempted to inline function marked as skipped (SkipFunctionVariable)",
        "Skip calling `torch.compiler.disable()`d function",
        "Skip inlining `torch.compiler.disable()`d function",
        "Call to `torch._dynamo.skip_frame()`",
    ),
    message_patterns=(
        r"marked as skipped|compiler\.disable|_dynamo\.disable|disable\(\)d|skip_frame|not allowed to trace|SkipFunctionVariable",
    ),
    advice=("the callee is skipped or not traceable: torch.compiler.allow_in_graph, or a custom op "
            "(torch.library.custom_op)"),
    messages={"disable_call": "calling a `disable`d function skips tracing",
              "breakpoint": "`breakpoint()` stops tracing",
              "debug": "`{qualname}()` ends the graph",
              "host": "`{qualname}()` is skipped by Dynamo: the graph breaks at the call",
              "disabled": "`{name}` is marked torch.compiler.disable: the graph breaks at the call",
              "disabled_method": "`self.{name}` is marked torch.compiler.disable: the graph breaks at the call"},
    hints={"disable_call": "drop disable or move the call out", "breakpoint": "remove the debugging call",
           "debug": "remove the call",
           "host": "read it outside the compiled region, or under `if not torch.compiler.is_compiling():`",
           "disabled": "drop disable once the function traces",
           "disabled_method": "drop disable once the function traces"},
    valid=("import torch\n\ndef f(x: torch.Tensor):\n    return torch.relu(x)\n",
           "import os\nimport random\n\ndef f(x):\n    return x * random.randint(1, 3), os.getenv('HOME')\n",
           "import time\nimport torch\n\ndef f(x):\n    if not torch.compiler.is_compiling():\n"
           "        t0 = time.perf_counter()\n    return x.sin()\n",
           "def time():\n    return 0\n\ndef f(x):\n    return x + time()\n"),
    invalid=("import torch\n\n@torch.compiler.disable\ndef helper(x):\n    return x\n\ndef f(x):\n    return helper(x)\n",
             "import torch\n\ndef f(x):\n    torch._dynamo.graph_break()\n    return x\n",
             "import time\nimport torch\n\ndef f(x):\n    t0 = time.perf_counter()\n    return x.sin(), t0\n",
             "from time import time as now\n\ndef f(x):\n    return x * 2, now()\n",
             "from datetime import datetime\n\ndef f(x):\n    return x + 1, datetime.now()\n"),
)

GM606 = Rule(
    code="GM606", name="buffer-reassigned", category="unsupported-python",
    summary="A module attribute registered as `nn.Buffer` is assigned again inside a compiled region (`self.buf = self.buf.to(...)`).",
    why=("Assigning a tensor to a buffer goes through `nn.Module.__setattr__`, whose "
         "`isinstance(value, nn.Buffer)` check Dynamo cannot trace for a module that registered the buffer "
         "as `nn.Buffer` (`Unsupported python_type() call`); other attribute writes are replayed after the "
         "graph. The frame around it may be skipped too. Only while the buffer keeps `nn.Buffer`'s mark: "
         "`Module._apply` (`model.to(\"cuda\")`, `model.half()`) replaces it by a plain tensor, after "
         "which the assignment does not break."),
    fix=("`mend fix` runs the conversion only when it changes the buffer: "
         "`if self.buf.device != device or self.buf.dtype != x.dtype:` above the assignment. When "
         "nothing differs, `.to` returns the buffer itself and the assignment re-binds what was there, so "
         "skipping it changes nothing; Dynamo reads the condition from the tensor's metadata (a guard) and "
         "the graph goes on. Or convert the module once, outside the compiled region "
         "(`model.to(device, dtype)`), and drop the assignment."),
    preconditions=("The guard: `to` with dtype/device arguments that are names or attributes (whose names "
                   "end in `dtype` / `device`, or `dtype=` / `device=` keywords), or `float`/`half`/"
                   "`bfloat16`/`double`/`cpu` without arguments, of the attribute itself. Anything else (a "
                   "chain such as `.float().contiguous()`, `.to(other_tensor)`, `.detach()`): "
                   "`mend fix --unsafe-fixes` keeps the converted value in a local instead. Unsafe: the "
                   "buffer is no longer re-bound, so where the conversion changes the tensor it runs on "
                   "every call instead of once, and code outside the function keeps seeing the old buffer; "
                   "only as a statement of the function body (not in a loop, branch, `with` or `try`), and "
                   "refused when the attribute is written or deleted again in the function, or read after "
                   "it by a nested function, by a method of the class called on `self`, or by code `self` "
                   "is passed to."),
    limits=("The buffer must be created as `self.x = nn.Buffer(...)` in an `__init__`-like method of the "
            "class or of a base class in the same file; a buffer registered elsewhere is found from "
            "Dynamo's break at that line (the guard needs the class to say it is a tensor: "
            "`nn.Buffer` or `register_buffer`). A device given as a string (`\"cuda\"`) never compares "
            "equal to a tensor's device, so the guarded conversion still runs (and breaks) there."),
    gb_ids=("GB4841",),
    advice=("convert the module once, outside the compiled region (model.to(device, dtype)), and drop the "
            "assignment; or keep the converted value in a local: `buf = self.buf.to(...)`"),
    message="`self.{attr}` is an nn.Buffer: assigning it calls Module.__setattr__",
    hint="convert the module once outside, or keep a local `{attr} = ...`",
    valid=("import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.register_buffer('pe', torch.zeros(4))\n\n"
           "    def forward(self, x):\n        self.pe = self.pe.to(x.dtype)\n        return x + self.pe\n",),
    invalid=("import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
             "        super().__init__()\n        self.pe = nn.Buffer(torch.zeros(4), persistent=False)\n\n"
             "    def forward(self, x):\n        self.pe = self.pe.to(x.dtype)\n        return x + self.pe\n",),
)

GM607 = Rule(
    code="GM607", name="parameter-constructed", category="unsupported-python",
    summary=("An `nn.Parameter` is made inside a compiled region: `nn.Parameter(...)` itself, or a submodule "
             "converted in `forward` (`self.classifier = self.classifier.to(self.dtype)`)."),
    why=("Dynamo does not trace the `nn.Parameter` constructor (`graph_break_on_nn_param_ctor`). "
         "`Module.to()` / `.half()` / `.float()` make one for each parameter they convert "
         "(`Module._apply`); torch 2.11 does so under Dynamo even when nothing changes (Switch "
         "Transformers' and NLLB-MoE's routers: a break on every call), torch 2.13 and 2.15 only when the dtype or "
         "device really changes."),
    fix=("Create parameters in `__init__`. For a conversion, `mend fix` runs it only when it changes "
         "something: `if any(t.dtype != self.dtype for t in (*self.classifier.parameters(), "
         "*self.classifier.buffers())):` above it. When every parameter and buffer already has the target "
         "dtype and device, `Module.to` returns the module as it was, so skipping it changes nothing; "
         "Dynamo reads the condition from the tensors' metadata and the graph goes on. Or convert the model "
         "once, outside the compiled region."),
    preconditions=("The guard: a conversion of `self.<attr>` (assigned back or a bare statement) where the "
                   "class, or a base in the same file, creates the attribute as a `torch.nn` module "
                   "(`nn.Linear(...)`: torch's own `to`), with dtype/device arguments that are names or "
                   "attributes (names ending in `dtype` / `device`, `dtype=` / `device=`, a torch dtype), "
                   "or `float`/`half`/`bfloat16`/`double`/`cpu` without arguments; planned at the line "
                   "Dynamo broke at (whether it breaks depends on the torch version)."),
    limits=("The conversion is found from Dynamo's break at its line, never from the source alone. A "
            "module holding an integer buffer (BatchNorm's counter) reads as \"changes\" under a dtype "
            "conversion, so the guarded conversion still runs there. A direct `nn.Parameter(...)` gets "
            "advice only."),
    gb_ids=("GB0264",),
    gb_types=("Attempted to use `torch.nn.Parameter()` constructor with Dynamo",),
    message_patterns=(r"torch\.nn\.Parameter\(\)` constructor",),
    # torch 2.9 breaks earlier, in `Module.to`'s own argument parsing ("torch.* op returned non-Tensor")
    source_patterns=(r"\b_parse_to\(",),
    advice=("create the parameter in __init__, or convert the module once, outside the compiled region "
            "(model.to(dtype)); a conversion in forward can run only when something differs: "
            "`if any(t.dtype != dtype for t in module.parameters()): module.to(dtype)`"),
    message="`nn.Parameter(...)` is not traceable: the graph breaks here", hint="create the parameter in __init__",
    valid=("import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.w = nn.Parameter(torch.zeros(4))\n"
           "        self.lin = nn.Linear(4, 4)\n\n"
           "    def forward(self, x):\n        self.lin = self.lin.to(x.dtype)\n        return self.lin(x) + self.w\n",),
    invalid=("import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
             "    def forward(self, x):\n        self.w = nn.Parameter(torch.zeros(4))\n        return x + self.w\n",
             "import torch\n\ndef f(x):\n    w = torch.nn.Parameter(x.clone())\n    return w * 2\n"),
)

GM608 = Rule(
    code="GM608", name="inductor-cannot-lower", category="unsupported-python",
    breaks_in="Inductor",
    summary=("A graph Dynamo captured whole that Inductor cannot compile: `torch.compile` raises there "
             "(`InductorError: LoweringException: ...`) though no graph break is reported."),
    why=("Dynamo only traces; Inductor then lowers every op of the graph to its IR and generates C++ (CPU) "
         "or Triton (CUDA) kernels. An op with no lowering, a lowering that rejects its inputs (torch 2.13's "
         "`torch._weight_int8pack_mm` when its scales are computed in the graph: `AssertionError: "
         "<class 'torch._inductor.ir.Pointwise'>`), or code that does not build fails the whole compile. "
         "Found by `mend analyze --lower` (and `mend bench`): each captured graph compiled by Inductor for "
         "the CPU, the op it failed on, the user's line that called it and the reason reported."),
    fix=("Compute the op's inputs outside the compiled region or keep them as module buffers (precompute "
         "`absmax / 127` once), call the op through a `torch.library.custom_op` (Inductor calls it as an "
         "opaque kernel), or leave that function eager with `@torch.compiler.disable`; report the op to "
         "PyTorch when it should lower."),
    preconditions="No automatic fix: what Inductor accepts depends on the op and the torch version.",
    limits=("Checked on the CPU only (`--lower`): a Triton-only failure on CUDA is not seen; the forward's "
            "graphs, each as Dynamo handed it over."),
    static=False,
    advice=("precompute the op's inputs outside the compiled region (or as buffers), wrap the op in a "
            "torch.library.custom_op, or keep the function eager with @torch.compiler.disable"),
)

GM609 = Rule(
    code="GM609", name="recurrent-module", category="unsupported-python",
    summary="An `nn.RNN`, `nn.GRU` or `nn.LSTM` called inside a compiled region.",
    why=("Dynamo does not trace the recurrent modules while `torch._dynamo.config.allow_rnn` is off (the "
         "default): the call runs in eager between two graphs, and where Dynamo cannot resume after it "
         "(inside a loop, in a `with` block) the whole function runs in eager."),
    fix=("Set `torch._dynamo.config.allow_rnn = True` before compiling (Dynamo's own hint; experimental: on "
         "torch 2.13's CPU build Inductor fails on an `nn.LSTM` whose output needs a gradient, in "
         "`mkldnn_rnn_layer`, where `nn.GRU` and `nn.RNN` compile and match eager), then check the program "
         "with `mend analyze --lower` or `mend bench`; or call the recurrent module outside the compiled "
         "region."),
    preconditions="No automatic fix: the setting is the process's, not a line of the user's source.",
    gb_ids=("GB0014",), gb_types=("Attempted to wrap RNN, GRU, or LSTM",),
    # inside a loop (torch 2.13, torchaudio's DeepSpeech and WaveRNN): "Encountered graph break that we
    # cannot resume from ... Graph break encountered: Attempted to wrap RNN, GRU, or LSTM"
    message_patterns=(r"Attempted to wrap RNN, GRU, or LSTM",),
    static=False,
    advice=("set torch._dynamo.config.allow_rnn = True before compiling (experimental), or call the "
            "recurrent module outside the compiled region"),
)

# the builtin iterators Dynamo steps only when the traced code made them
_ITERATORS = r"(?:\w*iterator|enumerate|zip|map|filter|reversed)"

GM610 = Rule(
    code="GM610", name="iterator-from-eager", category="unsupported-python",
    summary=("`next()` on a builtin iterator made outside the frame Dynamo compiles: most often a list, dict "
             "or set comprehension Dynamo compiled as a frame of its own."),
    why=("Dynamo steps an iterator (`dict_keyiterator`, `list_iterator`, `enumerate`, `zip`, ...) only when "
         "the code it traces made it. On Python 3.11 and older a comprehension is a function of its own, "
         "which Dynamo inlines while it traces the function around it; it compiles the comprehension alone "
         "only when that function runs in eager (Dynamo skipped its frame, or another graph break made the "
         "call into it run in eager), and the comprehension's argument is then an iterator made in eager. "
         "The same happens to an iterator passed into a compiled function, or live across a graph break. "
         "The comprehension's break is a consequence of the other one: traced with the function around "
         "it, it would not break."),
    fix=("Fix the break that made the function around the comprehension run in eager (mend reports it for "
         "the same call); Dynamo then inlines the comprehension and this break goes with it. Python 3.12 "
         "inlines comprehensions (PEP 709) and never compiles one alone. Otherwise, as Dynamo's hint says: "
         "a loop instead of the comprehension, or the comprehension wrapped in a function."),
    preconditions="No automatic fix: the cause is the break that made the function around it run in eager.",
    gb_ids=("GB4347", "GB0156"),
    # torch 2.13: "Missing tp_iternext: Dynamo does not support next() on dict_keyiterator"; 2.9 and
    # 2.11: "Unsupported method call: ... method `__next__` of class `dict_keyiterator`" (both recorded);
    # 2.15, as its source words it: "C-implemented special method without VariableTracker model:
    # 'dict_keyiterator' implements '__next__' in C"
    message_patterns=(rf"does not support next\(\) on {_ITERATORS}\b",
                      rf"method `__next__` of class `{_ITERATORS}`",
                      rf"'{_ITERATORS}' implements '__next__' in C"),
    static=False,
    advice="fix the break that makes the function around the comprehension run in eager; this one goes with it",
)

RULES = (GM601, GM602, GM603, GM604, GM605, GM606, GM607, GM608, GM609, GM610)
NAMES_BREAKS = 5

_GEN_OK = frozenset({"tuple", "list", "set", "frozenset", "dict", "sum", "any", "all", "max", "min", "sorted",
                     "enumerate", "zip", "map", "filter", "reversed", "iter", "next", "join", "extend", "update",
                     "cat", "stack", "Size", "len", "str", "OrderedDict", "Counter", "deque"})
_SKIPPED = frozenset({"torch._dynamo.graph_break", "pdb.set_trace", "ipdb.set_trace", "torch._dynamo.skip_frame"})
# Host calls Dynamo skips (C functions with no trace rule: `Attempted to call function marked as
# skipped`), each checked on torch 2.13 by a break right after a traced op; they read clocks,
# randomness or the process and so cannot be constants of a graph. Not here because they trace:
# os.getenv / os.environ, os.path.join, random.randint / uniform / randrange, torch.seed,
# np.random.seed, record_function as a `with`. torch.cuda.synchronize / Event are unchecked
# (no GPU).
SKIPPED_HOST_CALLS = frozenset({
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.time_ns", "time.monotonic",
    "time.monotonic_ns", "time.process_time", "time.process_time_ns", "time.thread_time",
    "time.thread_time_ns", "time.sleep", "time.localtime", "time.gmtime", "time.strftime", "time.ctime",
    "time.asctime", "timeit.default_timer",
    "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today", "datetime.date.today",
    "random.random", "random.gauss", "random.choice", "random.shuffle", "random.sample", "random.seed",
    "random.getrandbits", "random.getstate",
    "os.getpid", "os.getcwd", "os.urandom", "os.listdir", "os.path.exists", "os.path.isfile",
    "gc.collect", "threading.get_ident", "inspect.stack", "inspect.currentframe", "sys._getframe",
    "sys.getsizeof", "traceback.format_stack", "traceback.print_stack", "socket.gethostname",
    "uuid.uuid1", "uuid.uuid4",
    "torch.manual_seed", "torch.random.manual_seed", "torch.get_rng_state", "torch.set_rng_state",
    "torch.initial_seed", "torch.cuda.memory_allocated", "torch.cuda.max_memory_allocated",
    "torch.cuda.memory_reserved",
})
_HOST_CALL_LAST = frozenset(n.rsplit(".", 1)[-1] for n in SKIPPED_HOST_CALLS)


# GM604's hint: the torch function for a NumPy one. Same-named ones where torch's does what
# NumPy's does (a torch function of the same name is not always that: torch.split takes
# sizes, torch.median returns the lower middle value); the others by name or recipe. A name in
# neither gets no torch name: a hint must never name an API torch does not have (np.interp).
# tests/rewrites/test_rules_catalog.py resolves every torch name these give on the installed torch.
TORCH_SAME_NAME = frozenset("""
abs absolute acos acosh add all allclose amax amin angle any arange arccos arccosh arcsin arcsinh arctan
arctan2 arctanh argmax argmin argsort argwhere asarray asin asinh atan atan2 atanh atleast_1d atleast_2d
atleast_3d bincount bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor
broadcast_shapes broadcast_to ceil clip column_stack concat concatenate conj copysign corrcoef cos cosh
count_nonzero cov cross cumprod cumsum deg2rad diag diagflat diagonal diff divide dsplit dstack einsum empty
empty_like equal exp exp2 expm1 eye fix flip fliplr flipud float_power floor floor_divide fmax fmin fmod frexp
full full_like gcd gradient greater greater_equal heaviside histogram histogramdd hsplit hstack hypot i0 imag
inner isclose isfinite isin isinf isnan isneginf isposinf isreal kron lcm ldexp less less_equal linspace log
log10 log1p log2 logaddexp logaddexp2 logical_and logical_not logical_or logical_xor logspace matmul maximum
mean meshgrid minimum moveaxis multiply nan_to_num nanmean nanquantile nansum negative nextafter nonzero
not_equal ones ones_like outer positive pow prod quantile rad2deg ravel real reciprocal remainder reshape roll
rot90 round row_stack searchsorted sign signbit sin sinc sinh sort sqrt square squeeze stack subtract sum
swapaxes tan tanh tensordot tile trace trapezoid tril tril_indices triu triu_indices true_divide trunc unique
unravel_index vander vdot vsplit vstack where zeros zeros_like
""".split())
TORCH_FOR_NUMPY = {
    "interp": "torch.searchsorted(xp, x) for the interval, then torch.lerp(fp[i - 1], fp[i], w) (torch has no interp)",
    "percentile": "torch.quantile(x, q / 100)",
    "nanpercentile": "torch.nanquantile(x, q / 100)",
    "median": "torch.quantile(x, 0.5) (torch.median returns the lower of the two middle values)",
    "nanmedian": "torch.nanquantile(x, 0.5)",
    "std": "torch.std(x, correction=0) (NumPy's default ddof=0)",
    "var": "torch.var(x, correction=0) (NumPy's default ddof=0)",
    "max": "torch.amax (np.max with axis=)",
    "min": "torch.amin (np.min with axis=)",
    "power": "torch.pow",
    "mod": "torch.remainder",
    "rint": "torch.round",
    "around": "torch.round",
    "degrees": "torch.rad2deg",
    "radians": "torch.deg2rad",
    "conjugate": "torch.conj",
    "cbrt": "torch.sign(x) * torch.abs(x) ** (1 / 3)",
    "array": "torch.tensor",
    "copy": "torch.clone",
    "append": "torch.cat",
    "expand_dims": "torch.unsqueeze",
    "transpose": "torch.permute (np.transpose reverses the axes)",
    "split": "torch.tensor_split (torch.split takes chunk sizes, not sections)",
    "array_split": "torch.tensor_split",
    "dot": "torch.matmul (torch.dot is 1-D only)",
    "array_equal": "torch.equal",
    "take": "torch.take_along_dim or torch.index_select (np.take with axis=)",
    "take_along_axis": "torch.take_along_dim",
    "repeat": "torch.repeat_interleave",
    "ptp": "torch.amax(x) - torch.amin(x)",
    "average": "torch.mean, or (x * w).sum() / w.sum() for weights",
    "flatnonzero": "torch.flatten(x).nonzero()",
    "argpartition": "torch.topk",
    "partition": "torch.topk or torch.kthvalue",
    "pad": "torch.nn.functional.pad",
    "convolve": "torch.nn.functional.conv1d",
    "select": "nested torch.where",
    "nanmax": "torch.amax(torch.nan_to_num(x, nan=float('-inf')))",
    "nanmin": "torch.amin(torch.nan_to_num(x, nan=float('inf')))",
    "cumulative_sum": "torch.cumsum",
    "cumulative_prod": "torch.cumprod",
}


def numpy_hint(name: str) -> str:
    """What to write instead of ``np.<name>(tensor)``."""
    if name in TORCH_FOR_NUMPY:
        return TORCH_FOR_NUMPY[name]
    if name in TORCH_SAME_NAME:
        return f"torch.{name}"
    return f"a torch equivalent of np.{name}, or call it outside the compiled region"


def _check_call(node: ast.Call, ctx) -> None:
    f = node.func
    tf = type(f)
    name = f.attr if tf is ast.Attribute else f.id if tf is ast.Name else None
    if name is None:
        if tf is ast.Call and ctx.resolve(f.func) in DISABLE_NAMES:
            ctx.report("GM605", node, variant="disable_call")
        return
    if name == "Parameter" and ctx.resolve(f) in _PARAMETER_CTORS and not _init_like(ctx.qualname):
        ctx.report("GM607", node)
    elif name == "requires_grad_" and tf is ast.Attribute:
        ctx.report("GM603", node, variant="method", receiver=snippet(f.value, 30))
    elif name == "deepcopy":
        if ctx.resolve(f) == "copy.deepcopy":
            ctx.report("GM601", node)
    elif name == "breakpoint" and tf is ast.Name:
        ctx.report("GM605", node, variant="breakpoint")
    elif name in ("graph_break", "set_trace", "skip_frame"):
        qn = ctx.resolve(f)
        if qn in _SKIPPED:
            ctx.report("GM605", node, variant="debug", qualname=qn)
    elif (name in _HOST_CALL_LAST or (tf is ast.Name and name in ctx.fa.imports)) \
            and (qn := ctx.resolve(f)) in SKIPPED_HOST_CALLS:  # `from time import perf_counter as clock`
        ctx.report("GM605", node, variant="host", qualname=qn)
    else:
        disabled = ctx.fa.index.disabled
        if disabled:
            if tf is ast.Name and name in disabled:
                ctx.report("GM605", node, variant="disabled", name=name)
            elif tf is ast.Attribute and type(f.value) is ast.Name and f.value.id == "self" and ctx.cls is not None \
                    and f"{ctx.cls.name}.{name}" in disabled:
                ctx.report("GM605", node, variant="disabled_method", name=name)
    if tf is ast.Attribute and type(f.value) is ast.Name:
        root = ctx.fa.imports.get(f.value.id)
        if root == "numpy" and any(ctx.kind(a) in TENSORISH or numpy_conversion(a) for a in node.args):
            ctx.report("GM604", node, variant="tensor", module=f.value.id, func=name, instead=numpy_hint(name))
        elif root == "numpy" and name in _NUMPY_FACTORIES and node.args:
            inner = _numpy_size(node.args[0], ctx)
            if inner is not None:
                ctx.report("GM604", node, variant="size", call=snippet(inner, 40), module=f.value.id, func=name)
    if node.args and name not in _GEN_OK and (tf is ast.Name or ctx.resolve(f) is None or not ctx.resolve(f).startswith("torch.")):
        for a in node.args:
            if type(a) is ast.GeneratorExp:
                if tf is ast.Name and name in ("print",):
                    break
                ctx.report("GM602", a, variant="argument", callee=name)
                break


_PARAMETER_CTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_NUMPY_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "arange", "eye", "identity"})


def _numpy_size(arg: ast.AST, ctx):
    """The NumPy call inside a factory's size (``np.zeros((n, np.sum(plan[:k])))``): Dynamo traces
    it as a tensor op, so the size is data-dependent (torch 2.13: `Data dependent operator`)."""
    for e in (arg.elts if type(arg) in (ast.Tuple, ast.List) else (arg,)):
        if type(e) is ast.Call and type(e.func) is ast.Attribute and type(e.func.value) is ast.Name \
                and ctx.fa.imports.get(e.func.value.id) == "numpy":
            return e
    return None


def _check_assign(node: ast.Assign, ctx) -> None:
    for t in node.targets:
        if type(t) is ast.Attribute and t.attr == "requires_grad":
            ctx.report("GM603", t, variant="assign", target=snippet(t, 40))
        elif type(t) is ast.Attribute and type(t.value) is ast.Name and t.value.id == "self" \
                and ctx.cls is not None and t.attr in ctx.cls.buffers and not _init_like(ctx.qualname) \
                and not any(_reads_metadata(test, t.attr) for test in ctx.if_tests):
            ctx.report("GM606", t, attr=t.attr)


def _reads_metadata(test: ast.expr, attr: str) -> bool:
    """``test`` reads ``self.<attr>.dtype`` / ``.device``: the re-bind runs only when the conversion
    changes the buffer (the guard mend fix writes), and a converted tensor carries no
    ``nn.Buffer`` mark, so the assignment does not break."""
    return any(type(n) is ast.Attribute and n.attr in ("dtype", "device") and type(n.value) is ast.Attribute
               and n.value.attr == attr and type(n.value.value) is ast.Name and n.value.value.id == "self"
               for n in ast.walk(test))


def _init_like(qualname: str) -> bool:
    # where attributes are set up; the analyzer reads buffers from the same methods
    name = qualname.rsplit(".", 1)[-1]
    return "init" in name or "build" in name or name == "setup"


def _check_yield(node: ast.AST, ctx) -> None:
    ctx.report("GM602", node, variant="yield", needs_root=True)


HOOKS = {ast.Call: (_check_call,), ast.Assign: (_check_assign,), ast.Yield: (_check_yield,),
         ast.YieldFrom: (_check_yield,)}
