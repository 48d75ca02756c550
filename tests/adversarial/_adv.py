"""Shared helper of the adversarial programs (not a program: it has no ``mend_target``).

Every program in this folder is a plain module with one ``mend_target_*()`` function and,
at module level, what a correct tool must do with it:

* ``EXPECT = "fix"``: a sound fix exists and mend should find it (any refusal fails);
* ``EXPECT = "refuse"``: the obvious rewrite is unsound; mend must not mark it verified
  unless the fix survives the independent oracle of tests/stages/test_adversarial.py;
* ``ACCEPT_REASONS``: lowercase substrings, any of which in the fix's ``reason`` makes a
  refusal (``rejected`` / ``unverified`` / ``advice``) an acceptable one;
* ``NAIVE`` (optional): the source of the module with the naive rewrite applied (the
  plain ``torch.where`` form); the oracle must tell it apart from the original.

``target(fn, args, kwargs, inputs)`` builds a ``graphmend.Target`` whose extra example
inputs (``Target.inputs``: verification always runs them) reach the dangerous case.
"""

from __future__ import annotations

from graphmend import Target


def target(fn, args, kwargs=None, inputs=()):
    """A ``graphmend.Target`` whose ``inputs`` are the trigger inputs that reach the dangerous case."""
    return Target(fn=fn, args=tuple(args), kwargs=dict(kwargs or {}), inputs=[(tuple(a), dict(k)) for a, k in inputs])


def trigger_inputs(t: Target) -> list:
    return list(t.inputs or [])


def naive(file: str, old: str, new: str) -> str:
    """This program's source (up to its ``NAIVE =`` line) with ``old`` replaced by ``new``."""
    with open(file, encoding="utf-8") as fh:
        text = fh.read()
    head = text.split("\nNAIVE = ", 1)[0] + "\n"
    # None when the text is not there exactly once: a typo (the oracle's test says so), or
    # this is a patched copy of the program, whose branch mend already rewrote
    return head.replace(old, new) if head.count(old) == 1 else None
