"""``mend bench``: eager vs compiled-original vs compiled-mended (vs hand-fixed reference).

Modules: ``arms`` (which arms a target gets, and their jobs), ``stage`` (the stage that
runs them and computes ratios into a Report), ``worker`` (one arm in one process:
``python -m graphmend.bench.worker``), ``stats`` (median, IQR, ratios), ``measure``
(torch-side helpers the worker uses: moving/casting, output comparison, kernel and graph
counting, memory). Only ``measure`` and ``worker`` import torch, and only in the worker.
"""
