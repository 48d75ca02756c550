"""The rule catalog: every family module, its rules and its detectors, in code order.

``get_rule(code)`` is the one way other stages read a rule (the CLI, the renderers, the
classifier, ``mend fix``'s advice); the modules of this package are found, not listed:
every one but ``SUPPORT`` is a family (``rewrites/rules/base.py`` says what one holds).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from types import ModuleType
from typing import Callable, Iterable, Optional

from graphmend.core.config import ConfigError

from rewrites.rules.base import CATEGORIES, Rule

# What the families share; every other module here is a family.
SUPPORT = frozenset({"base", "_util"})


def _families() -> tuple[ModuleType, ...]:
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in SUPPORT)
    return tuple(importlib.import_module(f"{__name__}.{n}") for n in names)


FAMILIES = _families()


def _collect() -> tuple[tuple[Rule, ...], dict[type, tuple[Callable, ...]]]:
    rules: list[Rule] = []
    hooks: dict[type, list[Callable]] = {}
    for fam in FAMILIES:
        rules.extend(fam.RULES)
        for node_type, fns in fam.HOOKS.items():
            hooks.setdefault(node_type, []).extend(fns)
    return tuple(sorted(rules, key=lambda r: r.code)), {k: tuple(v) for k, v in hooks.items()}


RULES, HOOKS = _collect()


def _prefix(family: ModuleType) -> str:
    return family.RULES[0].code[:3]


# family -> the families a finding of it may stand for on its line (its own among them)
OVERLAPS: dict[str, frozenset[str]] = {_prefix(f): frozenset({_prefix(f), *getattr(f, "OVERLAPS", ())})
                                       for f in FAMILIES}
# the families whose finding names a break no rule explained (GM9xx), in the order they are tried
NAMING_ORDER: tuple[str, ...] = tuple(_prefix(f) for f in sorted((f for f in FAMILIES if hasattr(f, "NAMES_BREAKS")),
                                                                  key=lambda f: f.NAMES_BREAKS))
RULES_BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}
STATIC_CODES = frozenset(r.code for r in RULES if r.static)


def get_rule(code: str) -> Optional[Rule]:
    return RULES_BY_CODE.get(code.strip().upper())


def advice_for(code: str) -> str:
    """What ``mend fix`` suggests for a finding or break of ``code`` that it does not rewrite."""
    r = get_rule(code)
    return r.advice if r is not None and r.advice else f"no automatic fix; see `mend rules {code}`"


def is_rule_code(code: str) -> bool:
    """A code or prefix that selects at least one rule (``GM1``, ``GM10``, ``GM101``); ``GM1O1``
    (letter O) selects none."""
    code = code.strip().upper()
    return bool(code) and any(r.code.startswith(code) for r in RULES)


def check_codes(codes: Iterable[str], where: str) -> None:
    """Raise ``ConfigError`` naming ``where`` (a flag, ``file: [tool.mend] key`` or a comment's
    ``file:line``) and the first code in ``codes`` that selects no rule: a typo in a selection
    must not quietly select nothing or suppress everything."""
    for code in codes:
        if not is_rule_code(code):
            hint = _close_code(code.strip().upper())
            raise ConfigError(f"{where}: unknown rule code or prefix {code.strip()!r}"
                              + (f" (did you mean {hint}?)" if hint else "") + "; run 'mend rules' for the list")


def _close_code(code: str) -> Optional[str]:
    # letters typed for digits (GM1O1, GM2l1) are the usual typo; else the nearest code
    digits = code[:2] + code[2:].translate(str.maketrans("OILS", "0115"))
    if is_rule_code(digits):
        return digits
    near = difflib.get_close_matches(code, [r.code for r in RULES], n=1, cutoff=0.8)
    return near[0] if near else None


def category_of(code: str) -> str:
    r = get_rule(code)
    return r.category if r else ""


def hooks_for(codes: frozenset[str]) -> dict[type, tuple[Callable, ...]]:
    """All hooks; families none of whose codes is enabled are left out (cheaper scans)."""
    if codes >= STATIC_CODES:
        return HOOKS
    hooks: dict[type, list[Callable]] = {}
    for fam in FAMILIES:
        if any(r.code in codes for r in fam.RULES):
            for node_type, fns in fam.HOOKS.items():
                hooks.setdefault(node_type, []).extend(fns)
    return {k: tuple(v) for k, v in hooks.items()}


__all__ = ["RULES", "RULES_BY_CODE", "HOOKS", "CATEGORIES", "Rule", "get_rule", "advice_for", "is_rule_code",
           "check_codes", "category_of", "hooks_for"]
