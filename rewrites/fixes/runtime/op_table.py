"""What the runtimes whose ops need nothing else share (size_op.py, shape_op.py): their table of
the ops made in this process.

Not imported by mend: ``rewrites.fixes.runtime.helper`` reads the function's source from this
file and a fix copies it into the file it rewrites, before the runtime that calls it. It is a
module so that it is linted, and tested by importing it.
"""

import torch  # the rewritten file's own import: the copied functions read it as a global


def _mend_op_table(runtime, name):
    # mend: the ops (name -> (op, fingerprint)) runtime `runtime` made in this process,
    # kept in sys.modules so that a file imported twice (verification's overlay) finds
    # its op; `name`, the op about to be made, names it where torch has no custom_op
    import sys
    import types

    if not hasattr(torch.library, "custom_op"):
        raise RuntimeError(
            f"{name}: this torch has no torch.library.custom_op (torch >= 2.4 has it)"
        )
    reg = sys.modules.get(runtime)
    if reg is None:
        reg = types.ModuleType(runtime)
        reg.ops = {}
        sys.modules[runtime] = reg
    return reg.ops
