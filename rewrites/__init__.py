"""Static scan and repair of graph-break patterns.

``rewrites.scan.scan_paths`` finds them (stdlib ``ast``, never torch, never libcst);
``rewrites.rules`` is the rule catalog, one module per family, and ``rewrites.rules.get_rule``
the lookup every other stage uses; ``rewrites.fixes`` holds the repairs, one module per
family, linked to their rules by the codes they name. Importing this package imports
nothing heavy.
"""
