"""Mapping a dynamic break to a rule code (docs/internals.md): gb_type first, then
regexes over Dynamo's text, then the user's source line. The tables are the rule records'
own (``Rule.gb_types``, ``message_patterns``, ``source_patterns``); what needs more than a
table (a branch, a data-dependent shape, a buffer write) is decided here. No torch import."""

from __future__ import annotations

import re
from typing import Optional, Sequence

from rewrites.rules import RULES

_BRANCH_TYPES = ("Data-dependent branching", "generic_jump", "data dependent jump",
                 "Data-dependent assertion")
# gb_type (exact) -> rule, for the types whose meaning needs no further look.
_BY_GB_TYPE = {gb: r.code for r in RULES for gb in r.gb_types}
# (regex over the whole message, rule) in code order; first match wins.
_TEXT_RULES: Sequence[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.I), r.code) for r in RULES for p in r.message_patterns]
# (regex over the source line, rule) in code order: when Dynamo's text named no rule.
_SOURCE_RULES: Sequence[tuple[re.Pattern[str], str]] = [
    (re.compile(p), r.code) for r in RULES for p in r.source_patterns]
_BUFFER_ASSIGN = re.compile(r"self\.\w+\s*=(?!=)")
_DYNAMIC_SHAPE = re.compile(r"dynamic[ _-]shape operator|output shape depends on|data-dependent output shape|"
                            r"DynamicOutputShapeException", re.I)
# Operators Dynamo names in its text (the developer context: ``aten.nonzero.default``), in
# the order they are tried on the source line when the text names none.
_SHAPE_OPS: Sequence[tuple[re.Pattern[str], str]] = [
    (re.compile(r"masked_select"), "GM505"),
    (re.compile(r"repeat_interleave"), "GM504"),
    (re.compile(r"unique"), "GM503"),
    (re.compile(r"nonzero|argwhere"), "GM501"),
    (re.compile(r"aten\.index\b|index\.Tensor|aten\.index_put"), "GM502"),
]
_NONZERO_CALL = re.compile(r"\.nonzero\(|\bnonzero\(|\bargwhere\(")
_WHERE_CALL = re.compile(r"\bwhere\(")
# ``x[...]``, ``f(x)[...]``, ``t[...][...]``: a subscript (a mask index runs aten.nonzero)
_SUBSCRIPT = re.compile(r"[\w)\]]\s*\[")
_SUBSCR_OPCODE = re.compile(r"\b(BINARY_SUBSCR|STORE_SUBSCR)\b|a binary subscript|subscript", re.I)
# Data-dependent operators whose non-Tensor result (``torch.equal``'s bool) feeds Python:
# the break is the condition's, not a value read (those are ``_local_scalar_dense``).
_DATA_DEPENDENT_OP = re.compile(r"Data dependent operator|non-Tensor output whose value is dependent", re.I)
_SCALAR_READ_SRC = re.compile(r"\.item\(|\.tolist\(|\.numpy\(|(?<![\w.])(int|float|bool)\(")
_CONDITION_SRC = re.compile(r"^(if|elif|while|assert)\b|\bif\b.+\belse\b")
# ``x[i]`` by a computed index (not a constant, a slice or a negative number): a 0-d tensor there is
# read back by ``__index__`` (``aten._local_scalar_dense``)
_COMPUTED_INDEX = re.compile(r"[\w)\]]\s*\[\s*(?![\d\-+:'\"\].])")


def _one_arg_where(src: str) -> bool:
    """``torch.where(cond)`` (one argument: the nonzero form), not ``where(c, a, b)``."""
    for m in _WHERE_CALL.finditer(src):
        depth, i = 1, m.end()
        while i < len(src) and depth:
            ch = src[i]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == "," and depth == 1:
                break
            i += 1
        if depth == 0:
            return True
    return False


def _shape_rule(message: str, src: str) -> str:
    """A dynamic-shape break. Dynamo names the aten op, but a boolean-mask index ``x[mask]``
    runs ``aten.nonzero`` too: the source line tells it from a ``nonzero`` call."""
    named = next((rule for rx, rule in _SHAPE_OPS if rx.search(message)), None)
    if named in ("GM505", "GM504", "GM503"):
        return named
    if named is None:  # a wording that names no op: the calls on the line may
        for rx, rule in _SHAPE_OPS[:3]:
            if rx.search(src):
                return rule
    if _NONZERO_CALL.search(src) or _one_arg_where(src):
        return "GM501"
    if _SUBSCRIPT.search(src) or (not src and _SUBSCR_OPCODE.search(message)):
        return "GM502"
    return named or "GM501"


def _branch_rule(source_line: str, following: Sequence[str]) -> str:
    s = source_line.strip()
    if s.startswith("assert ") or s.startswith("assert("):
        return "GM401"
    if s.startswith("raise "):
        return "GM402"
    if s.startswith("while "):
        return "GM104"
    if s.startswith(("if ", "elif ", "if(")):
        body = next((f.strip() for f in following if f.strip() and not f.strip().startswith("#")), "")
        if body.startswith("raise ") or body == "raise":
            return "GM402"
        return "GM101"
    if re.search(r"\bif\b.+\belse\b", s):
        return "GM102"
    if re.search(r"\b(and|or|not)\b", s):
        return "GM103"
    return "GM101"


