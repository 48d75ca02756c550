"""The rule catalog as other stages read it (CLI, renderers): ``get_rule(code)``, ``RULES``."""

from __future__ import annotations

from rewrites.rules import RULES, RULES_BY_CODE, get_rule  # noqa: F401

rule_info = get_rule
