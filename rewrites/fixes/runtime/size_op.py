"""GM301 / GM302 / GM303's runtime: a tensor's value read back as unbacked ints through a custom op (rewrites/fixes/gm3_unbacked.py).

Not imported by mend: ``rewrites.fixes.runtime.helper`` reads the function's source from this
file and a fix copies it into the file it rewrites, so user code never imports graphmend. It is
a module so that it is linted, and tested by importing it.
"""

import torch  # the rewritten file's own import: the copied function reads it as a global

from rewrites.fixes.runtime.op_table import _mend_op_table  # copied into the file before this
from rewrites.fixes.runtime.registry import _mend_op_name  # copied into the file before this


def _mend_size_op(name, read, many=False):
    # mend: `read` (a tensor's value read back as a Python int, or with `many` a 1-D
    # tensor's values as a list of ints) as one custom op whose fake returns new
    # unbacked ints, so torch.compile keeps the graph whole without
    # capture_scalar_outputs; the torch._check lines after each call bound the int.
    # Made once per process: a file imported twice (verification's overlay) finds its
    # op in sys.modules.
    ops = _mend_op_table("_mend_size_ops", name)
    mine = (read.__code__.co_code, read.__code__.co_names)
    name, made = _mend_op_name(ops, name, mine)
    if made is not None:
        return made

    def forward(t):
        return read(t)

    def fake(t):
        # the frame's ShapeEnv makes the symbol (new_dynamic_size() would refuse outside
        # fullgraph=True); its bounds are the torch._check calls at the site
        ctx = torch.library.get_ctx()
        env = ctx._shape_env
        new = ctx.new_dynamic_size if env is None else env.create_unbacked_symint
        if not many:
            return new()
        if t.dim() != 1:
            raise ValueError(
                f"{name} reads a 1-D tensor's values, not a {t.dim()}-D one's"
            )
        return [new() for _ in range(t.shape[0])]

    schema = "(Tensor t) -> SymInt[]" if many else "(Tensor t) -> SymInt"
    op = torch.library.custom_op(name, forward, mutates_args=(), schema=schema)
    op.register_fake(fake)
    ops[name] = (op, mine)
    return op