def classify(gb_type: Optional[str], message: str, source_line: Optional[str] = None,
             following_lines: Sequence[str] = (), frame_skipped: bool = False) -> str:
    """The rule code for one break. ``message`` is Dynamo's core text (reason, explanation,
    hints, context); ``following_lines`` are the source lines after the break line (to tell
    ``if cond: raise`` from a plain branch)."""
    src = source_line or ""
    gb = (gb_type or "").strip()
    first = message.strip().splitlines()[0] if message.strip() else ""
    if any(gb.startswith(t) or first.startswith(t) for t in _BRANCH_TYPES) or \
            re.search(r"data[- ]dependent (branching|jump)|generic_jump", first, re.I):
        rule = _branch_rule(src, following_lines)
        if rule == "GM101" and _BUFFER_ASSIGN.match(src.strip()):
            return "GM606"  # torch 2.11: Module.__setattr__'s nn.Buffer check branches on the value
        return rule
    if _DYNAMIC_SHAPE.search(gb) or _DYNAMIC_SHAPE.search(message):
        return _shape_rule(message, src)
    if (_DATA_DEPENDENT_OP.search(gb) or _DATA_DEPENDENT_OP.search(first)) and \
            "_local_scalar_dense" not in message and not _SCALAR_READ_SRC.search(src) and \
            _CONDITION_SRC.search(src.strip()):
        return _branch_rule(src, following_lines)
    if (_DATA_DEPENDENT_OP.search(gb) or _DATA_DEPENDENT_OP.search(first)) and "_local_scalar_dense" in message \
            and not _SCALAR_READ_SRC.search(src) and _COMPUTED_INDEX.search(src):
        return "GM303"  # a 0-d tensor used as an index, read back to index with
    if _BUFFER_ASSIGN.match(src.strip()) and "python_type" in gb + first:
        return "GM606"  # Module.__setattr__'s nn.Buffer check (the message names no buffer)
    rule = _BY_GB_TYPE.get(gb)
    if rule is None:
        for rx, r in _TEXT_RULES:
            if rx.search(message):
                rule = r
                break
    if rule == "GM301" and re.search(r"\b(int|float|bool)\(", src) and ".item(" not in src:
        return "GM303"
    if rule in ("GM203", "GM605", None) and re.search(r"\bwarnings\.warn\(|\bwarn\(", src):
        return "GM203"  # warnings.warn is a skipped function to Dynamo: the source tells
    if rule in ("GM605", None) and re.search(r"\blog(ger|ging)?\.(debug|info|warning|warn|error|exception|critical|log)\(|warning_once\(", src):
        return "GM202"
    if rule:
        return rule
    # The text did not say; the source line may (e.g. a torch whose wording is new to us).
    for rx, r in _SOURCE_RULES:
        if rx.search(src):
            return r
    return "GM901" if frame_skipped else "GM900"


# -- recompiles (GM7xx) -----------------------------------------------------------------

# (regex over the failed guard, rule) in code order: the records' ``guard_patterns``
_GUARD_RULES: Sequence[tuple[re.Pattern[str], str]] = [
    (re.compile(p), r.code) for r in RULES for p in r.guard_patterns]
_OLDER = re.compile(r"\s*\(\d+ older compiled version\(s\) failed their guards too\)$")
# a tensor's name may hold quotes itself: ``tensor 'kwargs['input_ids']' size mismatch``
_SIZE = re.compile(r"tensor '(?P<name>.+?)' size mismatch at index (?P<dim>\d+)")
_TENSOR = re.compile(r"tensor '(?P<name>.+?)' (?P<what>\w+) mismatch(?: at index (?P<dim>\d+))?")
_GLOBAL = re.compile(r"GLOBAL_STATE changed: (?P<what>[\w ,]+)")
_CHECK_ID = re.compile(r"___check_(?:obj|type)_id\((?P<obj>[^,]+),")
_OPERATORS = re.compile(r"\s*(?:==|!=|<=|>=|<|>|\bis not\b|\bis\b)\s*")
_NUMBER = re.compile(r"^-?[\d.e+-]+$|^(?:True|False|None)$")
_NOT = re.compile(r"^not (?P<name>.+)$")
_LOCAL = re.compile(r"L\['(?P<name>[^']+)'\]")
_MODULES = re.compile(r"\._modules\['(?P<name>[^']+)'\]")
_SYM_SIZE = re.compile(r"(?P<expr>[\w.\[\]'\"]+\.size\(\)\[\d+\])")
# "expected type of 'self.dt' to be a tensor type, ' but found <class 'NoneType'>"
_TYPE = re.compile(r"^expected type of '(?P<expr>.+?)' to be a tensor type")


