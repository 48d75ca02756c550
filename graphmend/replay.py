"""What a folder recorded by ``mend run --record`` imports (``from graphmend.replay import
load_tensors``): a stable name for the replay helpers, whatever mend's internals become."""

from graphmend.core.replay import load_tensors, regenerate, uncompiled

__all__ = ["load_tensors", "regenerate", "uncompiled"]
