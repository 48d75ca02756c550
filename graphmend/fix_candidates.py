"""The files ``mend fix`` rewrites and the rewrites planned in them: each file's candidate
(its text, the lines the scan and Dynamo's breaks name, its plans, kept in mend's cache) and
each rewrite's site record, which verification fills in."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from graphmend.core.cache import Cache
from graphmend.core.config import Config
from graphmend.core.model import Break, Report, TargetResult
from graphmend.core.serial import from_dict, to_dict
from graphmend.core.sources import SourceError, SourceText, own_root, users_file
from rewrites.rules import RULES

if TYPE_CHECKING:  # for annotations only: fixing is never imported at run time (no cycle)
    from graphmend.fixing import FixOptions

# derived from the rule records: the rules of Dynamo's "data-dependent branching" (GB0170),
# whose break says a tensor decided a branch at its line, and the dynamic-shape rules, whose
# break says an operator's output shape depends on data there
CONTROL_RULES = tuple(r.code for r in RULES if "GB0170" in r.gb_ids)
SHAPE_RULES = tuple(r.code for r in RULES if r.category == "dynamic-shape")
INDEX_RULES = tuple(r.code for r in RULES if "index" in r.messages)  # a tensor read back to index with
# a rewrite made for one of these must leave its target recompiling less (graphmend.fix_outcomes)
RECOMPILE_RULES = tuple(r.code for r in RULES if r.category == "recompile")
_NUMPY_CALL = re.compile(r"\b(np|numpy)\.\w+\(")


@dataclass
class SiteRecord:
    file: str
    site: object  # rewrites.fixes.base.Site
    trigger: set[int]  # the original lines that selected it
    status: str = ""
    reason: str = ""
    # one (status, reason) per target that ran it: PASS, UNVERIFIED or REJECTED
    outcomes: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a verified fix left behind it
    checks: list[str] = field(default_factory=list)  # what the passing runs proved
    skipped: dict[str, str] = field(default_factory=dict)  # check -> why it could not run

    def partial(self) -> list[str]:
        """What this site's proof lacks: each skipped check that could have seen a difference
        ("check: why"), and its family's caveat ("caveat: ..."); empty: a whole proof."""
        from graphmend.verify.modes import proof_gap

        gaps = [f"{k}: {why}" for k, why in self.skipped.items() if k not in self.checks and proof_gap(k, why)]
        caveat = getattr(self.site, "caveat", "")
        return gaps + ([f"caveat: {caveat}"] if caveat else [])

    def accepted(self, options: "FixOptions") -> bool:
        """Whether the run's flags accept what a partial proof lacks: a skipped check
        --accept-partial, a caveat --unsafe-fixes (which alone plans such a fix)."""
        return all(options.unsafe if g.startswith("caveat: ") else options.accept_partial for g in self.partial())

    def condition_keys(self) -> list[str]:
        """How the verify worker's arm recorder names this site's conditions."""
        return [f"{_real(self.file)}:{c[0]}:{c[1]}" for c in self.site.conditions]


@dataclass
class FileCandidate:
    path: str
    source: SourceText  # the file as read: its text, and how to write a changed text back
    lines: set[int]
    tensor_lines: set[int]
    in_tree: bool
    import_root: Optional[str]
    shape_lines: set[int] = field(default_factory=set)  # Dynamo: data-dependent shape here
    numpy_lines: set[int] = field(default_factory=set)  # Dynamo: a branch's value came from NumPy here
    state_lines: set[int] = field(default_factory=set)  # Dynamo: recompiled on the value of self.<attr> here
    index_lines: set[int] = field(default_factory=set)  # Dynamo: a tensor read into Python to index with here
    sites: list[SiteRecord] = field(default_factory=list)
    refusals: list = field(default_factory=list)
    unsafe: bool = False  # the run asked for unsafe fixes too
    line_length: int = 88  # the project formatter's: the width the fixes are laid out in
    cache: Optional[Cache] = None  # plans of earlier runs (a big file's libcst pass takes seconds)
    _plans: dict = field(default_factory=dict)  # this run's, by their inputs
    _kept: set = field(default_factory=set)  # the memos of _plans read from the cache, not derived

    @property
    def original(self) -> str:
        return self.source.text

    @property
    def label(self) -> str:
        """The path a diff names: relative to the import root for a file outside the tree."""
        return os.path.relpath(self.path, self.import_root) if self.import_root else os.path.relpath(self.path)

    def _inputs(self, lines, rules) -> tuple:
        module = os.path.splitext(os.path.basename(self.path))[0]
        return (sorted(lines), list(rules), sorted(self.tensor_lines), sorted(self.shape_lines),
                sorted(self.numpy_lines), self.unsafe, self.line_length, sorted(self.state_lines),
                sorted(self.index_lines), module)

    def _derive(self, lines, rules):
        from rewrites.fixes import fix_source

        return fix_source(self.original, lines, rules, self.tensor_lines, self.shape_lines, self.numpy_lines,
                          unsafe=self.unsafe, line_length=self.line_length, module=self._inputs(lines, rules)[-1],
                          state_lines=self.state_lines, index_lines=self.index_lines)

    def fix(self, lines, rules):
        """The rewrites of ``lines`` in this file, with what Dynamo said about them."""
        inputs = self._inputs(lines, rules)
        memo = repr(inputs)
        if memo in self._plans:
            return self._plans[memo]
        cache = self.cache if self.cache is not None and self.cache.enabled else None
        key = cache.key("plan", self.original, inputs) if cache else None
        kept = cache.get("plan", key, _plan_of(self.original)) if cache and key else None
        if kept is not None:
            r = kept
            self._kept.add(memo)
        else:
            r = self._derive(lines, rules)
            if cache and key:
                cache.put("plan", key, {"new_source": r.new_source, "applied": [to_dict(x) for x in r.applied],
                                        "refused": [to_dict(x) for x in r.refused], "error": r.error})
        self._plans[memo] = r
        return r

    def rederived(self, lines, rules) -> bool:
        """Whether the plan of ``lines`` is the one mend derives now. One read from the cache
        is derived again before it is written: an entry is only data, and whoever could
        change it would choose what ``--write`` writes. A mismatch puts the derived plan in
        its place (what the verdicts judged was the other one)."""
        memo = repr(self._inputs(lines, rules))
        r = self.fix(lines, rules)
        if memo not in self._kept:
            return True
        self._kept.discard(memo)
        fresh = self._derive(lines, rules)
        if fresh.new_source == r.new_source and fresh.error == r.error:
            return True
        self._plans[memo] = fresh
        return False


