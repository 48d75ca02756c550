"""``mend sweep``: every architecture of an installed library that builds from its config
class, run through the same capture ``mend analyze`` uses, in one report.

The stage (``graphmend.sweep.stage``) enumerates the library's architectures
(``graphmend.sweep.hf`` for transformers), writes one generated target file per
architecture, hands those files to ``graphmend.collect`` as ``mend analyze --dynamic-only``
would take them, and aggregates the results (root causes with their fan-out, what a fix
would remove, changes against a baseline) into ``graphmend.core.tables.SweepReport``.
Importing this package is cheap: the library is imported when the stage runs.
"""
