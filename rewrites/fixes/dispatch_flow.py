"""What a dispatch loop does with the rows it gathers (gm5_dispatch): the ``torch.where``
assignment or the masked write it routes by, the scatters that take the rows back, what else
the loop does, and the ``nonzero`` its header iterates over."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from rewrites.fixes.base import Analysis, single
from rewrites.fixes.conditions import Refuse
from rewrites.fixes.facts import FunctionFacts, names_in
from rewrites.fixes.judgements import code, full_name, reduction_over


def _where_assign(stmt: cst.CSTNode) -> Optional[tuple[cst.Assign, list[str], cst.BaseExpression]]:
    """``a, b = torch.where(mask)`` -> (assign, [a, b], mask)."""
    a = single(stmt)
    if not isinstance(a, cst.Assign):
        return None
    if len(a.targets) != 1 or not isinstance(a.targets[0].target, (cst.Tuple, cst.List)):
        return None
    v = a.value
    if not (isinstance(v, cst.Call) and full_name(v.func) == "torch.where" and len(v.args) == 1
            and v.args[0].keyword is None and not v.args[0].star):
        return None
    els = a.targets[0].target.elements
    if not all(isinstance(e.value, cst.Name) for e in els):
        return None
    return a, [e.value.value for e in els], v.args[0].value


def _scatter(small: cst.BaseSmallStatement, idx: set[str]) -> Optional[cst.Call]:
    """``t.index_add_(dim, i, values)`` with ``i`` an index name and a literal ``dim``."""
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
        return None
    c = small.value
    if not (isinstance(c.func, cst.Attribute) and c.func.attr.value == "index_add_" and len(c.args) == 3
            and all(a.keyword is None and not a.star for a in c.args)):
        return None
    d, i = c.args[0].value, c.args[1].value
    dim_ok = isinstance(d, cst.Integer) or (isinstance(d, cst.UnaryOperation) and isinstance(d.expression, cst.Integer))
    return c if dim_ok and isinstance(i, cst.Name) and i.value in idx else None


def _put(small: cst.BaseSmallStatement, mask: str):
    """``x[pre..., <mask>] = v`` -> (x, [pre elements]): a masked write, ``pre`` plain indices."""
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Subscript)):
        return None
    t = small.targets[0].target
    els = list(t.slice)
    if not els or not isinstance(els[-1].slice, cst.Index) or code(els[-1].slice.value) != mask:
        return None
    pre = els[:-1]
    if any(not isinstance(e.slice, cst.Index) or not isinstance(e.slice.value, (cst.Name, cst.Integer))
           for e in pre):
        return None
    return t.value, [e.slice.value for e in pre]


def _mask_element(sub: cst.Subscript, mask: str) -> int:
    """Position of the element of ``sub`` that is exactly the mask, or -1."""
    for i, e in enumerate(sub.slice):
        if isinstance(e.slice, cst.Index) and code(e.slice.value) == mask:
            return i
    return -1


def _skip_if(node: cst.If) -> bool:
    """``if <test>: continue`` with nothing else."""
    body = node.body.body
    return (node.orelse is None and len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine)
            and len(body[0].body) == 1 and isinstance(body[0].body[0], cst.Continue))


class _Flow:
    """The names a dispatch loop derives from its gathers, and its scatters: gathers by the
    index names ``idx`` (``torch.where``), or by the boolean mask whose code is ``mask``."""

    def __init__(self, idx, mask: str = ""):
        self.idx = set(idx)
        self.mask = mask
        self.pair: set[str] = set()
        self.scatters: list[cst.Call] = []
        self.puts: list[cst.Assign] = []
        # what the loop does besides the scatter / masked write, and the names it binds: a
        # loop over every expert instead of those hit must do nothing else an extra pass shows
        self.effects: list[str] = []
        self.bound: set[str] = set()

    def tainted(self, node: cst.CSTNode) -> set[str]:
        out = names_in(node) & (self.idx | self.pair)
        if self.mask and self.mask in code(node):
            out.add(self.mask)
        return out

    def walk(self, stmts) -> None:
        for s in stmts:
            if isinstance(s, cst.SimpleStatementLine):
                for small in s.body:
                    self.small(small)
            elif isinstance(s, cst.If):
                if self.tainted(s.test):
                    if not _skip_if(s):
                        raise Refuse(f"a branch reads the gathered values (`{code(s.test)}`)")
                    continue
                self.walk(s.body.body)
                orelse = s.orelse
                while isinstance(orelse, cst.If):
                    if self.tainted(orelse.test):
                        raise Refuse(f"a branch reads the gathered values (`{code(orelse.test)}`)")
                    self.walk(orelse.body.body)
                    orelse = orelse.orelse
                if orelse is not None:
                    self.walk(orelse.body.body)
            elif self.tainted(s):
                raise Refuse(f"a nested `{type(s).__name__.lower()}` uses the gathered values")
            else:
                self.effects.append(f"a nested `{type(s).__name__.lower()}`")

    def small(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, (cst.Return, cst.Break, cst.Raise)):
            raise Refuse(f"the loop body has a `{type(small).__name__.lower()}`")
        put = _put(small, self.mask) if self.mask else None
        if put is not None:
            dest, pre = put
            if self.tainted(dest) or any(self.tainted(e) for e in pre):
                raise Refuse(f"the masked write's target `{code(small.targets[0].target)}` is itself gathered")
            self.puts.append(small)
            return
        sc = _scatter(small, self.idx)
        if sc is not None:
            if self.tainted(sc.func.value):
                raise Refuse(f"the scatter's target `{code(sc.func.value)}` is itself gathered")
            self.scatters.append(sc)
            return
        used = self.tainted(small)
        red = reduction_over(small, self.tainted) if used else None
        if red:
            raise Refuse(f"`{red}` reduces across the gathered rows (the dense form has every row)")
        if isinstance(small, cst.Assign):
            used = self.tainted(small.value)
            if len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
                if used:
                    raise Refuse(f"a gathered value is written into `{code(small.targets[0].target)}`")
                self.effects.append(code(small))
                return
            name = small.targets[0].target.value
            self.bound.add(name)
            if isinstance(small.value, cst.Name) and small.value.value in self.idx:
                self.idx.add(name)  # ``token_list = token_idx`` (dbrx)
            elif used:
                self.pair.add(name)
            elif name in self.idx | self.pair:
                raise Refuse(f"`{name}` is rebound inside the loop")
            return
        if isinstance(small, cst.AugAssign):
            target = small.target
            if isinstance(target, cst.Name) and target.value in self.pair and not (self.tainted(small.value) & self.idx):
                return  # ``current *= 1 - p`` (nllb): elementwise on the gathered rows
            if used:
                raise Refuse(f"`{code(small)}` mixes gathered values into other state")
            if isinstance(target, cst.Name):
                self.bound.add(target.value)
            else:
                self.effects.append(code(small))
            return
        if used:
            raise Refuse(f"`{code(small)}` uses the gathered values outside the scatter")
        if not isinstance(small, (cst.Pass, cst.Continue)):
            self.effects.append(code(small))


def _nonzero_arg(v: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``x.nonzero()`` / ``torch.nonzero(x)`` (index rows) -> ``x``; also
    ``torch.nonzero(x, as_tuple=True)[0].tolist()`` (positions)."""
    pos = _positions_arg(v)
    if pos is not None:
        return pos
    if not isinstance(v, cst.Call):
        return None
    if isinstance(v.func, cst.Attribute) and v.func.attr.value == "nonzero" and not v.args \
            and full_name(v.func) != "torch.nonzero":
        return v.func.value
    if full_name(v.func) == "torch.nonzero" and len(v.args) == 1 and v.args[0].keyword is None:
        return v.args[0].value
    return None


