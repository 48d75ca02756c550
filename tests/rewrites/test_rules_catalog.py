"""Every rule's own VALID / INVALID cases, one record per rule (what is derived from it is
derived, what it links to exists), and the catalog against docs/internals.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rewrites.rules import RULES, RULES_BY_CODE, get_rule
from rewrites.rules.base import CATEGORIES
from rewrites.scan import scan_source

CASES = [(r.code, "invalid", i, c) for r in RULES for i, c in enumerate(r.invalid)] + \
        [(r.code, "valid", i, c) for r in RULES for i, c in enumerate(r.valid)]


@pytest.mark.parametrize("code,kind,i,source", CASES, ids=[f"{c}-{k}{i}" for c, k, i, _ in CASES])
def test_rule_case(code, kind, i, source):
    result = scan_source(source, path="case.py")
    assert result.error is None
    codes = [f.rule for f, _key, _root in result.findings]
    if kind == "invalid":
        assert code in codes, f"{code} missed:\n{source}"
    else:
        assert code not in codes, f"{code} false positive:\n{source}"


def test_codes_and_categories_match_internals():
    text = (Path(__file__).resolve().parents[2] / "docs" / "internals.md").read_text()
    documented = dict(re.findall(r"^\| (GM\d{3}) \| [^|]+\| ([a-z-]+) \|$", text, re.M))
    assert documented, "rule table not found in docs/internals.md"
    assert {r.code: r.category for r in RULES} == documented


def test_every_rule_is_documented_and_tested():
    for r in RULES:
        assert r.category in CATEGORIES
        assert r.summary and r.why and r.fix, r.code
        assert all(u.startswith("https://") for u in r.links)
        if r.static:
            assert r.valid and r.invalid, f"{r.code} needs VALID and INVALID cases"
    assert get_rule("gm101") is RULES_BY_CODE["GM101"]
    assert get_rule("GM999") is None


def test_every_module_is_a_registered_family():
    """A family is found, not listed: every module of rewrites/rules/ but the support ones
    holds rules and detectors, and every rule the catalog has comes from one."""
    import pkgutil

    import rewrites.rules

    names = {m.name for m in pkgutil.iter_modules(rewrites.rules.__path__)}
    families = {m.__name__.rsplit(".", 1)[1] for m in rewrites.rules.FAMILIES}
    assert names == families | rewrites.rules.SUPPORT and not families & rewrites.rules.SUPPORT
    assert all(isinstance(m.HOOKS, dict) and m.RULES for m in rewrites.rules.FAMILIES)
    assert sorted(r.code for m in rewrites.rules.FAMILIES for r in m.RULES) == [r.code for r in RULES]
    for m in rewrites.rules.FAMILIES:  # a family is one prefix: GM1 control flow ... GM9 unexplained
        assert {r.code[:3] for r in m.RULES} == {m.__name__.rsplit(".", 1)[1][:3].upper()}, m.__name__


def test_fixable_is_what_the_registered_fixes_rewrite():
    """``fixable`` is derived from the fix families (as Fixit derives AUTOFIX): every rule a
    registered fix names is fixable, every fixable rule has one, and some case of its fixes
    rewrites a site of that very rule (safe, or unsafe when the rule's kind says so)."""
    from rewrites.fixes import family_modules, fix_source

    fixed = {code for m in family_modules() for code in m.RULES}
    assert fixed <= set(RULES_BY_CODE), fixed - set(RULES_BY_CODE)
    assert {r.code for r in RULES if r.fixable} == fixed
    assert all(bool(r.fixes) == r.fixable for r in RULES)
    for r in RULES:
        if not r.fixable:
            assert r.fix_kind is None
            continue
        shown = set()
        for m in family_modules():
            if m.__name__.rsplit(".", 1)[1] in r.fixes:
                for c in m.CASES:
                    if c.after is not None:
                        shown |= {c.unsafe for s in fix_source(c.before, **c.options()).applied if s.rule == r.code}
        assert shown, f"no case of {r.fixes} rewrites a {r.code} site"
        assert (False in shown) == (r.fix_kind == "safe"), (r.code, r.fix_kind, shown)


def test_mend_rules_json_says_which_rules_are_fixable():
    import json

    from typer.testing import CliRunner

    from graphmend.cli.app import app

    out = CliRunner().invoke(app, ["rules", "--format", "json"])
    assert out.exit_code == 0
    data = {d["code"]: d for d in json.loads(out.stdout)}
    assert data["GM101"]["fixable"] is True and data["GM101"]["fix_kind"] == "safe"
    assert data["GM606"]["fixable"] is True and data["GM606"]["fix_kind"] == "safe"
    assert data["GM601"]["fixable"] is False and data["GM601"]["fix_kind"] is None
    assert data["GM101"]["fix"] == RULES_BY_CODE["GM101"].fix  # the strategy text, beside the kind
    assert {c for c, d in data.items() if d["fixable"]} == {r.code for r in RULES if r.fixes}


def test_dynamic_identity_and_advice_live_in_the_records():
    """The classifier's tables are the records' (one gb_type, one rule), the categories the
    records use are the catalog's, and every rule has the advice mend fix gives for it."""
    import re

    from rewrites.rules import advice_for, category_of
    from tracer import classify

    gb_types = [gb for r in RULES for gb in r.gb_types]
    assert len(gb_types) == len(set(gb_types)), "a gb_type that means two rules"
    assert classify._BY_GB_TYPE == {gb: r.code for r in RULES for gb in r.gb_types}
    for r in RULES:
        for p in r.message_patterns + r.source_patterns:
            re.compile(p)
        assert r.advice and advice_for(r.code) == r.advice, r.code
        assert category_of(r.code) == r.category
    assert list(CATEGORIES)[:len({r.category for r in RULES})] == list(dict.fromkeys(r.category for r in RULES))
    assert classify.classify("copy.deepcopy()", "copy.deepcopy()") == "GM601"
    assert classify.classify(None, "a wording no rule knows", "    y = x.tolist()") == "GM302"
    assert advice_for("GM999") == "no automatic fix; see `mend rules GM999`"



def _report_calls():
    """Every ``ctx.report(...)`` call of the detectors, with its ``file:line``."""
    import ast

    for path in sorted((Path(__file__).resolve().parents[2] / "rewrites" / "rules").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "report":
                yield f"{path.name}:{node.lineno}", node


def _fields(template: str) -> set[str]:
    import string

    return {name for _text, name, _spec, _conv in string.Formatter().parse(template) if name is not None}


def test_finding_messages_live_in_the_records():
    """One fact, one home: a detector passes ``ctx.report`` the code, the node, the variant and
    the template's fields, never the wording (no string literal, no f-string); the record of
    every code reported holds the message and hint template of each variant it is reported
    with, whose fields are exactly the ones the call passes; and no record holds a template no
    detector reports."""
    import ast

    calls = list(_report_calls())
    assert len(calls) >= 40, len(calls)  # the walk sees the detectors
    reported: set[tuple[str, str]] = set()
    for where, call in calls:
        assert len(call.args) == 2 and not any(isinstance(a, ast.Starred) for a in call.args), \
            f"{where}: pass the code and the node; the message and hint are the record's templates"
        code = call.args[0]
        assert isinstance(code, ast.Constant) and isinstance(code.value, str), f"{where}: a literal rule code"
        rule = RULES_BY_CODE.get(code.value)
        assert rule is not None and rule.static, f"{where}: {code.value} is no static rule"
        kw = {k.arg: k.value for k in call.keywords}
        assert None not in kw, f"{where}: name each field (no **mapping)"
        for name, value in kw.items():
            assert not any(isinstance(n, ast.JoinedStr) for n in ast.walk(value)), \
                f"{where}: an f-string ({name}=...) is a message written at the call"
            if name != "variant":
                assert not (isinstance(value, ast.Constant) and isinstance(value.value, str)), \
                    f"{where}: the text {value.value!r} ({name}=...) belongs in the template"
        kw.pop("needs_root", None)
        variant = kw.pop("variant", None)
        variants = [""] if variant is None else \
            [n.value for n in ast.walk(variant) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        assert variants, f"{where}: the variant must be a literal name (or a choice of literals)"
        for v in variants:
            if v:
                assert v in rule.messages, f"{where}: {rule.code} has no message variant {v!r}"
            template = rule.messages[v] if v else rule.message
            hint = rule.hints.get(v, rule.hint)
            assert template and hint, f"{where}: {rule.code} {v!r} needs a message and a hint template"
            assert _fields(template) | _fields(hint) == set(kw), \
                f"{where}: the fields passed, {sorted(kw)}, are not the templates' of {rule.code} {v!r}"
            reported.add((rule.code, v))
    held = {(r.code, v) for r in RULES for v in (r.messages or ([""] if r.message else []))}
    assert held == reported, (held - reported, reported - held)
    assert {r.code for r in RULES if r.static} == {c for c, _v in reported}, "a static rule no detector reports"
    for r in RULES:
        assert not (r.message and r.messages), f"{r.code}: one default message or named variants, not both"
        assert set(r.hints) <= set(r.messages), r.code
        for v in r.messages or ([""] if r.message else []):
            fields = _fields(r.messages[v] if v else r.message) | _fields(r.hints.get(v, r.hint))
            r.render(v, **{f: f"<{f}>" for f in fields})  # well-formed templates
    gm101 = RULES_BY_CODE["GM101"]
    assert gm101.render(test="m.any()") == ("`if m.any()` branches on a tensor value", gm101.hint)
    (finding,) = [f for f, _key, _root in scan_source(gm101.invalid[0], path="case.py").findings]
    assert (finding.message, finding.fix_hint) == gm101.render(test="(x > 0).any()")

def test_rule_docs_are_current(tmp_path):
    # docs/rules/ is generated from the rule modules; a rule edited without regenerating
    # leaves users reading the old fix advice
    from pathlib import Path

    from graphmend.cli.rules import write_docs

    write_docs(str(tmp_path))
    shipped = Path(__file__).resolve().parents[2] / "docs" / "rules"
    stale = [p.name for p in sorted(tmp_path.iterdir())
             if not (shipped / p.name).exists() or (shipped / p.name).read_text() != p.read_text()]
    assert not stale, f"regenerate docs/rules ({stale}): python -c 'from graphmend.cli.rules import write_docs; write_docs()'"


# -- every torch API the catalog names exists on the installed torch ------------------------

ROOT = Path(__file__).resolve().parents[2]
# a dotted torch name; "\x00" stands for an f-string's {placeholder}: a name running into one
# ("torch.logical_{op}") is completed at run time and is not checked here
TORCH_NAME = re.compile(r"\btorch(?:\.\w+)+(?!\w|\x00)")
TENSOR_METHOD = re.compile(r"\bTensor\.(\w+)|`\.(\w+)\(")


def _resolves(dotted: str) -> bool:
    """``torch.a.b.c`` attribute by attribute, importing a submodule where an attribute is
    not there yet (``torch._higher_order_ops``)."""
    import importlib

    import torch

    obj, parts = torch, dotted.split(".")
    for i, part in enumerate(parts[1:], start=2):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            return False
    return True


def _string_constants(path: Path) -> list[str]:
    """Every string literal of a module, an f-string with its placeholders as "\\x00"; not
    the tables of names a detector recognises (``{"torch._dynamo.eval_frame.disable", ...}``:
    spellings of older torch versions, matched, never suggested)."""
    import ast

    def name_table(node) -> bool:
        return isinstance(node, (ast.Set, ast.Tuple, ast.List)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) and re.fullmatch(r"[\w.]+", e.value)
            for e in node.elts)

    out = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    skip |= {id(e) for n in ast.walk(tree) if name_table(n) for e in n.elts}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "\x00" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            out.append(node.value)
    return out


def _catalog_texts() -> list[str]:
    """What users read as advice: the rule records, mend fix's advice, the rule docs, and every
    string of the detectors and fixes (the hints they report, the fix descriptions)."""
    texts = [t for r in RULES for t in (r.summary, r.why, r.fix, r.preconditions, r.limits, r.advice)]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs" / "rules").glob("*.md"))]
    for folder in ("rewrites", "rewrites/rules", "rewrites/fixes"):
        for p in sorted((ROOT / folder).glob("*.py")):
            texts += _string_constants(p)
    return texts


def test_every_torch_name_the_catalog_suggests_exists():
    import torch

    texts = _catalog_texts()
    names = {m for t in texts for m in TORCH_NAME.findall(t)}
    assert "torch.where" in names and "torch._dynamo.config.capture_scalar_outputs" in names  # the scan sees them
    missing = sorted(n for n in names if not _resolves(n))
    assert not missing, f"hints name torch APIs that torch {torch.__version__} does not have: {missing}"
    methods = {a or b for t in texts for a, b in TENSOR_METHOD.findall(t)}
    assert {"item", "tolist"} <= methods
    assert not sorted(m for m in methods if not hasattr(torch.Tensor, m))


def test_gm604_hint_names_real_torch_apis_for_every_numpy_function():
    """The hint is built from the NumPy name the code calls: for every public NumPy function,
    what it names must exist (np.interp once became ``torch.interp``)."""
    import numpy as np

    from rewrites.rules.gm6_unsupported import TORCH_FOR_NUMPY, TORCH_SAME_NAME, numpy_hint

    functions = sorted(n for n in dir(np) if not n.startswith("_") and callable(getattr(np, n)))
    functions += sorted(TORCH_FOR_NUMPY) + sorted(TORCH_SAME_NAME)  # names this NumPy may lack
    bad = {n: numpy_hint(n) for n in functions
           if not all(_resolves(t) for t in TORCH_NAME.findall(numpy_hint(n)))}
    assert not bad, bad
    assert "torch.interp" not in numpy_hint("interp") and "torch.searchsorted" in numpy_hint("interp")
    assert numpy_hint("exp") == "torch.exp"
    # the scan reports it
    result = scan_source(RULES_BY_CODE["GM604"].invalid[1], path="case.py")
    (hint,) = [f.fix_hint for f, _key, _root in result.findings if f.rule == "GM604"]
    assert "torch.searchsorted" in hint and "torch.lerp" in hint
