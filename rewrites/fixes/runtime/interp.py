"""GM604's runtime: ``numpy.interp`` under torch.compile, which has no trace rule for it
(``attempted to trace numpy function unsupported by PyTorch``; rewrites/fixes/gm6_numpy.py).

Eager code calls ``numpy.interp`` itself, so every result, warning and error is NumPy's.
Compiled code runs the same arithmetic as NumPy's C loop in NumPy operations Dynamo traces
(through ``torch._numpy``, in float64).

Not imported by mend: ``rewrites.fixes.runtime.helper`` reads the function's source from this
file and a fix copies it into the file it rewrites. It is a module so that it is linted, and
tested by importing it.
"""

import torch  # the rewritten file's own import: the copied function reads it as a global


def _mend_interp(x, xp, fp):
    # mend GM604: numpy.interp(x, xp, fp). Eager code calls it. Under torch.compile its C
    # loop, in operations Dynamo traces: x's interval is the last xp <= x; a point of xp
    # gives its fp; outside xp, fp's ends; NaN where x is NaN; where the slope gives NaN,
    # the interval's other end, then its ends if equal. Complex fp, fewer than two points
    # or a shape numpy.interp refuses go to numpy.interp (a graph break, as before).
    import numpy  # by this name whatever the file calls it

    if not torch.compiler.is_compiling():
        return numpy.interp(x, xp, fp)
    xps, fps = numpy.asarray(xp), numpy.asarray(fp)
    if torch.from_numpy(fps).is_complex() or xps.ndim != 1 or fps.shape != xps.shape:
        return numpy.interp(x, xp, fp)
    if xps.shape[0] < 2:
        return numpy.interp(x, xp, fp)
    # flat: a 0-d index would be read back to the host
    xs = numpy.asarray(x, dtype=numpy.float64).reshape(-1)
    xps, fps = xps.astype(numpy.float64), fps.astype(numpy.float64)
    j = numpy.clip(numpy.searchsorted(xps, xs, side="right") - 1, 0, xps.shape[0] - 2)
    x0, x1, y0, y1 = xps[j], xps[j + 1], fps[j], fps[j + 1]
    slope = (y1 - y0) / (x1 - x0)
    y = slope * (xs - x0) + y0
    y = numpy.where(numpy.isnan(y), slope * (xs - x1) + y1, y)
    y = numpy.where(numpy.isnan(y) & (y0 == y1), y0, y)
    y = numpy.where(xs == x0, y0, y)
    y = numpy.where(xs >= xps[-1], fps[-1], y)
    y = numpy.where(xs < xps[0], fps[0], y)
    return numpy.where(numpy.isnan(xs), xs, y).reshape(numpy.shape(x))[()]
