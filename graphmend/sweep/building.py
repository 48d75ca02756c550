"""What every library module of the sweep shares: the refusal of a model that cannot be built,
and the eager forward that decides whether a built model runs its inputs."""

from __future__ import annotations

from typing import Any

from graphmend.core.worker import describe


class NotBuilt(Exception):
    """The architecture cannot be built tiny from its config (or its eager forward rejects the batch)."""


def forward_checked(model: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
    """``(model, args, kwargs)`` once one eager forward under no_grad ran them, else NotBuilt
    saying why: a row that cannot run its own inputs is "not built", never a capture failure."""
    import torch

    try:
        with torch.no_grad():
            model(*args, **kwargs)
    except Exception as exc:
        raise NotBuilt(f"eager forward: {describe(exc)}") from None
    return model, args, kwargs