def _positions_arg(v: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``torch.nonzero(x, as_tuple=True)[0].tolist()`` -> ``x``."""
    if not (isinstance(v, cst.Call) and not v.args and isinstance(v.func, cst.Attribute)
            and v.func.attr.value == "tolist" and isinstance(v.func.value, cst.Subscript)):
        return None
    sub = v.func.value
    if not (len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index)
            and code(sub.slice[0].slice.value) == "0" and isinstance(sub.value, cst.Call)):
        return None
    c = sub.value
    kw = {a.keyword.value: code(a.value) for a in c.args if a.keyword is not None}
    pos = [a for a in c.args if a.keyword is None]
    if full_name(c.func) == "torch.nonzero" and len(pos) == 1 and kw == {"as_tuple": "True"}:
        return pos[0].value
    return None


def _header(an: Analysis, loop: cst.For, facts: FunctionFacts, mask: cst.BaseExpression, flow: _Flow, body_before):
    """The ``nonzero`` a loop iterates over, when iterating every index instead is the same
    program: the loop's only effect is the masked scatter (no other effect, no name it binds
    read after it), and the rows it skips are the ones whose mask is empty (heuristically:
    both read the same tensor)."""
    it = loop.iter
    node = it
    loop_line = an.span(loop)[0]
    if isinstance(it, cst.Name):
        binds = [(l, v) for n, l, v in facts.bindings if n == it.value and l < loop_line]
        if not binds or binds[-1][1] is None:
            return None
        node = binds[-1][1]
        bound_end = an.span(node)[1]
        if any(n == it.value and l > bound_end and l != loop_line for n, l in facts.uses):
            return None  # the index list is read elsewhere too
    arg = _nonzero_arg(node)
    if arg is None:
        return None
    # ``hit = (mask.sum(...) > 0).nonzero()`` or ``v = mask.sum(0); v = nonzero(v)...``: the
    # rows skipped are those of an empty mask when both come from the same tensor
    seen = set(names_in(arg))
    for n, l, v in facts.bindings:
        if n in names_in(arg) and l < loop_line and v is not None:
            seen |= names_in(v)
    root = _root_name(mask)
    if not (seen & ({root} if root else names_in(mask))):
        return None
    before = _Flow(())  # ``expert_layer = self.experts[i]`` ahead of the gather
    before.walk(body_before)
    if flow.effects or before.effects:
        return None
    bound = flow.bound | before.bound | set(names_in(loop.target))
    if any(facts.used_after(n, an.span(loop)[1]) for n in bound):
        return None
    return node, arg


def _root_name(e: cst.BaseExpression) -> str:
    while isinstance(e, (cst.Subscript, cst.Attribute)):
        e = e.value
    return e.value if isinstance(e, cst.Name) else ""


def _stmt_puts(s: cst.CSTNode, mask: str) -> bool:
    return isinstance(s, cst.SimpleStatementLine) and any(_put(x, mask) is not None for x in s.body)
