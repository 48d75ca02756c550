"""GM501 / GM502's runtime: what every opaque region of a file shares (rewrites/fixes/gm5_opaque.py).

Not imported by mend: ``rewrites.fixes.runtime.helper`` reads the function's source from this
file and a fix copies it into the file it rewrites, so user code never imports graphmend. It is
a module so that it is linted, and tested by importing it.
"""

import torch  # the rewritten file's own import: the copied function reads it as a global

from rewrites.fixes.runtime.registry import _mend_op_name  # copied into the file before this


def _mend_opaque_runtime():
    # mend: what every opaque region shares, made once per process (a file
    # imported twice, as verification's overlay does, finds it in sys.modules)
    import sys
    import types

    rt = sys.modules.get("_mend_opaque_runtime")
    if rt is None:
        import itertools
        import weakref

        rt = types.ModuleType("_mend_opaque_runtime")
        rt.ops, rt.modules = {}, weakref.WeakValueDictionary()
        # the graphs the regions' forwards recorded, by ticket, until their backward's token dies
        rt.saved, rt.tickets = {}, itertools.count(1)

        def handle_class(base):
            class ModuleRef(base):
                # an nn.Module's handle for its opaque regions; a copy of the module
                # (deepcopy, pickle) gets a handle of its own
                def __init__(self, module):
                    self.module = module
                    rt.modules[id(module)] = module

                def __reduce__(self):
                    return rt.ModuleRef, (self.module,)

            ModuleRef.__module__, ModuleRef.__qualname__ = rt.__name__, "ModuleRef"
            return ModuleRef

        try:
            if torch.__version__ < (2, 13):
                # 2.11 registers reference types too, but its Inductor cannot hash a
                # handle into its FX-graph cache key (the pickler recurses through it)
                raise ImportError("reference-typed opaque objects: torch 2.13")
            from torch._library.opaque_object import register_opaque_type
            from torch._opaque_base import OpaqueBase

            rt.ModuleRef = handle_class(OpaqueBase)
            # the op takes the handle itself (a reference-typed opaque object)
            register_opaque_type(rt.ModuleRef, typ="reference")
            rt.opaque = True
        except (ImportError, TypeError):
            # a torch without them, or before 2.13: the op takes the module's id, which
            # torch.compile guards, and finds the module, alive for the call, by it
            rt.ModuleRef, rt.opaque = handle_class(object), False
        sys.modules[rt.__name__] = rt
    return rt


def _mend_module_ref(module):
    # mend: the module's handle for its opaque regions (made in __init__: torch.compile
    # accepts an opaque object made before the compiled call, not one made inside it)
    return _mend_opaque_runtime().ModuleRef(module)


