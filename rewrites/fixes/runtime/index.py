"""GM303's runtime: ``x[i]`` with ``i`` a 0-d integer tensor (rewrites/fixes/gm3_tensor_index.py).

Not imported by mend: ``rewrites.fixes.runtime.helper`` reads the function's source from this
file and a fix copies it into the file it rewrites, so user code never imports graphmend. It is
a module so that it is linted, and tested by importing it.
"""

import torch  # the rewritten file's own import: the copied function reads it as a global


def _mend_index(x, i):
    # mend GM303: x[i]. Eager code indexes as written (a view, the same errors). Under
    # torch.compile a 0-d integer tensor index is read into Python (a graph break); as a
    # one-element index it stays in the graph and selects the same row, with the same gradient.
    if (
        torch.compiler.is_compiling()
        and isinstance(x, torch.Tensor)
        and isinstance(i, torch.Tensor)
        and i.dim() == 0
        and i.dtype in (torch.int64, torch.int32, torch.int16, torch.int8)
    ):
        return x[i.reshape(1)].squeeze(0)
    return x[i]
