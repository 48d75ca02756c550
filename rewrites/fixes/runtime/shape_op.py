"""GM302 / GM504's runtime: a function's last lines, whose result's shape depends on data, as one
custom op whose fake runs the same lines on fake tensors (rewrites/fixes/gm5_shape_tail.py).

Not imported by mend: ``rewrites.fixes.runtime.helper`` reads the function's source from this
file and a fix copies it into the file it rewrites, so user code never imports graphmend. It is
a module so that it is linted, and tested by importing it.
"""

import torch  # the rewritten file's own import: the copied function reads it as a global

from rewrites.fixes.runtime.op_table import _mend_op_table  # copied into the file before this
from rewrites.fixes.runtime.registry import _mend_op_name  # copied into the file before this


def _mend_shape_op(name, tail, kinds, outputs=1):
    # mend: `tail` (a function's last lines, whose result's sizes depend on data) as
    # one custom op, so torch.compile keeps the graph whole. Not compiling, a call runs
    # the lines themselves. Compiled, the op's fake runs the same lines on fake tensors
    # whose values, read into Python, are new unbacked ints (a shape env of its own):
    # a size that depends on data becomes a new unbacked size, the others are the
    # lines' own. Where the lines cannot run so, Dynamo breaks there, as before. kinds:
    # each argument's type ("tensor", "int", "float", "bool", "str", "dtype",
    # "device"); a call with another type, with grad enabled or under autocast runs the
    # lines themselves: the op serves inference. Made once per process.
    import inspect

    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        FakeTensorMode,
        unset_fake_temporarily,
    )
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    ops = _mend_op_table("_mend_shape_ops", name)
    code = tail.__code__  # the same lines, whichever import of their file defined them
    mine = (code.co_code, code.co_names, repr(code.co_consts))
    name, made = _mend_op_name(ops, name, mine)
    if made is not None:
        return made
    of = {
        "tensor": torch.Tensor,
        "int": int,
        "float": float,
        "bool": bool,
        "str": str,
        "dtype": torch.dtype,
        "device": torch.device,
    }
    types_ = [of[k] for k in kinds.split()]

    def forward(*args):
        return tail(*args)

    forward.__signature__ = inspect.Signature(
        [
            inspect.Parameter(
                f"arg{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=t
            )
            for i, t in enumerate(types_)
        ],
        return_annotation=torch.Tensor
        if outputs == 1
        else tuple[(torch.Tensor,) * outputs],
    )

    def hint(n, kind=int):  # a value for the fake run: its hint, where it is symbolic
        h = getattr(getattr(n, "node", None), "hint", n)
        return kind(1 if h is None else h)

    def fake(*args):
        ctx = torch.library.get_ctx()
        env = ctx._shape_env
        new = ctx.new_dynamic_size if env is None else env.create_unbacked_symint
        sym = (torch.SymInt, torch.SymFloat, torch.SymBool)
        # a size symbolic outside is one the inner run would take for a constant
        dynamic = any(
            isinstance(a, sym)
            or isinstance(a, torch.Tensor)
            and any(isinstance(d, torch.SymInt) for d in a.shape)
            for a in args
        )
        try:
            with unset_fake_temporarily(), FakeTensorMode(
                shape_env=ShapeEnv(allow_scalar_outputs=True)
            ):
                inner = [
                    torch.empty(
                        [hint(d) for d in a.shape], dtype=a.dtype, device=a.device
                    )
                    if isinstance(a, torch.Tensor)
                    else hint(a, t) if isinstance(a, sym) else a
                    for a, t in zip(args, types_)
                ]
                out = tail(*inner)
                got = out if outputs > 1 else (out,)
                shapes = [
                    (
                        [d if isinstance(d, int) else None for d in o.shape],
                        o.dtype,
                        o.device,
                    )
                    for o in got
                ]
        except Exception as e:
            raise DataDependentOutputException(
                torch.ops.aten._local_scalar_dense.default
            ) from e
        made = [
            torch.empty(
                [new() if d is None or dynamic else d for d in size],
                dtype=dtype,
                device=device,
            )
            for size, dtype, device in shapes
        ]
        return tuple(made) if outputs > 1 else made[0]

    op = torch.library.custom_op(name, forward, mutates_args=())
    op.register_fake(fake)

    def call(*args):
        if (
            not torch.compiler.is_compiling()
            or any(not isinstance(a, t) for a, t in zip(args, types_))
            # with grad: the op has no derivative, and autograd's broadcasting checks
            # guard on its unbacked sizes (torch.compile raises)
            or torch.is_grad_enabled()
            # a compiled graph runs the op without the caller's autocast
            or any(torch.is_autocast_enabled(d) for d in ("cpu", "cuda"))
        ):
            return tail(*args)
        return op(*args)

    ops[name] = (call, mine)
    return call
