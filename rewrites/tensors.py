"""A small, local notion of "this expression is a tensor value" (documented in every
control-flow rule, see ``LIMITS``).

Kinds an expression can have, inferred within one function, statement by statement:

* ``TENSOR``: results of ``torch.*`` / ``torch.nn.functional.*`` calls (minus the known
  non-tensor ones below), tensor methods on a tensor, tensor-only methods on anything
  (``.any()``, ``.abs()``, ``.sum()``...), calls of submodules (``self.proj(x)``,
  ``self.layers[i](x)``, ``for layer in self.layers: layer(x)``), parameters annotated
  ``Tensor`` / ``torch.FloatTensor`` / ``Optional[torch.Tensor]``, parameters with a
  tensor-ish name (``TENSOR_PARAM_NAMES``) in module methods and compiled functions,
  ``self.<attr>`` assigned ``nn.Parameter``/``torch.*``/``register_buffer`` in the class,
  arithmetic on tensors, and names assigned from any of these.
* ``BOOL``: a boolean tensor (comparisons on tensors, ``torch.isnan``..., ``~mask``).
* ``HOST``: a Python value read from tensor data (``.item()``, ``.tolist()``,
  ``torch.equal``, ``int(t)``, a list compared with ``==`` holding a tensor): branching on
  it is data-dependent too.
* ``META``: shape / metadata (``.shape``, ``.size()``, ``.dim()``, ``.ndim``, ``.dtype``,
  ``.device``, ``.numel()``, ``.requires_grad``, ``len()``): Dynamo guards on these, no break.
* ``MODULE``: an ``nn.Module`` (``self.proj`` assigned ``nn.Linear(...)``).
* ``OTHER``: everything else, including whatever is unknown: the inference errs towards
  "not a tensor" so that findings are precise rather than exhaustive.
"""

from __future__ import annotations

OTHER, TENSOR, BOOL, HOST, META, MODULE = 0, 1, 2, 3, 4, 5
TENSORISH = frozenset({TENSOR, BOOL})
DATA_DEPENDENT = frozenset({TENSOR, BOOL, HOST})

LIMITS = (
    "The tensor-ness inference is flow-ordered within a function: a name is a tensor from the "
    "statement that assigns it a tensor value. Across functions it reads the same file only: a "
    "function or method of the file whose every `return` is a tensor (element by element for a "
    "tuple), or that returns a NumPy value on some path (Dynamo traces NumPy as tensors), gives "
    "tensors where it is called; a parameter is a tensor when every call of its function in the "
    "file passes one. Values that become tensors through another file's helper, a container "
    "(dict/list element), an unannotated attribute, or a loop-carried assignment later in the "
    "loop body are not seen. Unknown values count as non-tensors, so the rule prefers missing a "
    "break to reporting a false one."
)

# Unannotated parameters with these names are tensors in nn.Module methods, `forward`s and
# compiled functions (nowhere else: `x` or `value` in plain helpers are often numbers).
TENSOR_PARAM_NAMES = frozenset({
    "x", "h", "hidden", "hidden_states", "hidden_state", "inputs_embeds", "input_tensor", "tensor",
    "q", "k", "v", "query", "key", "value", "query_states", "key_states", "value_states",
    "attn_weights", "attention_scores", "attention_probs", "pixel_values", "input_values",
    "input_ids", "attention_mask", "position_ids", "cache_position", "labels", "logits", "scores",
    "features", "feats", "embeddings", "mask",
})

META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout",
                        "is_sparse", "is_quantized", "is_meta", "is_leaf", "names", "itemsize",
                        "nbytes", "is_mps", "is_cpu", "is_nested"})
TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data", "grad"})
META_METHODS = frozenset({"size", "dim", "numel", "nelement", "ndimension", "stride", "is_contiguous",
                          "get_device", "element_size", "data_ptr", "is_floating_point", "is_complex",
                          "storage_offset", "is_pinned", "is_shared", "type", "untyped_storage",
                          "dim_order", "is_inference", "is_signed"})
HOST_METHODS = frozenset({"item", "tolist"})
NON_TENSOR_METHODS = frozenset({"numpy", "__len__", "register_hook", "backward", "storage",
                                "keys", "values", "items", "copy_", "get", "pop", "append"})
# Methods that exist (in practice) only on tensors: their result is a tensor whatever the receiver.
TENSOR_ONLY_METHODS = frozenset({
    "abs", "sum", "mean", "amax", "amin", "argmax", "argmin", "norm", "std", "var", "prod",
    "float", "half", "bfloat16", "double", "long", "int", "clamp", "clamp_min", "clamp_max",
    "sigmoid", "softmax", "log_softmax", "exp", "log", "sqrt", "rsqrt", "pow", "matmul", "bmm",
    "transpose", "permute", "contiguous", "detach", "squeeze", "unsqueeze", "masked_fill",
    "cumsum", "max", "min", "square", "tanh", "relu", "type_as", "new_zeros", "new_ones",
    "new_full", "new_empty", "new_tensor", "to", "cpu", "cuda", "flatten", "view", "reshape",
    "expand", "expand_as", "view_as", "reshape_as", "repeat", "narrow", "gather", "scatter",
    "index_select", "masked_select", "nonzero", "unique", "topk", "sort", "argsort", "diff",
})
BOOL_METHODS = frozenset({"any", "all", "isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge", "le",
                          "logical_and", "logical_or", "logical_not", "logical_xor", "bool",
                          "isneginf", "isposinf", "signbit", "isclose", "isin", "__eq__"})

# torch.<x> submodules whose calls do not return tensors (queries, context managers, config);
# documentation: any torch.<sub>.<f> outside TORCH_TENSOR_SUBMODULES already counts as OTHER.
TORCH_NON_TENSOR_SUBMODULES = frozenset({
    "jit", "compiler", "_dynamo", "cuda", "backends", "distributed", "utils", "fx", "onnx", "_C",
    "autograd", "testing", "_utils", "overrides", "library", "hub", "mps", "xpu", "version",
    "amp", "profiler", "export", "optim", "cpu", "accelerator", "_inductor", "multiprocessing",
    "package", "quantization", "ao", "_guards", "_logging", "types", "serialization",
})
TORCH_TENSOR_SUBMODULES = frozenset({"linalg", "fft", "special", "nested", "sparse", "masked", "ops"})
TORCH_HOST_FUNCS = frozenset({"equal", "allclose", "is_nonzero"})
TORCH_BOOL_FUNCS = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf", "signbit",
                              "logical_and", "logical_or", "logical_not", "logical_xor", "eq", "ne",
                              "gt", "lt", "ge", "le", "greater", "less", "isin", "isclose", "any", "all"})
# A call of one of these names gives a boolean tensor, whether written as a method
# (``m.any()``) or a torch function (``torch.isin(a, b)``): what the fixes read as a mask.
BOOL_RESULTS = BOOL_METHODS | TORCH_BOOL_FUNCS
TORCH_NON_TENSOR_FUNCS = frozenset({
    "finfo", "iinfo", "device", "dtype", "no_grad", "enable_grad", "inference_mode", "autocast",
    "manual_seed", "seed", "compile", "typename", "numel", "set_grad_enabled", "save", "load",
    "cond", "while_loop", "vmap", "sym_int", "sym_float", "sym_max", "sym_min", "sym_not",
    "broadcast_shapes", "result_type", "promote_types", "can_cast", "empty_cache",
    "use_deterministic_algorithms", "set_printoptions", "from_numpy_dtype",
})
SCALAR_CONVERSIONS = frozenset({"int", "float", "bool", "complex"})