def _plan_of(original: str):
    """A kept plan entry -> FixResult; raises (a cache miss) for an entry of another shape."""

    def convert(kept: dict):
        from rewrites.fixes import FixResult
        from rewrites.fixes.base import Refusal, Site

        if not isinstance(kept["new_source"], str) or not isinstance(kept["error"], (str, type(None))):
            raise TypeError("plan entry of another shape")
        return FixResult(original, kept["new_source"], [from_dict(Site, x) for x in kept["applied"]],
                         [from_dict(Refusal, x) for x in kept["refused"]], kept["error"])

    return convert


def _real(p: str) -> str:
    return os.path.realpath(p)


def import_root_of(path: str) -> Optional[str]:
    """The sys.path entry a file imports from (longest match)."""
    best = None
    rp = _real(path)
    for entry in sys.path:
        if not entry:
            continue
        e = _real(entry)
        if rp.startswith(e + os.sep) and (best is None or len(e) > len(best)):
            best = e
    return best


def state_guards(t: TargetResult) -> list[tuple[str, int]]:
    """(real path, line) of each recompile of ``t`` on the value of a Python number an attribute
    of ``self`` holds (GM702 ``self.step == 3``), where Dynamo named the line that read it."""
    return [(_real(r.guard_file), r.guard_line) for r in t.caused_recompiles
            if r.rule == "GM702" and r.guard_file and r.guard_line and (r.expression or "").startswith("self.")]


def _break_files(t: TargetResult) -> set[str]:
    out = {f for f, _ in state_guards(t)}
    for b in t.breaks:
        if b.file:
            out.add(_real(b.file))
        for fr in b.stack:
            if fr.file and not fr.file.startswith("<"):
                out.add(_real(fr.file))
    if t.file and os.path.isfile(t.file):
        out.add(_real(t.file))
    return out


def candidate(cands: dict[str, "FileCandidate"], f: str, in_tree: Callable[[str], bool], config: Config,
              options: FixOptions, cache: Optional[Cache], report: Report) -> Optional["FileCandidate"]:
    """``cands[f]``, read and added on first use; None for a file outside the tree when
    ``options`` follows none, or one that cannot be read (an error of ``report``)."""
    if f not in cands:
        if not in_tree(f) and not options.follow:
            return None
        try:
            source = SourceText.read(f)
        except SourceError as exc:
            # the scan already said so for a file in the tree; a followed file has no other voice
            if not any(e.message == exc.message and _real(e.file) == f for e in report.errors):
                report.errors.append(_file_error(f, exc.message))
            return None
        cands[f] = FileCandidate(f, source, set(), set(), in_tree(f), None if in_tree(f) else import_root_of(f),
                                 unsafe=options.unsafe)
        cands[f].line_length = config.line_length
        cands[f].cache = cache
    return cands[f]


