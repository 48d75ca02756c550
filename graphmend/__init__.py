"""graphmend: find, explain, repair and measure torch.compile graph breaks.

Importing this package must stay cheap: no torch here (``mend --help`` and the static
path depend on it). ``Target`` is loaded when first asked for (``graphmend.Target``, ``from
graphmend import Target``): user code and workers need it, ``mend --help`` does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphmend.core.env import PROJECT_URL
from graphmend.core.env import VERSION as __version__

if TYPE_CHECKING:
    from graphmend.core.targets import Target

__all__ = ["PROJECT_URL", "Target", "__version__"]


def __getattr__(name: str):
    if name == "Target":
        from graphmend.core.targets import Target

        return Target
    raise AttributeError(f"module 'graphmend' has no attribute {name!r}")