def _mend_opaque_op(name, region, kinds, like, dtype=None):
    # mend: `region` (a data-dependent region hoisted out of a forward) as one custom
    # op, so torch.compile keeps one graph and the region its sparse algorithm. kinds:
    # each argument's type ("module": the module's handle, then its parameters and
    # buffers as a list; "tensor", "int", "float", "bool"); the output is shaped like
    # argument `like` (of `dtype`, when given). Called eagerly it is the region itself;
    # compiled, the op's forward runs the region once with autograd recording it and
    # the backward differentiates that graph (no second run: hooks and RNG see one).
    import contextlib
    import inspect
    import weakref

    import torch.nn.utils.stateless as stateless

    if not hasattr(torch.library, "custom_op"):
        raise RuntimeError(
            f"{name}: this torch has no torch.library.custom_op (torch >= 2.4 has it)"
        )
    rt = _mend_opaque_runtime()

    def fingerprint(code):  # the same region, whichever import of its file defined it
        consts = tuple(
            fingerprint(c) if hasattr(c, "co_code") else repr(c) for c in code.co_consts
        )
        return code.co_code, code.co_names, consts

    mine = fingerprint(region.__code__)
    name, made = _mend_op_name(rt.ops, name, mine)
    if made is not None:
        return made
    kinds = kinds.split()
    module = kinds[0] == "module"
    kinds = kinds[1:] if module else kinds
    skip = 2 if module else 0  # the handle and the parameter list come first
    of = {"tensor": torch.Tensor, "int": int, "float": float, "bool": bool}
    opaque = rt.opaque
    head = (
        [("mend_module", rt.ModuleRef if opaque else int), ("mend_params", list[torch.Tensor])]
        if module
        else []
    )
    head += [(f"arg{i}", of[k]) for i, k in enumerate(kinds)]

    def signed(fn, extra, ret):
        fn.__signature__ = inspect.Signature(
            [
                inspect.Parameter(
                    n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=a
                )
                for n, a in head + extra
            ],
            return_annotation=ret,
        )
        return fn

    def same(a, b):  # b is a itself, or a view of a's memory with a's metadata
        try:
            return a is b or (
                (a.device, a.dtype, a.shape, a.stride(), a.data_ptr())
                == (b.device, b.dtype, b.shape, b.stride(), b.data_ptr())
            )
        except RuntimeError:  # a tensor without storage (a functorch wrapper)
            return False

    def run(args, values_only=False):
        if not module:
            return region(*args)
        m = args[0].module if opaque else rt.modules.get(args[0])
        if m is None:
            raise RuntimeError(
                f"{name}: the module of this region is gone (a handle outlived it)"
            )
        named = [*m.named_parameters(), *m.named_buffers()]
        own = [t for _, t in named]
        if values_only and len(own) == len(args[1]) and all(map(same, own, args[1])):
            # the module's own tensors (a compiled call without a backward to follow):
            # the region reads the same memory in place, without a swap on every call
            return region(m, *args[2:])
        keys = [k for k, _ in named]
        with stateless._reparametrize_module(m, dict(zip(keys, args[1]))):
            return region(m, *args[2:])

    # what may get a gradient: the parameters and buffers, then the tensor arguments
    def tensors(args):
        own = [*args[1]] if module else []
        return own + [a for a, k in zip(args[skip:], kinds) if k == "tensor"]

    def replaced(args, new):  # args with tensors(args) replaced by `new`, in order
        new = iter(new)
        args = list(args)
        if module:
            args[1] = [next(new) for _ in args[1]]
        for i, k in enumerate(kinds):
            if k == "tensor":
                args[skip + i] = next(new)
        return args

    def autograd_on():
        # an op's kernel runs below autograd: lift that, so the region records its graph
        # (forward) and the engine runs it (backward), as leaf_function does
        exclude = torch._C._dispatch_tls_local_exclude_set()
        for key in torch._C.DispatchKey.__members__.values():
            if "Autograd" in key.name or key.name == "ADInplaceOrView":
                exclude = exclude.remove(key)
        include = torch._C._dispatch_tls_local_include_set()
        return torch._C._ForceDispatchKeyGuard(include, exclude)

    def laid_out(value, like_t, dtype=None, fresh=False):
        # the layout the fakes promise (empty_like), which Inductor asserts: the region's
        # output, or a gradient, may come out strided otherwise (a transposed argument)
        want = torch.empty_like(like_t, dtype=dtype)
        if value.stride() == want.stride():
            return value.clone() if fresh else value
        return want.copy_(value)

    def forward(*args):
        *args, amp, grads = args
        if not any(grads):  # no backward follows (no_grad, or nothing requires grad)
            with autocasting(amp):
                out = run(args, values_only=True)
            return laid_out(out, args[skip + like], dtype), torch.empty(0, dtype=torch.int64)
        # the region runs once, as the original's does, and autograd records it: its
        # backward differentiates what this run saved, never a second run (hooks, Python
        # `random`, a module's own generator, all see one forward)
        leaves = [t.detach().requires_grad_(g) for t, g in zip(tensors(args), grads)]
        with autograd_on(), torch.enable_grad(), autocasting(amp):
            out = run(replaced(args, leaves))
        ticket = next(rt.tickets)
        rt.saved[ticket] = out, leaves
        token = torch.tensor([ticket], dtype=torch.int64)
        # the saved graph lives as long as the token, which autograd keeps for the
        # backward: a forward whose graph is dropped unused frees it too
        weakref.finalize(token, rt.saved.pop, ticket, None)
        return laid_out(out.detach(), args[skip + like], dtype, fresh=True), token

    def fake(*args):
        *args, amp, grads = args
        out = torch.empty_like(args[skip + like], dtype=dtype)
        return out, torch.empty(1 if any(grads) else 0, dtype=torch.int64)

    def autocasting(amp):
        # the caller's autocast, handed over as "cuda:bfloat16,cpu:bfloat16": a compiled
        # graph runs the op without autocast's state, where the original's ops ran under it
        stack = contextlib.ExitStack()
        for item in filter(None, amp.split(",")):
            device_type, dtype_name = item.split(":")
            stack.enter_context(torch.autocast(device_type, dtype=getattr(torch, dtype_name)))
        return stack

    def backward_impl(*args):
        *args, token, grad, needs = args
        saved = rt.saved.get(int(token[0])) if token.numel() else None
        if saved is None:
            raise RuntimeError(
                f"{name}: the region's saved graph is gone (a backward after its graph was freed)"
            )
        out, leaves = saved
        # a region whose output does not depend on its leaves (detached inside): no gradient
        asked = [bool(n and t.requires_grad and out.requires_grad) for t, n in zip(leaves, needs)]
        wanted = [t for t, a in zip(leaves, asked) if a]
        with autograd_on():
            # retain_graph: the saved graph is freed with its token, so a caller's
            # backward(retain_graph=True) may run it again
            got = iter(
                torch.autograd.grad(out, wanted, grad, retain_graph=True, allow_unused=True)
                if wanted
                else ()
            )
        res = []
        for t, n, a in zip(leaves, needs, asked):
            g = next(got) if a else None
            res.append(t.new_empty(0) if not n else torch.zeros_like(t) if g is None else laid_out(g, t))
        return res

    def backward_fake(*args):
        *args, token, grad, needs = args
        return [
            torch.empty_like(t) if n else t.new_empty(0)
            for t, n in zip(tensors(args), needs)
        ]

    # the region syncs (its sizes are read back), so CUDA graphs must not capture it:
    # Inductor runs it between captured partitions
    unsafe = torch.Tag.cudagraph_unsafe
    op = torch.library.custom_op(
        name,
        signed(forward, [("amp", str), ("grads", list[bool])], tuple[torch.Tensor, torch.Tensor]),
        mutates_args=(),
        tags=(unsafe,),
    )
    op.register_fake(fake)
    extra = [("token", torch.Tensor), ("grad", torch.Tensor), ("needs", list[bool])]
    back = torch.library.custom_op(
        name + "_backward",
        signed(backward_impl, extra, list[torch.Tensor]),
        mutates_args=(),
        tags=(unsafe,),
    )
    back.register_fake(backward_fake)

    def setup_context(ctx, inputs, output):
        ctx.inputs, ctx.token = inputs[:-2], output[1]

    def backward(ctx, grad, _token):
        args, need = ctx.inputs, ctx.needs_input_grad
        needs = [bool(n) for n in need[1]] if module else []
        needs += [bool(need[skip + i]) for i, k in enumerate(kinds) if k == "tensor"]
        got = iter(back(*args, ctx.token, grad, needs))
        out = [None] * (len(args) + 2)
        if module:
            out[1] = [
                g if n else None for g, n in zip([next(got) for _ in args[1]], needs)
            ]
        for i, k in enumerate(kinds):
            if k == "tensor":
                g = next(got)
                out[skip + i] = g if need[skip + i] else None
        return tuple(out)

    op.register_autograd(backward, setup_context=setup_context)

    # closures, not the global `torch`: torch.compile finds a global through the module of
    # the file that made the op, which another import of it may have replaced
    grad_enabled, compiling = torch.is_grad_enabled, torch.compiler.is_compiling
    amp_enabled, amp_dtype = torch.is_autocast_enabled, torch.get_autocast_dtype

    def call(*args):
        if not compiling():
            # run eagerly, the region is the original's own code on the module it was
            # called on: hooks, autograd (double backward, torch.func), RNG and a
            # replica's own parameters (nn.DataParallel) are the original's
            return region(args[0], *args[2:]) if module else region(*args)
        # under torch.compile: one op in the graph. The module's handle (made in
        # __init__) stands for it; which tensors may need a gradient, the grad mode and
        # the autocast state are guarded by torch.compile
        if module:
            if getattr(args[0], "_is_replica", False):
                # a replica (nn.DataParallel) shares the original's handle and holds its
                # parameters as plain attributes: the op would reach the original module, so
                # the region is traced as the original's code is (and breaks where it broke)
                return region(args[0], *args[2:])
            ref = args[0]._mend_opaque
            args = (ref if opaque else id(ref.module), *args[1:])
        amp = ",".join(
            f"{d}:{str(amp_dtype(d)).split('.')[-1]}"
            for d in ("cpu", "cuda")
            if amp_enabled(d)
        )
        flags = [
            grad_enabled() and t.requires_grad
            for t in tensors(args)
        ]
        return op(*args, amp, flags)[0]

    rt.ops[name] = (call, mine)
    return call
