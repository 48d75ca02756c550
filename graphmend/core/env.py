"""Versions of what a run stands on: mend's own, the installed torch's and transformers'
(read from package metadata, never by importing them), Python's and the platform's."""

from __future__ import annotations

import sys
from typing import Optional

VERSION = "0.1.0"  # graphmend.__version__
PROJECT_URL = "https://github.com/graphmend/graphmend"  # the project's home: SARIF's tool URI, rule docs


def package_version(name: str) -> Optional[str]:
    """The installed distribution's version without importing it; None when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def torch_version() -> Optional[str]:
    """The installed torch's version without importing torch."""
    return package_version("torch")


def transformers_version() -> Optional[str]:
    """The installed transformers' version without importing it; None when unreadable too
    (a corpus table is written without it)."""
    try:
        return package_version("transformers")
    except Exception:  # metadata that does not parse (a broken install): the table goes without it
        return None


def python_version() -> str:
    import platform

    return platform.python_version()


def platform_tag() -> str:
    """``linux-x86_64``: the OS and machine a report was made on."""
    import platform

    return f"{sys.platform}-{platform.machine()}"


def stamp(torch_version: Optional[str] = None) -> dict[str, Optional[str]]:
    """The versions every report carries (``Report``, ``SweepReport``): graphmend's, torch's
    (only when already known: reading it must not import torch), Python's and the platform."""
    return {"graphmend_version": VERSION, "torch_version": torch_version, "python_version": python_version(),
            "platform": platform_tag()}
