"""The rule registry: every family module, its rules and its detectors, in code order."""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from typing import Callable, Optional

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


__all__ = ["RULES", "RULES_BY_CODE", "HOOKS", "Rule", "get_rule", "category_of", "hooks_for"]
