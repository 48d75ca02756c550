"""``mend bench``: eager vs compiled-original vs compiled-mended (vs hand-fixed reference).

Modules: ``arms`` (which arms a target gets, and their jobs), ``stage`` (the stage that
runs them and computes ratios into a Report), ``worker`` (one arm in one process:
``python -m graphmend.bench.worker``), ``stats`` (median, IQR, ratios), ``measure``
(torch-side figures the worker reads: kernel and graph counts, memory). Moving, casting and
comparing outputs with eager's are verification's (``graphmend.verify.inputs``,
``graphmend.verify.compare``), so there is one comparator. Only ``measure`` and ``worker``
import torch, and only in the worker.
"""
