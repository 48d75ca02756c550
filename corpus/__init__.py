"""The graphmend corpus: models with known graph breaks (see README.md and manifest.toml).

A package so that its modules import as ``corpus.<file>`` and never shadow anything else.
"""
