"""The rule registry: every family module, its rules and its detectors, in code order."""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
import difflib
from typing import Callable, Iterable, Optional

from graphmend.core.config import ConfigError

from rewrites.rules import (gm1_control_flow, gm2_side_effects, gm3_host_scalars, gm4_validation,
                            gm5_dynamic_shapes, gm6_unsupported, gm9_unexplained)
from rewrites.rules.base import Rule

FAMILIES: tuple[ModuleType, ...] = (gm1_control_flow, gm2_side_effects, gm3_host_scalars, gm4_validation,
                                    gm5_dynamic_shapes, gm6_unsupported, gm9_unexplained)


def _collect() -> tuple[tuple[Rule, ...], dict[type, tuple[Callable, ...]]]:
    rules: list[Rule] = []
    hooks: dict[type, list[Callable]] = {}
    for fam in FAMILIES:
        fixes = getattr(fam, "FIXES", {})  # {code: libcst transform}, added by the fixer
        for r in fam.RULES:
            rules.append(replace(r, transform=fixes[r.code]) if r.code in fixes else r)
        for node_type, fns in fam.HOOKS.items():
            hooks.setdefault(node_type, []).extend(fns)
    return tuple(sorted(rules, key=lambda r: r.code)), {k: tuple(v) for k, v in hooks.items()}


RULES, HOOKS = _collect()
RULES_BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}
STATIC_CODES = frozenset(r.code for r in RULES if r.static)


def get_rule(code: str) -> Optional[Rule]:
    return RULES_BY_CODE.get(code.strip().upper())


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


__all__ = ["RULES", "RULES_BY_CODE", "HOOKS", "Rule", "get_rule", "is_rule_code", "check_codes", "category_of",
           "hooks_for"]
