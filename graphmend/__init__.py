"""graphmend: find, explain, repair and measure torch.compile graph breaks.

Importing this package must stay cheap: no torch here (``mend --help`` and the static
path depend on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

__version__ = "0.1.0"
PROJECT_URL = "https://github.com/graphmend/graphmend"  # the project's home: SARIF's tool URI, rule docs


@dataclass
class Target:
    """What a ``mend_target*`` function may return instead of a plain tuple.

    ``fn(*args, **kwargs)`` is the call that gets compiled. ``inputs`` are more example
    inputs (a list of ``(args, kwargs)``) that fix verification always runs, in every mode:
    the inputs that take a rare branch (an id past the vocabulary, an empty mask), so that
    every rewritten arm runs. ``perturb`` also supplies ``(args, kwargs)`` pairs, tried only
    while a rewritten branch has not gone both ways; ``tolerance`` overrides the per-dtype
    tolerances of output comparison. ``loss(outputs)`` is the scalar train mode backwards
    through (``--train``, fix verification's train check, the bench's training step);
    without it, the sum of the floating outputs.
    """

    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    name: Optional[str] = None
    perturb: Optional[list] = None
    inputs: Optional[list] = None
    tolerance: Optional[dict] = None
    loss: Optional[Callable[[Any], Any]] = None


__all__ = ["PROJECT_URL", "Target", "__version__"]
