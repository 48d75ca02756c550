"""GM202 / GM203's runtime: a warning or a log message under a tensor condition that still fires
in compiled code, through an effectful custom op (rewrites/fixes/gm2_defer.py).

Not imported by mend: ``rewrites.fixes.runtime.helper`` reads the functions' source from this
file and a fix copies it into the file it rewrites, so user code never imports graphmend. It is
a module so that it is linted, and tested by importing it.
"""

import torch  # the rewritten file's own import: the copied functions read it as a global


def _mend_warn_if(cond, message, category, line):
    # mend: `if cond: warnings.warn(message, category)`, from compiled code too. Eager code
    # warns here as the caller's line did; under torch.compile one effectful custom op
    # reads `cond` (a host sync, where the original broke the graph) and warns as line
    # `line` of this file (the call's line in the original source).
    if torch.compiler.is_compiling():
        # str(): torch 2.11's compiler passes a class's bare __name__ to no op
        name = str(category.__name__)
        _mend_emit.warn_if(cond, message, name, __name__, __file__, line)
    elif cond:
        import warnings

        warnings.warn(message, category, stacklevel=2)


def _mend_log_if(cond, logger, method, message, line):
    # mend: `if cond: logger.<method>(message)`, `logger` this module's own (named after
    # it), from compiled code too. Eager code logs here as the caller's line did; under
    # torch.compile one effectful custom op reads `cond` (a host sync, skipped when the
    # logger would drop the record) and logs the record as line `line` of this file (the
    # call's line in the original source).
    if torch.compiler.is_compiling():
        _mend_emit.log_if(cond, __name__, method, message, __file__, line)
    elif cond:
        getattr(logger, method)(message, stacklevel=2)


def _mend_emit_ops():
    # mend: the custom ops of _mend_warn_if and _mend_log_if, made once per process (a
    # file imported twice, as verification's overlay does, finds them in sys.modules).
    # Effectful (ordered): the compiler keeps them, in program order, though they
    # return nothing.
    import sys
    import types

    ops = sys.modules.get("_mend_emit_ops")
    if ops is not None:
        return ops
    import builtins
    import logging
    import warnings

    from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

    def warn_if(
        cond: torch.Tensor,
        message: str,
        category: str,
        module: str,
        filename: str,
        line: int,
    ) -> None:
        if bool(cond):
            mod = sys.modules.get(module)
            registry = vars(mod).setdefault("__warningregistry__", {}) if mod else None
            warnings.warn_explicit(
                message,
                getattr(builtins, category),
                filename,
                line,
                module=module,
                registry=registry,
            )

    def log_if(
        cond: torch.Tensor,
        logger: str,
        method: str,
        message: str,
        filename: str,
        line: int,
    ) -> None:
        log = logging.getLogger(logger)
        level = getattr(logging, "WARNING" if method == "warn" else method.upper())
        if log.isEnabledFor(level) and bool(cond):
            record = log.makeRecord(log.name, level, filename, line, message, (), None)
            log.handle(record)

    ops = types.ModuleType("_mend_emit_ops")
    for fn in (warn_if, log_if):
        op = torch.library.custom_op(f"mend::{fn.__name__}", fn, mutates_args=())
        op.register_fake(lambda *args: None)
        _register_effectful_op(op._opoverload, _EffectType.ORDERED)
        setattr(ops, fn.__name__, op)
    sys.modules[ops.__name__] = ops
    return ops


_mend_emit = _mend_emit_ops()