def propose(findings, before: Sequence[TargetResult], config: Config, options: FixOptions, report: Report,
            cache: Optional[Cache], in_tree: Callable[[str], bool],
            progress: Optional[Callable[[str, int], Callable[..., None]]] = None,
            only: Optional[set[str]] = None) -> dict[str, "FileCandidate"]:
    """The files to rewrite, each planned at the lines the findings and Dynamo's breaks name:
    its sites (what the rewrites would change) and refusals (why not), unverified; with
    ``only`` (real paths), only those files are planned. A file that cannot be read or
    planned is an error of ``report``."""
    from tracer.messages import provenance

    cands: dict[str, FileCandidate] = {}

    def cand(f: str) -> Optional[FileCandidate]:
        return candidate(cands, f, in_tree, config, options, cache, report)

    for fd in findings:
        c = cand(_real(fd.file))
        if c is not None:
            c.lines.update(range(fd.line, (fd.end_line or fd.line) + 1) if fd.rule.startswith("GM1") else [fd.line])
            if fd.rule in CONTROL_RULES:
                c.tensor_lines.add(fd.line)
    for t in before:
        for b in t.breaks:
            if not b.file or not b.line or not _selected(b.rule, options.rules) or not config.rule_enabled(b.rule):
                continue
            c = cand(_real(b.file))
            if c is None:
                continue
            c.lines.add(b.line)
            if b.rule in CONTROL_RULES and not _jumps_on_int(b):
                c.tensor_lines.add(b.line)
            if b.rule in SHAPE_RULES:
                c.shape_lines.add(b.line)
            if b.rule in INDEX_RULES:
                c.index_lines.add(b.line)
            # the break is itself a NumPy call (a NumPy value read back as a size)
            if _NUMPY_CALL.search(b.source_line or "") and _selected("GM604", options.rules):
                c.numpy_lines.add(b.line)
            # the value a branch read was computed by NumPy elsewhere (a helper's return)
            for src in provenance(b.explanation):
                if _NUMPY_CALL.search(src.source_line or "") and _selected("GM604", options.rules):
                    pc = cand(_real(src.file))
                    if pc is not None:
                        pc.lines.add(src.line)
                        pc.numpy_lines.add(src.line)
    # lines only a recompile names: what other families would say there answers no question
    recompile_only: dict[str, set[int]] = {}
    for t in before:
        for f, line in state_guards(t):
            if not _selected("GM702", options.rules) or not config.rule_enabled("GM702"):
                continue
            c = cand(f)
            if c is not None:
                if line not in c.lines:
                    recompile_only.setdefault(c.path, set()).add(line)
                c.lines.add(line)
                c.state_lines.add(line)
    chosen = [c for p, c in cands.items() if only is None or p in only]
    planned = progress("planning", len(chosen)) if progress and chosen else None
    for c in chosen:
        r = c.fix(c.lines, options.rules)
        if planned:
            planned(c.label, r)
        if r.error:
            report.errors.append(_file_error(c.path, r.error))
        c.refusals = [x for x in r.refused
                      if x.line not in recompile_only.get(c.path, ()) or x.rule in RECOMPILE_RULES]
        if r.changed and not r.error and (why := _unwritable(c, r.new_source)):
            report.errors.append(_file_error(c.path, why))  # nothing to verify: it could never be written
            continue
        for s in r.applied:
            trig = {l for l in c.lines if s.line <= l <= s.end_line} or {s.line}
            c.sites.append(SiteRecord(c.path, s, trig))
    return cands


def users_files(paths: Sequence[str | os.PathLike[str]]) -> Callable[[str], bool]:
    """Whether a (real) path is the user's: under ``paths``, or anywhere in the repository (the
    git top level of the working directory, else that directory) outside site-packages; the
    rest is installed (--patch)."""
    tree = [_real(str(Path(p).resolve())) for p in paths]
    own = own_root()
    return lambda f: any(f == t or f.startswith(t + os.sep) for t in tree) or users_file(f, own)


def _file_error(path: str, message: str):
    from graphmend.core.model import FileError

    return FileError(file=path, message=message)


def _unwritable(c: FileCandidate, text: str) -> Optional[str]:
    """Why ``text`` cannot be written back to ``c``'s file (its declared encoding), or None."""
    try:
        c.source.encode(text)
    except SourceError as exc:
        return exc.message
    return None


def _selected(rule: str, rules: Sequence[str]) -> bool:
    return not rules or any(rule.startswith(r) for r in rules)


def _jumps_on_int(b: Break) -> bool:
    """Whether Dynamo branched on an int it could not know (an unbacked int: a value an op read
    back from data), not on a tensor: in eager the condition is a Python number, which
    ``torch.where`` cannot take, so the line is no hint that its condition is a tensor."""
    return "SymNodeVariable" in b.context or "SymNodeVariable" in b.reason


def _patch_for(c: FileCandidate, sites: Sequence[SiteRecord], rules) -> Optional[str]:
    lines = set().union(*(s.trigger for s in sites)) if sites else set()
    if not lines:
        return None
    r = c.fix(lines, rules)
    return r.new_source if r.changed and not r.error else None
