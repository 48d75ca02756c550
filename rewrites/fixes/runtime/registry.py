"""What the runtimes that make custom ops share (size_op.py, shape_op.py, opaque.py): the name an op
made in this process gets in its runtime's registry.

Not imported by mend: ``rewrites.fixes.runtime.helper`` reads the function's source from this
file and a fix copies it into the file it rewrites, before the runtime that calls it. It is a
module so that it is linted, and tested by importing it.
"""


def _mend_op_name(ops, name, mine):
    # mend: the name the op of code `mine` (a fingerprint) made at site `name` gets in
    # `ops` (name -> (op, fingerprint)): `name`, or, where another file's op of the
    # same site name (stem, function, line) holds it, the next free `name_<k>`; and the
    # op already made for this very code, else None
    base, k = name, 0
    while name in ops and ops[name][1] != mine:
        k += 1
        name = f"{base}_{k}"
    return name, ops[name][0] if name in ops else None
