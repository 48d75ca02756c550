"""GM402's runtime: a validation guard on a tensor condition as one call (rewrites/fixes/gm4_guards.py).

Not imported by mend: ``rewrites.fixes.runtime.helper`` reads the function's source from this
file and a fix copies it into the file it rewrites, so user code never imports graphmend. It is
a module so that it is linted, and tested by importing it.
"""

import torch  # the rewritten file's own import: the copied function reads it as a global


def _mend_raise_if(cond, error, message):
    # mend GM402: `if cond: raise error(message)`. Eager code raises as the original did
    # (the same class and message); compiled code checks in the graph instead
    # (torch._assert_async: a RuntimeError with the message, on CUDA at the next
    # synchronisation), where the original broke the graph to read the condition.
    if torch.compiler.is_compiling():
        torch._assert_async(torch.logical_not(cond), message)
    elif cond:
        raise error(message)
