"""Static findings x dynamic breaks: one report from two sources.

A finding is ``confirmed`` when a dynamic break of any target lies at the same file and line
and the two rule families are compatible (a condition on ``t.item()`` is GM101 statically
and may be classified GM3xx or GM1xx dynamically); otherwise it stays ``potential``.

A break keeps the rule its capture gave it (``tracer.classify``, from Dynamo's own fields):
nothing here assigns one. A GM9xx break (no rule explained it dynamically) that a static
finding on its line explains is merged into that finding's issue, which names the finding's
rule (``explaining_rule``); the others stay GM9xx issues with Dynamo's words.

``diagnose`` then merges both sources into ``Report.issues``, one per cause and place (what
every format lists), and tells the costliest fact: the frames Dynamo skipped because of a
break in one of their loops, and the findings inside them it never reached.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

from graphmend.core.model import (CONFIRMED, DYNAMIC, POTENTIAL, UNREACHED, Break, Issue, Report, Said,
                             SkippedFrame)
from rewrites.rules import NAMING_ORDER, OVERLAPS, get_rule
from rewrites.rules.base import SAFE, UNSAFE

def _norm(path: Optional[str]) -> Optional[str]:
    if not path:
        return None
    try:
        return os.path.normcase(os.path.realpath(path))
    except (OSError, ValueError):
        return path


def compatible(finding_rule: str, break_rule: str) -> bool:
    fam, bfam = finding_rule[:3], break_rule[:3]
    if bfam == "GM9":
        return True  # Dynamo's words did not map to a rule; the line says which one it is
    return bfam in OVERLAPS.get(fam, {fam})


def correlate(report: Report) -> None:
    breaks_at: dict[tuple[str, int], list[Break]] = {}
    for target in report.targets:
        for b in target.breaks:
            f = _norm(b.file)
            if f is not None and b.line is not None:
                breaks_at.setdefault((f, b.line), []).append(b)
    for finding in report.findings:
        hits = breaks_at.get((_norm(finding.file), finding.line), ())
        finding.status = CONFIRMED if any(compatible(finding.rule, b.rule) for b in hits) else POTENTIAL


def explaining_rule(b: Break, static_rules: list[str]) -> str:
    """The rule that names ``b``'s issue: its own, unless Dynamo's words mapped to no rule
    (GM9xx) and a static finding on its line says which one it is (``static_rules``, the
    rules of the findings there), the first of them by family priority."""
    if b.rule.startswith("GM9") and b.kind != "frame_skipped" and static_rules:
        return min(static_rules, key=_rank)
    return b.rule


# -- one issue per cause and place --------------------------------------------------------

def _rank(rule: str) -> tuple:
    return (NAMING_ORDER.index(rule[:3]) if rule[:3] in NAMING_ORDER else 99, rule)


@dataclass
class _Group:
    place: tuple  # (file, line) normalised, or (None, reason) for a break without a user frame
    rule: str  # the dynamic rule, or the first static finding's
    breaks: list[tuple[int, int]] = field(default_factory=list)
    findings: list[int] = field(default_factory=list)
    lowering: list[tuple[int, int]] = field(default_factory=list)  # (target, failure): a GM608 issue


def diagnose(report: Report, read_sources: bool = True, enabled: Callable[[str], bool] = lambda code: True) -> None:
    """Fill ``report.issues``: every static finding and dynamic break merged into one issue
    per cause and place, each with its fan-out, its fixability, and, for a break that made
    Dynamo skip a frame, that frame and the findings it kept Dynamo from reaching.

    ``read_sources``: read the skipped frames' sources to name the function, find its loop
    and the findings inside it (a stage does; ``with_issues``, completing a saved report
    before it is rendered, does not). ``enabled``: whether a recompile rule is selected
    (``--select`` / ``--ignore``; a break is reported whatever its rule, as Dynamo saw it)."""
    norm = _norm if read_sources else (lambda p: p or None)
    findings, targets = report.findings, report.targets
    static_rules: dict[tuple, list[str]] = {}
    for finding in findings:
        static_rules.setdefault((norm(finding.file), finding.line), []).append(finding.rule)
    groups: list[_Group] = []
    dynamic_at: dict[tuple, list[_Group]] = {}
    for ti, t in enumerate(targets):
        for bi, b in enumerate(t.breaks):
            f = norm(b.file)
            place = (f, b.line) if f is not None and b.line is not None else (None, b.reason)
            rule = explaining_rule(b, static_rules.get(place, []))
            group = next((g for g in dynamic_at.get(place, ()) if g.rule == rule), None)
            if group is None:
                group = _Group(place, rule)
                groups.append(group)
                dynamic_at.setdefault(place, []).append(group)
            group.breaks.append((ti, bi))
    # graphs Inductor could not compile (--lower): one issue per op and user line; no static
    # finding explains one, so none merges into it
    lowering_at: dict[tuple, _Group] = {}
    for ti, t in enumerate(targets):
        for li, lf in enumerate(t.lowering or ()):
            f = norm(lf.file)
            place = (f, lf.line) if f is not None and lf.line is not None else (None, lf.reason)
            group = lowering_at.get((place, lf.op))
            if group is None:
                group = lowering_at[(place, lf.op)] = _Group(place, lf.rule)
                groups.append(group)
            group.lowering.append((ti, li))
    static_at: dict[tuple, list[_Group]] = {}
    for fi, finding in enumerate(findings):
        place = (norm(finding.file), finding.line)
        candidates = [g for g in dynamic_at.get(place, ()) if compatible(finding.rule, g.rule)]
        if candidates:  # the break it explains: the same rule first, then the same family
            best = min(candidates, key=lambda g: (g.rule != finding.rule, g.rule[:3] != finding.rule[:3]))
            best.findings.append(fi)
            continue
        # a second pattern of one cause on one line (`if x.item() > 0`: GM101 and GM301)
        group = next((g for g in static_at.get(place, ())
                      if compatible(g.rule, finding.rule) or compatible(finding.rule, g.rule)), None)
        if group is None:
            group = _Group(place, finding.rule)
            groups.append(group)
            static_at.setdefault(place, []).append(group)
        group.findings.append(fi)

    issues = [_issue(report, g) for g in groups]
    recompiled = [g for g in _recompile_groups(report, norm) if enabled(g.rule)]
    issues += [_recompile_issue(report, g) for g in recompiled]
    groups += [_Group(g.place, g.rule) for g in recompiled]
    root = os.path.join(report.root, "") if report.root else ""

    def place(i: int) -> tuple:  # the analysed tree first, then installed packages, then no location
        it = issues[i]
        return (it.file is None, not (root and (it.file or "").startswith(root)), it.file or "", it.line or 0,
                it.col or 0, it.rule)

    order = sorted(range(len(issues)), key=place)
    report.issues = [issues[i] for i in order]
    ordered_groups = [groups[i] for i in order]
    _skipped_frames(report, ordered_groups, norm, read_sources)
    _link_fixes(report, norm)


def _link_fixes(report: Report, norm) -> None:
    """Each fix proposed (``mend fix``) to the issue it repairs: the issue at the fix's first
    line, else the first one inside its span, in that file; so that every format shows a fix
    with its issue (SARIF's ``fixes`` sit on the result) without matching places itself."""
    for i in report.issues:
        i.fixes = []
    at: dict[tuple, list[int]] = {}
    for n, i in enumerate(report.issues):
        if i.file is not None and i.line is not None:
            at.setdefault((norm(i.file), i.line), []).append(n)
    for k, f in enumerate(report.fixes):
        file = norm(f.file)
        span = [f.line] + list(range(f.line + 1, (f.end_line or f.line) + 1))
        home = next((at[(file, line)] for line in span if (file, line) in at), None)
        if home:
            issue = next((n for n in home if report.issues[n].rule == f.rule), home[0])
            report.issues[issue].fixes.append(k)


def with_issues(report: Report) -> Report:
    """``report`` with its issues, for rendering: itself when it has them (or nothing to
    merge), else a copy whose issues are merged from its findings and breaks alone, reading
    no file. Issues are missing from a report saved before schema 1.1 and from one a stage
    built without diagnosing (``mend check``: it lists what is new)."""
    if report.issues or not (report.findings or any(t.breaks or t.lowering for t in report.targets)):
        return report
    report = dataclasses.replace(report, issues=[], summary=None)  # the summary counts issues
    diagnose(report, read_sources=False)
    return report


def _issue(report: Report, g: _Group) -> Issue:
    if g.lowering:
        return _lowering_issue(report, g)
    fs = sorted((report.findings[i] for i in g.findings), key=lambda f: _rank(f.rule))
    bs = [report.targets[ti].breaks[bi] for ti, bi in g.breaks]
    labels = list(dict.fromkeys(_label(report.targets[ti]) for ti, _ in g.breaks))
    # the dynamic rule is what Dynamo said (GM9xx, unexplained, yielded to a static one when the
    # group was made); static findings alone: the first by family priority
    rule = g.rule if bs else fs[0].rule
    # a GM9xx break a finding explains adds no code of its own
    codes = list(dict.fromkeys([rule] + [f.rule for f in fs] + [b.rule for b in bs if b.rule == rule
                                                                 or not b.rule.startswith("GM9")]))
    first = fs[0] if fs else None
    # Dynamo's words from a break that has them all (a graph break before a frame-skip record)
    brk = min(bs, key=lambda b: (b.kind != "graph_break", not b.explanation, len(b.stack) == 0)) if bs else None
    kinds = [r.fix_kind for r in map(get_rule, codes) if r is not None]
    status = CONFIRMED if fs and bs else DYNAMIC if bs else POTENTIAL
    modes = {b.only_in_mode for b in bs}
    return Issue(
        rule=rule, category=(first.category if first and rule == first.rule else brk.category if brk else ""),
        status=status, message=first.message if first else brk.reason,
        file=first.file if first else brk.file, line=first.line if first else brk.line,
        col=first.col if first else brk.col,
        end_line=first.end_line if first else None, end_col=first.end_col if first else brk.end_col,
        source_line=first.source_line if first and first.source_line else brk.source_line if brk else None,
        function=first.function if first and first.function else brk.function if brk else None,
        fix_hint=first.fix_hint if first else "", also=codes[1:], said=Said.of_break(brk) if brk else Said(),
        # a frame-skip record is the same break seen from the caller Dynamo gave up on: it adds
        # no occurrence beside the graph breaks of the frame traced on its own
        targets=labels, fan_out=sum(b.occurrences for b in bs if b.kind == "graph_break")
        or sum(b.occurrences for b in bs), counted=any(b.counted for b in bs),
        # a break every mode hit is not "train only", even if one target saw it in one mode
        only_in_mode=modes.pop() if len(modes) == 1 else None,
        phase="backward" if bs and all(b.phase == "backward" for b in bs) else "forward",
        fix=SAFE if SAFE in kinds else UNSAFE if UNSAFE in kinds else None,
        findings=sorted(g.findings), breaks=[[ti, bi] for ti, bi in g.breaks],
    )


def _lowering_issue(report: Report, g: _Group) -> Issue:
    """A graph Inductor could not compile: the op, the user's line, the reason in one line."""
    first = report.targets[g.lowering[0][0]].lowering[g.lowering[0][1]]
    labels = list(dict.fromkeys(_label(report.targets[ti]) for ti, _ in g.lowering))
    rule = get_rule(first.rule)
    what = f"`{first.op}`" if first.op else "a graph"
    return Issue(
        rule=first.rule, category=rule.category if rule else "", status=DYNAMIC,
        message=f"Inductor cannot lower {what}: torch.compile fails here, Dynamo broke nothing",
        file=first.file, line=first.line, source_line=first.source_line, function=first.function,
        said=Said(reason=first.reason), fix_hint=rule.fix if rule else "", targets=labels, fan_out=len(g.lowering),
        op=first.op, lowering=[[ti, li] for ti, li in g.lowering])


@dataclass
class _Recompiled:
    place: tuple  # (file, line) normalised: the guarded line, else the recompiled function's
    rule: str
    recompiles: list[tuple[int, int]] = field(default_factory=list)


def _recompile_groups(report: Report, norm) -> list[_Recompiled]:
    """The recompiles that have a cause (GM7xx; the first size change of a dimension, which
    automatic dynamic shapes make dynamic, has none), one group per cause and place."""
    groups: dict[tuple, _Recompiled] = {}
    for ti, t in enumerate(report.targets):
        for ri, rc in enumerate(t.recompiles):
            if not rc.rule:
                continue
            file, line = rc.place
            place = (norm(file), line)
            g = groups.setdefault((place, rc.rule), _Recompiled(place, rc.rule))
            g.recompiles.append((ti, ri))
    return list(groups.values())


# a size guard's expression on a tensor the user's code names (not Dynamo's ___stack0)
_SIZE_EXPRESSION = re.compile(r"^(?P<tensor>(?!_)[A-Za-z_][\w.]*)\.(?:shape|size\(\))\[(?P<dim>\d+)\]$")


def _recompile_issue(report: Report, g: _Recompiled) -> Issue:
    from graphmend.core.model import SkippedFrame

    from tracer.recorder import function_name

    rcs = [report.targets[ti].recompiles[ri] for ti, ri in g.recompiles]
    first = rcs[0]
    fn = function_name(first.function)  # a resume function by the function it resumes
    guarded = first.guarded
    what = first.expression or "a guarded value"
    limit = g.rule == "GM706"
    message = (f"{fn} reached the recompile limit and runs in eager from then on; the guard that kept "
               f"failing holds {what}" if limit else
               f"{fn} recompiled {len(rcs)} time{'s' if len(rcs) != 1 else ''}: the guard on {what} failed")
    if what.endswith(".__code__") and not limit:  # ___check_obj_id(func.__code__, ...)
        message += (f" (another function, `{what.removesuffix('.__code__')}`, ran through {fn}'s code: a "
                    "decorator's wrapper that wraps several functions)")
    if all(rc.after_break for rc in rcs):
        message += (f"; {fn} is compiled as a frame of its own only because a graph break split a frame "
                    "that called it: with that break fixed, this recompile goes too")
    sized = _SIZE_EXPRESSION.match(first.expression or "") if g.rule == "GM701" else None
    if sized:  # the dimension, named as the code names it
        message += (f"; mark that dimension dynamic before the first call (torch._dynamo.maybe_mark_dynamic("
                    f"{sized['tensor']}, {sized['dim']})) and keep its size out of Python conditions")
    labels = list(dict.fromkeys(_label(report.targets[ti]) for ti, _ in g.recompiles))
    rule = get_rule(g.rule)
    issue = Issue(rule=g.rule, category=rule.category if rule else "recompile", status=DYNAMIC, message=message,
                  file=first.place[0], line=first.place[1],
                  source_line=first.guard_source if guarded else None, function=fn,
                  said=Said(reason=first.reason), targets=labels, fan_out=len(rcs),
                  recompiles=[[ti, ri] for ti, ri in g.recompiles])
    if limit:
        for (ti, _), rc in zip(g.recompiles, rcs):
            label = _label(report.targets[ti])
            frame = next((f for f in issue.skipped if (f.file, f.line) == (rc.file, rc.line)), None)
            if frame is None and rc.file and rc.line:
                frame = SkippedFrame(function=function_name(rc.function), file=rc.file, line=rc.line, limit=True)
                issue.skipped.append(frame)
            if frame is not None and label not in frame.targets:
                frame.targets.append(label)
    return issue


def _label(t) -> str:
    return f"{t.name} [{t.run_mode}]" if t.run_mode == "train" else t.name


def _skipped_frames(report: Report, groups: list[_Group], norm, read_sources: bool) -> None:
    """One SkippedFrame per frame Dynamo gave up on, on the issue whose break made it, with the
    findings in that frame Dynamo never reached (UNREACHED, linked back to the cause)."""
    from tracer.recorder import function_name, resume_line

    sources = _Sources() if read_sources else None
    for index, (issue, g) in enumerate(zip(report.issues, groups)):
        frames: dict[tuple, SkippedFrame] = {}
        for ti, bi in g.breaks:
            b = report.targets[ti].breaks[bi]
            sf = b.skipped_frame
            if b.kind != "frame_skipped" or sf is None:
                continue
            key = (norm(sf.file), sf.line, sf.function)
            frame = frames.get(key)
            if frame is None:
                frame = frames[key] = SkippedFrame(function=function_name(sf.function), file=sf.file, line=sf.line,
                                                   resume_line=resume_line(sf.function))
                issue.skipped.append(frame)
            label = _label(report.targets[ti])
            if label not in frame.targets:
                frame.targets.append(label)
        for (file, _, _), frame in frames.items():
            scope = sources.function_at(frame.file, frame.line, frame.function) if sources else None
            if scope is None:
                continue
            frame.function = scope.qualname
            # the loop the break sits in, or the loop of the frame's call into it
            lines = [b.line for b in _breaks_of(report, g) if b.line and norm(b.file) == file] + \
                [fr.line for b in _breaks_of(report, g) for fr in b.stack if norm(fr.file) == file]
            frame.loop_line = scope.loop_around(lines, frame.resume_line)
            start = frame.resume_line or scope.start
            for j, other in enumerate(report.issues):
                if (j != index and other.status == POTENTIAL and other.line is not None and norm(other.file) == file
                        and start <= other.line <= scope.end):
                    other.status = UNREACHED
                    other.hidden_by = index
                    frame.hides.append(j)
                    for fi in other.findings:
                        report.findings[fi].status = UNREACHED


def _breaks_of(report: Report, g: _Group):
    return [report.targets[ti].breaks[bi] for ti, bi in g.breaks]


@dataclass
class _Scope:
    qualname: str
    start: int
    end: int
    loops: list[tuple[int, int]]  # (first line, last line) of each loop in the body

    def loop_around(self, lines: list[int], resume: Optional[int]) -> Optional[int]:
        inner = [(s, e) for s, e in self.loops for ln in lines if s <= ln <= e]
        if inner:  # the innermost loop holding a line of the break or of the call into it
            return max(inner)[0]
        after = [s for s, _ in self.loops if resume is None or s >= resume]
        return after[0] if after else None


class _Sources:
    """Functions of the skipped frames' files, each file parsed once (unreadable: unknown)."""

    def __init__(self) -> None:
        self._scopes: dict[str, list[_Scope]] = {}

    def function_at(self, path: str, first_line: int, name: str) -> Optional[_Scope]:
        if path not in self._scopes:
            self._scopes[path] = self._parse(path)
        scopes = self._scopes[path]
        from tracer.recorder import function_name

        plain = function_name(name)
        # Dynamo names the code's first line: the first decorator's, as co_firstlineno counts
        exact = [s for s in scopes if s.start == first_line]
        named = [s for s in scopes if s.qualname.rsplit(".", 1)[-1] == plain and s.start <= first_line <= s.end]
        found = exact or named
        return found[0] if found else None

    @staticmethod
    def _parse(path: str) -> list[_Scope]:
        import ast

        from graphmend.core.sources import read_source

        try:
            tree = ast.parse(read_source(path))
        except (OSError, SyntaxError, ValueError, RecursionError, UnicodeDecodeError):
            return []
        out: list[_Scope] = []

        def body_loops(fn) -> list[tuple[int, int]]:
            loops, todo = [], list(ast.iter_child_nodes(fn))
            while todo:
                node = todo.pop()
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    continue  # a nested def is its own frame
                if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                    loops.append((node.lineno, node.end_lineno or node.lineno))
                todo.extend(ast.iter_child_nodes(node))
            return sorted(loops)

        def visit(node, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    qual = f"{prefix}{child.name}"
                    start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    out.append(_Scope(qual, start, child.end_lineno or child.lineno, body_loops(child)))
                    visit(child, qual + ".")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(tree, "")
        return out
