"""The ground every stage stands on: the data model, config, sources (read and atomic write),
target discovery and loading, jobs (the worker protocol), the import overlay, run modes, the
recording format of ``mend run --record`` and ``env`` (versions).

Nothing here imports another part of the project (``tests/test_layers.py`` holds it to that),
and nothing here imports torch at module import time.
"""
