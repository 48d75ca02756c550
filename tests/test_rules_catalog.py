"""Every rule's own VALID / INVALID cases, and the catalog against docs/internals.md."""

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
    text = (Path(__file__).resolve().parents[1] / "docs" / "internals.md").read_text()
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


def test_catalog_for_reports():
    from rewrites import catalog

    info = catalog.rule_info("GM201")
    assert info.name == "print-call" and info.help_uri.startswith("https://")


def test_rule_docs_are_current(tmp_path):
    # docs/rules/ is generated from the rule modules; a rule edited without regenerating
    # leaves users reading the old fix advice
    from pathlib import Path

    from graphmend.cli.rules import write_docs

    write_docs(str(tmp_path))
    shipped = Path(__file__).resolve().parent.parent / "docs" / "rules"
    stale = [p.name for p in sorted(tmp_path.iterdir())
             if not (shipped / p.name).exists() or (shipped / p.name).read_text() != p.read_text()]
    assert not stale, f"regenerate docs/rules ({stale}): python -c 'from graphmend.cli.rules import write_docs; write_docs()'"


# -- every torch API the catalog names exists on the installed torch ------------------------

ROOT = Path(__file__).resolve().parents[1]
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
    from rewrites.fixes.gm6_advice import ADVICE

    texts = [t for r in RULES for t in (r.summary, r.why, r.fix, r.preconditions, r.limits)]
    texts += list(ADVICE.values())
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
