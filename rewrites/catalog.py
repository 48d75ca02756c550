"""The rule catalog as other stages read it (CLI, renderers): ``get_rule(code)``, ``RULES``,
and ``fix_kind(code)``: whether ``mend fix`` has a rewrite for a rule."""

from __future__ import annotations

import functools
from typing import Optional

from rewrites.rules import RULES, RULES_BY_CODE, get_rule  # noqa: F401

rule_info = get_rule

SAFE = "safe"  # `mend fix` proposes a rewrite (and verifies it)
UNSAFE = "unsafe"  # only `mend fix --unsafe-fixes` does: the rewrite changes the program's cost


@functools.lru_cache(maxsize=None)
def _families() -> tuple[tuple[tuple[str, ...], bool, bool], ...]:
    """(rule prefixes, has safe rewrite cases, has unsafe ones) per fix family. A family's
    rewrite cases say what it rewrites: one whose cases rewrite nothing, like GM6's advice,
    fixes nothing."""
    from rewrites.fixes import family_modules

    out = []
    for m in family_modules():
        rewrites = [c for c in m.CASES if c.after is not None]
        out.append((tuple(m.RULES), any(not c.unsafe for c in rewrites), any(c.unsafe for c in rewrites)))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def fix_kind(code: str) -> Optional[str]:
    """SAFE when some fix family rewrites ``code``, UNSAFE when only an --unsafe-fixes
    rewrite does, None when mend has advice only."""
    covering = [(safe, unsafe) for prefixes, safe, unsafe in _families() if any(code.startswith(p) for p in prefixes)]
    if any(safe for safe, _ in covering):
        return SAFE
    if any(unsafe for _, unsafe in covering):
        return UNSAFE
    return None


def has_fix(code: str) -> bool:
    return fix_kind(code) is not None