def guard_text(reason: str) -> str:
    """The newest failed guard, without the note on older compiled versions."""
    return _OLDER.sub("", reason).strip()


def python_name(expr: str) -> str:
    """A guard's source as the user's code spells it: ``L['self'].step`` -> ``self.step``,
    ``self._modules['act']`` -> ``self.act``."""
    expr = _LOCAL.sub(lambda m: m.group("name"), expr.strip())
    return _MODULES.sub(lambda m: "." + m.group("name"), expr)


def guarded_expression(reason: str) -> Optional[str]:
    """The expression whose value the failed guard holds (``self.step``, ``x.shape[1]``,
    ``len(xs)``, ``grad_mode``), or None where the guard names none."""
    g = guard_text(reason)
    m = _SIZE.search(g)
    if m:
        return f"{m.group('name')}.shape[{m.group('dim')}]"
    m = _TENSOR.search(g)
    if m:
        dim = m.group("dim")
        if m.group("what") == "rank":  # the number of dimensions, as the code reads it
            return f"{m.group('name')}.dim()"
        return f"{m.group('name')}.{m.group('what')}" + (f"({dim})" if dim is not None else "")
    m = _GLOBAL.search(g)
    if m:
        return m.group("what").strip()
    m = _TYPE.search(g)
    if m:
        return python_name(m.group("expr"))
    m = _CHECK_ID.search(g)
    if m:
        return python_name(m.group("obj"))
    m = _SYM_SIZE.search(g)
    if m:
        return python_name(m.group("expr")).replace(".size()[", ".shape[")
    m = _NOT.match(g)
    if m:
        return python_name(m.group("name"))
    # ``self.step == 3``, ``2 <= n.item()``: the side that is not a constant
    sides = [x for x in _OPERATORS.split(g) if x and not _NUMBER.match(x)]
    if len(sides) >= 1 and len(sides) < len(_OPERATORS.split(g)):
        return python_name(sides[0])
    return None


def classify_recompile(reason: str) -> str:
    """The GM7xx rule of a failed guard (Dynamo's words); GM799 when none matches."""
    g = guard_text(reason)
    for pattern, code in _GUARD_RULES:
        if pattern.search(g):
            return code
    return "GM799"


def classify_recompiles(recompiles: Sequence) -> None:
    """Set each recompile's ``rule`` and ``expression``, in the order they happened. The
    first size mismatch of a dimension of one function is automatic dynamic shapes at work
    (Dynamo makes the size dynamic: one recompile, expected): no rule (""); a size of that
    dimension that recompiles again was kept static (GM701). A recompile at the limit is
    GM706 whatever its guard (the frame fell back to eager). Each version of the entry's code
    that another frame compiled in the first call (a decorator's wrapper run by several
    functions: ``Recompile.reentered``) meets that first size change once more."""
    versions: dict = {}
    for rc in recompiles:
        if rc.call == 1 and rc.reentered:
            versions[(rc.function, rc.file, rc.line)] = versions.get((rc.function, rc.file, rc.line), 1) + 1
    seen: dict = {}
    for rc in recompiles:
        rc.rule = "GM706" if rc.limit else classify_recompile(rc.reason)
        rc.expression = guarded_expression(rc.reason)
        if rc.expression and not rc.guarded and _TYPE.search(guard_text(rc.reason)) and rc.file and rc.line:
            # Dynamo gives this guard no user stack: the function's first line that reads it
            found = first_read(rc.file, rc.line, rc.expression)
            if found:
                rc.guard_file, (rc.guard_line, rc.guard_source) = rc.file, found
        m = _SIZE.search(guard_text(rc.reason))
        if m and not rc.limit:
            key = (rc.function, rc.file, rc.line, m.group("name"), m.group("dim"))
            if seen.get(key, 0) < versions.get(key[:3], 1):
                seen[key] = seen.get(key, 0) + 1
                rc.rule, rc.expected = "", True


def first_read(file: str, def_line: int, expression: str) -> Optional[tuple[int, str]]:
    """(line, its text) of the first line of the function whose code starts at ``def_line`` (its
    first decorator's line, or, for a resume function, the line it resumes at) that reads
    ``expression`` (``self.dt``; for ``self.outputs[1]``, which the code may index otherwise,
    ``self.outputs``), or None."""
    import ast
    import linecache

    lines = linecache.getlines(file)
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    around = [n for n in functions if min([n.lineno, *(d.lineno for d in n.decorator_list)]) <= def_line
              <= (n.end_lineno or n.lineno)]
    if not around:
        return None
    fn = max(around, key=lambda n: n.lineno)  # the innermost
    wanted = [expression]
    while wanted[-1].endswith("]") and "[" in wanted[-1]:
        wanted.append(wanted[-1][:wanted[-1].rindex("[")])
    for expr in wanted:
        reads = [n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Attribute, ast.Subscript, ast.Name))
                 and isinstance(n.ctx, ast.Load) and n.lineno >= def_line and ast.unparse(n) == expr]
        if reads:
            return min(reads), lines[min(reads) - 1].strip()
    return None
