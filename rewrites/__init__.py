"""Static scan and repair of graph-break patterns.

``rewrites.scan.scan_paths`` finds them (stdlib ``ast``, never torch, never libcst);
``rewrites.rules`` is the rule catalog, one module per family; ``rewrites.catalog`` is the
lookup the CLI and the renderers use. Importing this package imports nothing heavy.
"""
