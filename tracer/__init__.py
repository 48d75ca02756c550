"""Dynamic capture: runs targets and scripts under Dynamo and records graphs, breaks and
recompiles. Importing this package is cheap; torch is imported only where capture runs
(``tracer.recorder``, ``tracer.worker``, ``tracer.run_script``).
"""
