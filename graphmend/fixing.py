"""The fix pipeline for ``mend fix``: find breaks, propose rewrites, verify them, report.

1. ``graphmend.collect``: static scan of the analysed files and dynamic capture of every
   target (breaks with their file:line, inside the tree or in installed packages the targets
   call into);
2. ``rewrites.fixes.fix_source`` per file, limited to the lines that break or were found;
3. per target: the original side (instrumented to record arms) and the patched side
   (through ``graphmend.core.overlay``) in fresh workers -- outputs compared, breaks re-traced;
   when the set of rewrites fails, each rewrite is verified alone and the passing ones
   are verified together again; a break the re-trace exposed (Dynamo now gets further into
   a function it stopped in) is planned and the target verified again with it, for up to
   ``FOLLOW_ROUNDS`` more rounds;
4. a ``Report`` with ``fixes[]`` (verified | rejected | advice) and ``fix_targets[]``.

``verified_patches(paths)`` returns {abs path: patched source} of every verified fix, for
``install_overlay`` in another worker (the bench's "mended" arm). Nothing here prints or
writes user files; ``graphmend.cli.fix`` does, under ``--write``.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from graphmend.collect import CollectOptions, collect
from graphmend.core.cache import Cache, text_digest
from graphmend.core.config import Config
from graphmend.core.env import torch_version
from graphmend.core.model import (ADVICE, FAILS, PARTIAL, REGRESSES, REJECTED, SLOWER, UNVERIFIED, VERIFIED, Break, CostCheck,
                                  Fix, FixTarget, Replacement, Report, TargetResult, from_dict, new_report, to_dict)
from graphmend.core.sources import SourceError, SourceText, own_root, report_root, split_lines, users_file

CONTROL_RULES = ("GM101", "GM102", "GM103", "GM401", "GM402")
_NUMPY_CALL = re.compile(r"\b(np|numpy)\.\w+\(")
PROBE_DTYPE = "bfloat16"  # the half precision every CPU build traces
MAX_ISOLATED = 12  # rewrites verified one by one when their set fails, per target
# further rounds per target for the breaks a round's re-trace exposed (a fix lets Dynamo go
# on to the next break of a function it stopped in before)
FOLLOW_ROUNDS = 2


@dataclass
class FixOptions:
    rules: tuple[str, ...] = ()
    jobs: int = 1
    timeout: Optional[float] = None
    follow: bool = True  # fix breaks in files outside the analysed paths (overlay / --patch only)
    only: tuple[str, ...] = ()  # target function names to verify (all when empty): one bench target
    unsafe: bool = False  # also offer fixes that change the program's cost (--unsafe-fixes)
    cache: bool = True  # reuse earlier captures and verdicts whose inputs are unchanged (--no-cache)
    allow_slower: bool = False  # the patches include fixes the cost gate measured slower (--allow-slower)
    accept_partial: bool = False  # the patches include fixes verified with a check skipped (--accept-partial)


# (target, the patches about to be written, the target's verdict key) -> each target's cost
# checks, one per mode (graphmend.bench.gate.cost_gate: the CLI composes the two stages,
# neither imports the other)
CostGate = Callable[[Sequence[tuple[object, dict[str, str], Optional[str]]]], list[list[CostCheck]]]


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
class Outcome:
    """One target's verification: the sites it rewrote, each one's (status, reason) by id
    (absent: the target never ran it), the Verdict of the set that passed together (None:
    none did), and the breaks its re-trace exposed at lines of the files on disk."""

    sites: list[SiteRecord]
    verdicts: dict
    final: object = None  # graphmend.verify.run.Verdict
    exposed: list[Break] = field(default_factory=list)
    read: set[str] = field(default_factory=set)  # every file its runs read (the verdict's deps)
    judged: dict[str, str] = field(default_factory=dict)  # path -> digest of the text ``final`` judged

    def passes(self, s: SiteRecord) -> bool:
        return (self.verdicts.get(id(s)) or ("",))[0] == PASS

    def passed(self) -> int:
        """How many of its sites the passing set holds: what a further round must beat."""
        return 0 if self.final is None else sum(map(self.passes, self.sites))


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
                sorted(self.numpy_lines), self.unsafe, self.line_length, module)

    def _derive(self, lines, rules):
        from rewrites.fixes import fix_source

        return fix_source(self.original, lines, rules, self.tensor_lines, self.shape_lines, self.numpy_lines,
                          unsafe=self.unsafe, line_length=self.line_length, module=self._inputs(lines, rules)[-1])

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


@dataclass
class FixRun:
    report: Report
    patches: dict[str, str]  # every verified fix applied: abs path -> new text
    candidates: dict[str, FileCandidate]
    # per target name: the breaks left with every verified fix applied (original file:line
    # for breaks that were there before; patched coordinates for new ones)
    remaining: dict[str, list[Break]] = field(default_factory=dict)
    # the targets whose verification an earlier run's verdict stood in for (graphmend.core.cache)
    reused: list[str] = field(default_factory=list)
    held: int = 0  # partially verified fixes the run's flags did not accept: never in ``patches``

    def in_tree_patches(self) -> dict[str, str]:
        return {p: t for p, t in self.patches.items() if self.candidates[p].in_tree}

    def out_of_tree_patches(self) -> dict[str, str]:
        return {p: t for p, t in self.patches.items() if not self.candidates[p].in_tree}


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


def diff_lines(source: SourceText, new: str, label: Optional[str] = None) -> list[str]:
    """The unified diff from the file ``source`` was read from to ``new`` written back,
    line by line: the file's own line endings and BOM in the content lines (``patch -p1``
    and ``git apply`` take it as it is), and git's marker after a last line without one."""
    name = label or source.path
    out = []
    for line in difflib.unified_diff(split_lines(source.render(source.text)), split_lines(source.render(new)),
                                     f"a/{name}", f"b/{name}"):
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return out


def unified_diff(source: SourceText, new: str, label: Optional[str] = None) -> str:
    """``diff_lines`` as text (the JSON report's ``diff``)."""
    return "".join(diff_lines(source, new, label))


def diff_bytes(source: SourceText, new: str, label: Optional[str] = None) -> bytes:
    """``diff_lines`` as bytes: headers in UTF-8, content lines in the file's own encoding,
    so that the diff applies to a file that is not UTF-8."""
    codec = "utf-8" if source.bom else source.encoding  # the BOM is a character of the first line
    out = []
    for i, line in enumerate(diff_lines(source, new, label)):
        header = i < 2 or line.startswith("@@")
        out.append(line.encode("utf-8", "surrogateescape") if header else line.encode(codec))
    return b"".join(out)


def replacements(source: SourceText, new: str) -> list[Replacement]:
    """The edits that turn the file ``source`` was read from into ``new`` written back (the
    file's own line endings), whole lines at a time, each against the original file; a
    position past the last line is the end of the text. The BOM is no column of line 1."""
    old_lines = split_lines(source.render(source.text).removeprefix("\ufeff"))
    new_lines = split_lines(source.render(new).removeprefix("\ufeff"))

    def start(k: int) -> tuple[int, int]:  # where the original's line k (0-based) starts
        if k < len(old_lines) or not old_lines or old_lines[-1].endswith(("\n", "\r")):
            return k + 1, 0
        return len(old_lines), len(old_lines[-1])  # after a last line without an ending

    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append(Replacement(*start(i1), *start(i2), "".join(new_lines[j1:j2])))
    return out


def _break_files(t: TargetResult) -> set[str]:
    out = set()
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
            if b.rule in CONTROL_RULES:
                c.tensor_lines.add(b.line)
            if b.rule.startswith("GM50"):
                c.shape_lines.add(b.line)
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
    chosen = [c for p, c in cands.items() if only is None or p in only]
    planned = progress("planning", len(chosen)) if progress and chosen else None
    for c in chosen:
        r = c.fix(c.lines, options.rules)
        if planned:
            planned(c.label, r)
        if r.error:
            report.errors.append(_file_error(c.path, r.error))
        c.refusals = list(r.refused)
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


def plan_issues(report: Report, paths: Sequence[str | os.PathLike[str]], config: Config,
                progress: Optional[Callable[[str, int], Callable[..., None]]] = None) -> None:
    """Each issue's ``fix`` as the planner decides it at its own place, unverified and with no
    run: ``safe`` where ``mend fix`` would plan a rewrite there, ``unsafe`` where only
    ``--unsafe-fixes`` would, else None (advice) with the planner's reason in ``fix_why``: never
    "its rule has a fixer". Only issues whose rules have a fixer are planned (no other can
    get a rewrite); the plans are kept in mend's cache for the ``mend fix`` after."""
    open_ = {id(i): i for i in report.issues if i.fix in ("safe", "unsafe") and i.file and i.line}
    if not open_:
        return
    in_tree = users_files(paths)
    scratch = new_report("fix", root=report.root)  # a file the planner cannot read is the scan's to report
    cache = Cache.for_run(True)
    why: dict[int, str] = {}
    for unsafe in (False, True):
        # only the files of issues still without a rewrite (the unsafe pass: those the safe one left)
        only = {_real(i.file) for i in open_.values()}
        cands = propose(report.findings, report.targets, config, FixOptions(unsafe=unsafe), scratch, cache, in_tree,
                        progress, only)
        for key, i in list(open_.items()):
            c = cands.get(_real(i.file))
            if c is not None and any(s.site.line <= i.line <= s.site.end_line for s in c.sites):
                i.fix, i.fix_why = ("unsafe" if unsafe else "safe"), ""
                del open_[key]
            elif c is not None and not unsafe:
                why[key] = next((r.reason for r in c.refusals if r.line == i.line), "")
        if not open_:
            break
    for key, i in open_.items():
        i.fix, i.fix_why = None, why.get(key) or "no rewrite is planned at this line"


def run_fix(paths: Sequence[str | os.PathLike[str]], config: Config, options: FixOptions,
            progress: Optional[Callable[[str, int], Callable[..., None]]] = None,
            cost: Optional[CostGate] = None) -> FixRun:
    from rewrites.rules import advice_for

    root = report_root(paths, config.project_root)
    report = new_report("fix", root=root, torch_version=torch_version())
    report.run_modes = list(config.modes[:1])
    in_tree = users_files(paths)

    # 1. find: one run mode (the CLI refuses more), so one capture per target, which
    # verify_one pairs with its spec; captured with Dynamo's own nesting, no compiled autograd
    cache = Cache.for_run(options.cache)
    got = collect(paths, dataclasses.replace(config, modes=config.modes[:1], compiled_autograd=False,
                                             nested_graph_breaks=None),
                  CollectOptions(jobs=options.jobs, timeout=options.timeout, only=options.only, cache=cache),
                  progress)
    findings = [f for f in got.findings if config.rule_enabled(f.rule) and _selected(f.rule, options.rules)]
    report.findings, report.errors, report.files_scanned = findings, got.errors, got.files_scanned
    before: list[TargetResult] = got.targets

    # 2. propose
    cands = propose(findings, before, config, options, report, cache, in_tree, progress)

    def cand(f: str) -> Optional[FileCandidate]:  # a file a follow-up round reaches
        return candidate(cands, f, in_tree, config, options, cache, report)

    # 3. verify, per target
    fix_targets: list[FixTarget] = []
    remaining: dict[str, list[Break]] = {t.name: list(t.breaks) for t in before}
    texts = {p: c.original for p, c in cands.items()}
    # which target hit which lines: a target verifies the rewrites its own breaks asked for,
    # plus the static-only ones in files it runs through
    hit: dict[tuple[str, str], set[int]] = {}
    hit_any: dict[str, list[set[int]]] = {}
    for t in before:
        for b in t.breaks:
            if b.file and b.line:
                hit.setdefault((t.name, _real(b.file)), set()).add(b.line)
    for (name, f), ls in hit.items():
        hit_any.setdefault(f, []).append(ls)
    reused: list[str] = []
    keys: dict[str, Optional[str]] = {}  # target -> its verdict's cache key (None: not kept)

    def verify_one(t: TargetResult, spec, sites: Optional[list[SiteRecord]], advance) -> tuple:
        """(FixTarget, the breaks left, Outcome or None, the verdict's cache key) of one
        target, with ``sites`` rewritten (None: the sites its breaks and files select)."""
        ft = FixTarget(name=t.name, breaks_before=len(t.breaks), breaks_after=len(t.breaks),
                       graph_breaks_before=t.graph_break_count, graph_breaks_after=t.graph_break_count)
        outcome, left, key = None, list(t.breaks), None
        if t.error and not t.breaks:
            ft.error = t.error
        else:
            if sites is None:
                files = _break_files(t) & {p for p, c in cands.items() if c.sites}
                sites = [s for p in sorted(files) for s in cands[p].sites if s.trigger & hit.get((t.name, p), set())
                         or not any(s.trigger & v for v in hit_any.get(p, []))]
            key = _verdict_key(cache, t, sites, cands, options, config) if sites else None
            kept = cache.get_valid("verify", key, lambda e: _from_kept(e, sites)) if key else None
            if kept is not None and _judged(kept[2], cands, options) != kept[2].judged:
                kept = None  # it judged other texts than these: verified again
            if kept is not None:
                ft, left, outcome = kept
                ft.name = t.name  # kept under another spelling of the same target's path
                reused.append(t.name)
            elif sites:
                left, outcome = _verify_sites(spec, t, sites, cands, dict(texts), options, config, ft)
                if key and _keepable(ft, outcome):
                    cache.put_valid("verify", key, _kept(ft, left, outcome), outcome.read)
            else:
                ft.outputs_equal = True  # nothing rewritten: the program is the original
                ft.remaining = [f"{b.rule} {os.path.basename(b.file or '')}:{b.line}: {b.reason}" for b in t.breaks]
        if advance:
            advance(t.name, ft)
        return ft, left, outcome, key

    # sites the follow-up rounds planned, shared by the targets that exposed the same break
    followed: dict[tuple, SiteRecord] = {}

    def follow(o: Outcome, hints: list[tuple[FileCandidate, set[int], int]]) -> list[SiteRecord]:
        """Sites for the breaks ``o``'s re-trace exposed, at lines none of its sites covers;
        the hints about them added to their files go in ``hints`` (to take back if unused)."""
        extra: list[SiteRecord] = []
        for b in o.exposed:
            if not (b.file and b.line and _selected(b.rule, options.rules) and config.rule_enabled(b.rule)):
                continue
            c = cand(_real(b.file))
            if c is None or any(s.file == c.path and s.site.line <= b.line <= s.site.end_line
                                for s in o.sites + extra):
                continue
            texts.setdefault(c.path, c.original)
            for kind, wanted in ((c.tensor_lines, b.rule in CONTROL_RULES), (c.shape_lines, b.rule.startswith("GM50"))):
                if wanted and b.line not in kind:
                    kind.add(b.line)
                    hints.append((c, kind, b.line))
            lines = set().union(*(s.trigger for s in o.sites + extra if s.file == c.path)) | {b.line}
            r = c.fix(lines, options.rules)
            if r.error or (r.changed and _unwritable(c, r.new_source)):
                continue
            site = next((x for x in r.applied if x.line <= b.line <= x.end_line), None)
            if site is None:  # refused: its advice goes with the break, which stays
                c.refusals += [x for x in r.refused if x.line == b.line and x not in c.refusals]
                continue
            span = (c.path, site.line, site.end_line, site.rule)
            known = next((s for s in c.sites if (s.file, s.site.line, s.site.end_line, s.site.rule) == span), None)
            extra.append(known or followed.setdefault(span, SiteRecord(c.path, site, {b.line})))
        return extra

    # targets verify in parallel (--jobs), each in its own workers; their verdicts are added
    # to the shared site records afterwards, in target order
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        tick = progress("verifying", len(before)) if progress and before else None
        done = list(pool.map(lambda t, spec: verify_one(t, spec, None, tick), before, got.specs))
        # a round that exposed breaks mend can rewrite goes again with them added; the
        # larger set stands only where more of its sites pass together
        settled: set[int] = set()
        for _ in range(FOLLOW_ROUNDS):
            hints: list[tuple[FileCandidate, set[int], int]] = []
            todo = [(i, extra) for i, (_, _, o, _) in enumerate(done)
                    if o is not None and i not in settled and (extra := follow(o, hints))]
            if not todo:
                break
            tick = progress("verifying follow-ups", len(todo)) if progress else None
            again = list(pool.map(lambda job: verify_one(before[job[0]], got.specs[job[0]],
                                                         done[job[0]][2].sites + job[1], tick), todo))
            for (i, extra), res in zip(todo, again):
                if res[2] is None or res[2].passed() <= done[i][2].passed():
                    settled.add(i)
                    continue
                done[i] = res
                for s in extra:
                    if s not in cands[s.file].sites:
                        cands[s.file].sites.append(s)
            # a hint no adopted site covers goes: the patches written are planned as verified
            for c, kind, line in hints:
                if not any(s.site.line <= line <= s.site.end_line for s in c.sites):
                    kind.discard(line)
    for t, (ft, left, outcome, key) in zip(before, done):
        fix_targets.append(ft)
        remaining[t.name], keys[t.name] = left, key
        if outcome is not None:
            _record(outcome)

    # 4. settle: a site is verified when every target that ran it agreed, none rejected it
    # and none left one of its arms unexercised
    for c in cands.values():
        for s in c.sites:
            failed = [o for o in s.outcomes if o[0] == REJECTED] or [o for o in s.outcomes if o[0] == UNVERIFIED]
            if failed:
                s.status, s.reason = failed[0]
            elif s.outcomes:
                # every check that ran passed; a proof with a gap is partial, written only when accepted
                s.status = PARTIAL if s.partial() else VERIFIED
            else:
                s.status = UNVERIFIED
                s.reason = "no mend_target runs the rewritten code, so the rewrite could not be verified"
    # 5. cost (--bench): a target whose program the verified fixes make slower turns them to regresses
    if cost is not None:
        _gate(cost, [(ft, o) for ft, _, o, _ in done], got.specs, _settled(cands, options, report, {VERIFIED}), keys,
              options)
    patches = _settled(cands, options, report, {VERIFIED, REGRESSES} if options.allow_slower else {VERIFIED})
    report.fix_targets = fix_targets
    # the fix report's targets[] carry the outcome too (the shape `mend fix --format json`
    # promises): copies of the captures, which stay as they were captured
    outcome = {ft.name: ft for ft in fix_targets}
    report.targets = [_with_outcome(t, outcome.get(t.name)) for t in before]
    report.fixes = _fix_records(cands, findings, before, options, advice_for)
    from graphmend.correlate import diagnose

    diagnose(report)
    held = sum(s.status == PARTIAL and not s.accepted(options) for c in cands.values() for s in c.sites)
    return FixRun(report, patches, cands, remaining, [n for n in (t.name for t in before) if n in reused], held)


def _settled(cands: dict[str, "FileCandidate"], options: FixOptions, report: Report,
             statuses: set[str]) -> dict[str, str]:
    """{path: text} with the rewrites whose sites have one of ``statuses`` applied (and the
    partially verified ones the run's flags accept); a text the file's encoding cannot hold
    rejects its sites (said once, in report.errors)."""
    patches: dict[str, str] = {}

    def applied(s: SiteRecord) -> bool:
        return s.status in statuses or s.status == PARTIAL and s.accepted(options)

    for c in cands.values():
        ok_lines: set[int] = set()
        for s in c.sites:
            if applied(s):
                ok_lines |= s.trigger
        if not ok_lines:
            continue
        r = c.fix(ok_lines, options.rules)
        if r.changed and not r.error and not c.rederived(ok_lines, options.rules):
            for s in c.sites:
                if s.status in statuses:
                    s.status, s.reason = UNVERIFIED, UNTRUSTED
            continue
        why = _unwritable(c, r.new_source) if r.changed and not r.error else None
        if why:
            if not any(e.message == why and e.file == c.path for e in report.errors):
                report.errors.append(_file_error(c.path, why))
            for s in c.sites:
                if applied(s):
                    s.status, s.reason = REJECTED, why
        elif r.changed and not r.error:
            patches[c.path] = r.new_source
    return patches


def _gate(cost: CostGate, done: list, specs: list, patches: dict[str, str], keys: dict[str, Optional[str]],
          options: Optional[FixOptions] = None) -> None:
    """Time every target some verified fix changed, compiled before and after; a target
    whose mended program is slower in a mode turns the verified fixes it ran to REGRESSES.
    ``keys``: each target's verdict key, under which the gate may keep what it measured."""
    gated = []
    for spec, (ft, outcome) in zip(specs, done):
        if outcome is None:
            continue
        passed = [s for s in outcome.sites if outcome.passes(s) and (
            s.status == VERIFIED or s.status == PARTIAL and s.accepted(options or FixOptions()))]
        if outcome.final is not None and passed and any(s.file in patches for s in passed):
            gated.append((ft, spec, passed))
    if not gated:
        return
    results = cost([(spec, patches, keys.get(ft.name)) for ft, spec, _ in gated])
    for (ft, spec, passed), checks in zip(gated, results):
        ft.costs = list(checks)
        worse = [c for c in checks if c.verdict in (SLOWER, FAILS)]
        if not worse:
            continue
        why = "; ".join(_slower_reason(c) for c in worse)
        how = "got slower" if all(c.verdict == SLOWER for c in worse) else "regresses"
        for s in passed:
            if s.status in (VERIFIED, PARTIAL):
                s.status, s.reason = REGRESSES, f"verified, but the compiled program {how}: {why}"
            elif s.status == REGRESSES and why not in s.reason:
                s.reason += f"; {why}"


def _slower_reason(c: CostCheck) -> str:
    if c.verdict == FAILS:
        return (f"{c.target} fails in {c.mode} mode on {c.device}, where the original runs ({c.why}); "
                "written only with --allow-slower")
    graphs = (f", {c.graphs_mended} graph(s) instead of {c.graphs_original}"
              if c.graphs_original is not None and c.graphs_mended is not None else "")
    return (f"{c.target} runs {c.ratio:.2f}x the original's time in {c.mode} mode on {c.device} "
            f"(median {c.mended_ms:.3f} ms, IQR {c.mended_iqr_ms:.3f}, against {c.original_ms:.3f} ms, "
            f"IQR {c.original_iqr_ms:.3f}{graphs}); written only with --allow-slower")


# -- the cache of verdicts (graphmend.core.cache) ------------------------------------------

UNTRUSTED = ("not verified: the rewrite kept in mend's cache for this file is not the one mend derives now "
             "(its cache entry was changed); --no-cache verifies it afresh")


def _verdict_key(cache: Cache, t: TargetResult, sites: list[SiteRecord], cands: dict[str, "FileCandidate"],
                 options: FixOptions, config: Config) -> Optional[str]:
    """What one target's verification depends on: its capture (whose key holds the target
    and the machine, and whose files must all be unchanged), the sites rewritten, every file
    they are in, the exact patched texts the verification judges, and the options that
    change a rewrite or a check. The files its runs read are the kept verdict's ``deps``.
    None: not cacheable."""
    captured = cache.captured.get(t.name) if cache.enabled else None
    if captured is None:
        return None
    capture_key, deps = captured
    files = sorted({s.file for s in sites})
    digests = {f: cache.file_digest(f) for f in files}
    if any(d is None for d in digests.values()):
        return None
    return cache.key("verify", capture_key, deps, digests, _patch_digests(sites, cands, options),
                     [[s.file, s.site.line, s.site.end_line, s.site.rule, s.site.strategy, sorted(s.trigger)]
                      for s in sites],
                     list(options.rules), options.unsafe, config.line_length, list(config.modes[:1]),
                     config.memory_limit)


def _patch_digests(sites: Sequence[SiteRecord], cands: dict[str, "FileCandidate"],
                   options: FixOptions) -> dict[str, str]:
    """{path: digest of the patched text} of ``sites`` applied together, as verification
    runs them (``_verify_sites_in``'s attempt)."""
    by_file: dict[str, list[SiteRecord]] = {}
    for s in sites:
        by_file.setdefault(s.file, []).append(s)
    out = {}
    for f, ss in sorted(by_file.items()):
        p = _patch_for(cands[f], ss, options.rules)
        if p is not None:
            out[f] = text_digest(p)
    return out


def _judged(o: Outcome, cands: dict[str, "FileCandidate"], options: FixOptions) -> dict[str, str]:
    """The digests of the texts ``o``'s passing set is (its final attempt judged them)."""
    if o.final is None:
        return {}
    return _patch_digests([s for s in o.sites if o.verdicts.get(id(s)) is None or o.passes(s)], cands, options)


def _transient(text: str) -> bool:
    """Whether a worker's failure is the machine's (a timeout, memory, a killed worker) rather
    than anything the program did."""
    from graphmend.core.jobs import TRANSIENT

    return any(sign in text for sign in TRANSIENT)


def _unfinished(v) -> bool:
    """Whether verification attempt ``v`` stopped for a reason of the machine."""
    return bool(v.error) and _transient(v.error)


def _keepable(ft: FixTarget, outcome: Outcome) -> bool:
    """A verdict is kept unless a worker failed in a way that may not happen again (a
    timeout, memory, a crash): that says nothing about the fix. What the program itself did,
    an exception included, is kept."""
    texts = [ft.error or ""] + [v[1] for v in outcome.verdicts.values() if v is not None]
    return not any(_transient(t) for t in texts)


def _kept(ft: FixTarget, remaining: list[Break], outcome: Outcome) -> dict:
    final = outcome.final
    return {"fix_target": to_dict(ft), "remaining": [to_dict(b) for b in remaining],
            "verdicts": [list(outcome.verdicts[id(s)]) if outcome.verdicts.get(id(s)) is not None else None
                         for s in outcome.sites],
            "final": None if final is None else {"checks": list(final.checks), "skipped": dict(final.skipped),
                                                 "surfaced": [to_dict(x) for x in final.surfaced],
                                                 "rounding": list(final.rounding)},
            "exposed": [to_dict(b) for b in outcome.exposed], "judged": dict(outcome.judged)}


def _from_kept(kept: dict, sites: list[SiteRecord]) -> tuple[FixTarget, list[Break], Outcome]:
    from graphmend.verify.run import Surfaced, Verdict

    verdicts = {id(s): tuple(v) for s, v in zip(sites, kept["verdicts"]) if v is not None}
    final = None
    if kept["final"] is not None:
        f = kept["final"]
        final = Verdict(checks=list(f["checks"]), skipped=dict(f["skipped"]),
                        surfaced=[from_dict(Surfaced, x) for x in f["surfaced"]], rounding=list(f.get("rounding", [])))
    if len(kept["verdicts"]) != len(sites) or any(len(v) != 2 for v in verdicts.values()) \
            or not isinstance(kept["judged"], dict):
        raise ValueError("verdict entry of another shape")
    return (from_dict(FixTarget, kept["fix_target"]), [from_dict(Break, b) for b in kept["remaining"]],
            Outcome(sites, verdicts, final, [from_dict(Break, b) for b in kept.get("exposed", [])],
                    judged=dict(kept["judged"])))


def _with_outcome(t: TargetResult, ft: Optional[FixTarget]) -> TargetResult:
    """The capture ``t`` as the fix report lists it, with its target's outcome (a copy)."""
    if ft is None:
        return t
    return dataclasses.replace(t, breaks_before=ft.breaks_before, breaks_after=ft.breaks_after,
                               outputs_equal=ft.outputs_equal, unexercised_branches=list(ft.unexercised_branches))


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


def _patch_for(c: FileCandidate, sites: Sequence[SiteRecord], rules) -> Optional[str]:
    lines = set().union(*(s.trigger for s in sites)) if sites else set()
    if not lines:
        return None
    r = c.fix(lines, rules)
    return r.new_source if r.changed and not r.error else None


PASS = "pass"
# checks every differential run makes, in every mode that ran
ALWAYS_CHECKED = ("inputs", "exceptions", "retrace")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d*)?(?:e-?\d+)?")


def constants_of(text: str, conditions) -> list[float]:
    """The numbers written in the conditions (``h.max() > 0.3`` -> [0.3]): inputs filled
    with them sit on the threshold, where rounding it in another precision shows; NaN for a
    condition that asks for one (``torch.isnan(h).any()``), infinity for one that asks for
    that: inputs full of them take the arm a guard against bad values keeps."""
    lines = text.splitlines()
    out: list[float] = []
    for l, c, el, ec in conditions:
        if not (0 < l <= len(lines) and 0 < el <= len(lines)):
            continue
        part = lines[l - 1:el]
        part[-1] = part[-1][:ec]
        part[0] = part[0][c:]
        src = "\n".join(part)
        found = [float(m) for m in _NUMBER.findall(src)]
        found += [float("nan")] * bool(re.search(r"\bisnan\b|\bnan\b", src))
        found += [float("inf")] * bool(re.search(r"\bisinf\b|\bisfinite\b|\binf\b", src))
        for v in found:
            if v not in out and not (v != v and any(o != o for o in out)):  # NaN is no NaN's equal
                out.append(v)
    return out[:6]


def _verify_sites(spec, before: TargetResult, sites: list[SiteRecord], cands, texts, options: FixOptions,
                  config: Config, ft: FixTarget) -> tuple[list[Break], Outcome]:
    """Verify ``sites`` for one target; fills ``ft``; returns the breaks left and the
    outcome ``_record`` adds to the sites."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="mend-verify-") as tmp:
        return _verify_sites_in(tmp, spec, before, sites, cands, texts, options, config, ft)


def _verify_sites_in(tmp: str, spec, before: TargetResult, sites: list[SiteRecord], cands, texts,
                     options: FixOptions, config: Config, ft: FixTarget) -> tuple[list[Break], Outcome]:
    from graphmend.verify.run import run_original, verify_target

    timeout = options.timeout or config.timeout
    # torch.cond needs both branches to return one dtype: float32 alone cannot show it
    probe = PROBE_DTYPE if any(s.site.strategy == "cond" for s in sites) else None
    # the original side once per target, instrumented at every rewritten condition: each
    # set of rewrites tried below is compared against the same records
    conditions: dict[str, list] = {}
    constants: list[float] = []
    for s in sites:
        conditions.setdefault(s.file, []).extend(list(c) for c in s.site.conditions)
        constants += constants_of(cands[s.file].original, s.site.conditions)
    original = run_original(spec, {f: c for f, c in conditions.items() if c}, tmp, timeout,
                            probe_dtype=probe, constants=list(dict.fromkeys(constants)),
                            memory_limit=config.memory_limit)
    read: set[str] = set(original.read)  # what every run read: the kept verdict's deps
    judged: dict[int, dict[str, str]] = {}  # id(Verdict) -> digests of the texts that attempt ran

    def attempt(chosen: list[SiteRecord]):
        by_file: dict[str, list[SiteRecord]] = {}
        for s in chosen:
            by_file.setdefault(s.file, []).append(s)
        patches = {}
        for f, ss in by_file.items():
            p = _patch_for(cands[f], ss, options.rules)
            if p is not None:
                patches[f] = p
        v = verify_target(original, patches, before, texts, timeout,
                          probe_dtype=probe if any(s.site.strategy == "cond" for s in chosen) else None,
                          memory_limit=config.memory_limit)
        read.update(v.read)
        judged[id(v)] = {f: text_digest(p) for f, p in sorted(patches.items())}
        return v

    def failed_whole(v) -> Optional[str]:
        """Why the attempt as a whole failed (every rewrite in it is suspect), or None."""
        if v.error:
            return f"verification did not finish: {v.error}" if _unfinished(v) else f"verification failed: {v.error}"
        if v.mismatches:
            return f"behaviour changed: {v.mismatches[0]}"
        if v.new_breaks:
            return f"a new break appeared: {v.new_breaks[0]}"
        if v.graphs_grew:
            return f"the compiled program got worse: {v.graphs_grew}"
        return None

    def judge(v, chosen) -> dict[int, Optional[tuple[str, str]]]:
        """Per site: (PASS | UNVERIFIED | REJECTED, reason), or None when this target never
        ran the site's rewritten conditions (another target's code in the same file)."""
        out: dict[int, Optional[tuple[str, str]]] = {}
        whole = failed_whole(v)
        for s in chosen:
            if whole:
                # a run that did not finish (time, memory, a crash) says nothing against the fix
                out[id(s)] = (UNVERIFIED if _unfinished(v) else REJECTED, whole)
                continue
            keys = s.condition_keys()
            seen = [set(v.arms.get(k, ())) for k in keys]
            remaining = [k for k in v.remaining_keys if k[0] == s.file and any(
                before_line in range(s.site.line, s.site.end_line + 1) for before_line in v.key_lines.get(k, []))]
            if remaining:
                out[id(s)] = (REJECTED, f"the break remains after the rewrite ({remaining[0][2]})")
            elif keys and not any(seen):
                out[id(s)] = None
            elif keys and any(len(x) < 2 for x in seen):
                k, x = next((k, x) for k, x in zip(keys, seen) if len(x) < 2)
                side = "true" if True not in x else "false"
                line, col = k.rsplit(":", 2)[1:]
                out[id(s)] = (UNVERIFIED, f"a rewritten arm never ran: the condition at line {line}, column "
                              f"{int(col) + 1} was never {side} on the {len(v.inputs)} inputs tried "
                              f"({', '.join(v.inputs)}); give inputs that make it {side} with "
                              "graphmend.Target(..., inputs=[(args, kwargs)])")
            else:
                out[id(s)] = (PASS, "")
        return out

    v = attempt(sites)
    verdicts = judge(v, sites)
    final = v
    if any(o is not None and o[0] != PASS for o in verdicts.values()):
        # rewrites failed together are tried alone, unless the run did not finish: alone, each
        # would run as long
        if failed_whole(v) and not _unfinished(v) and len(sites) > 1:
            for s in sites[:MAX_ISOLATED]:
                verdicts[id(s)] = judge(attempt([s]), [s])[id(s)]
            for s in sites[MAX_ISOLATED:]:
                verdicts[id(s)] = (REJECTED, "not verified alone (too many rewrites failed together)")
        passing = [s for s in sites if verdicts[id(s)] is None or verdicts[id(s)][0] == PASS]
        final = None
        if passing:
            # the rewrites that passed, once more together: that set is what gets applied
            v2 = attempt(passing)
            j2 = judge(v2, passing)
            verdicts.update(j2)
            if not any(o is not None and o[0] != PASS for o in j2.values()):
                final = v2
    # what a further round may rewrite: the breaks the passing set surfaced, or, where the
    # whole set failed only on new breaks, those
    exposed = final.exposed if final is not None else \
        (v.exposed if v.new_breaks and not (v.error or v.mismatches or v.graphs_grew) else [])
    outcome = Outcome(sites, verdicts, final, list(exposed), read, judged.get(id(final), {}) if final else {})
    if final is not None:
        ft.breaks_after = final.breaks_after
        ft.fixes = [f"{s.file}:{s.site.line}" for s in sites if outcome.passes(s)]
        if final.after is not None:
            ft.graph_breaks_after = final.after.graph_break_count
        ft.outputs_equal = True
        ft.unexercised_branches = final.unexercised
        ft.remaining = final.remaining_reasons
        return list(final.remaining_breaks), outcome
    # no rewrite passed: the program stays the original (its outputs trivially equal); why
    # each rewrite failed is in its Fix record
    ft.outputs_equal = True
    ft.error = v.error if v.error and v.error.startswith("original run") else None
    ft.remaining = [f"{b.rule} {os.path.basename(b.file or '')}:{b.line}: {b.reason}" for b in before.breaks]
    return list(before.breaks), outcome


def _record(outcome: Outcome) -> None:
    """Add one target's verdicts to its sites (in target order: a site's first rejection
    is the one its record names)."""
    final = outcome.final
    for s in outcome.sites:
        o = outcome.verdicts.get(id(s))
        if o is None:
            continue  # this target never ran it: its verdict is the other targets'
        s.outcomes.append(o)
        if o[0] == PASS and final is not None:
            s.checks = list(dict.fromkeys([*s.checks, *final.checks, *ALWAYS_CHECKED,
                                           *(["arms"] if s.site.conditions else [])]))
            for name, why in final.skipped.items():
                s.skipped.setdefault(name, why)
            for sf in final.surfaced:
                if any(f == s.file and s.site.line <= line <= s.site.end_line for f, line in sf.hid) \
                        and sf.note() not in s.notes:
                    s.notes.append(sf.note())
            for note in final.rounding:  # what the checks accepted as rounding, said with the fix
                if note not in s.notes:
                    s.notes.append(note)


def _fix_records(cands: dict[str, FileCandidate], findings, before: list[TargetResult], options: FixOptions,
                 advice_for) -> list[Fix]:
    fixes: list[Fix] = []
    covered: set[tuple[str, int]] = set()
    for c in cands.values():
        for s in c.sites:
            r = c.fix(s.trigger, options.rules)
            label = c.label
            proven = s.status in (VERIFIED, PARTIAL, REGRESSES)  # behaviour proven either way
            fixes.append(Fix(file=c.path, line=s.site.line, end_line=s.site.end_line, rule=s.site.rule,
                             status=s.status, reason=s.reason or _described(s, options),
                             diff=unified_diff(c.source, r.new_source, label) if r.changed else "",
                             import_root=c.import_root, checks=list(s.checks) if proven else [],
                             skipped_checks=[f"{k}: {why}" for k, why in s.skipped.items() if k not in s.checks]
                             if proven else [], partial=s.partial() if s.status == PARTIAL else [],
                             replacements=replacements(c.source, r.new_source) if r.changed else []))
            covered.update((c.path, l) for l in range(s.site.line, s.site.end_line + 1))
        for ref in c.refusals:
            if (c.path, ref.line) in covered:
                continue
            covered.add((c.path, ref.line))
            fixes.append(Fix(file=c.path, line=ref.line, rule=ref.rule, status=ADVICE,
                             reason=f"not rewritten: {ref.reason}", advice=ref.advice or advice_for(ref.rule),
                             import_root=c.import_root))
    items = [(_real(f.file), f.line, f.rule, f.message) for f in findings]
    for t in before:
        items += [(_real(b.file), b.line, b.rule, b.reason) for b in t.breaks if b.file and b.line]
    for f, line, rule, msg in items:
        if (f, line) in covered or not _selected(rule, options.rules):
            continue
        covered.add((f, line))
        fixes.append(Fix(file=f, line=line, rule=rule, status=ADVICE,
                         reason=f"no automatic fix for {rule}: {msg.splitlines()[0] if msg else ''}".rstrip(": "),
                         advice=advice_for(rule), import_root=cands[f].import_root if f in cands else None))
    fixes.sort(key=lambda x: (x.file, x.line))
    return fixes


def _described(s: SiteRecord, options: FixOptions) -> str:
    text = "; ".join([s.site.description, *s.notes]) if s.status in (VERIFIED, PARTIAL) else s.site.description
    if s.status == PARTIAL:  # what the proof lacks is in Fix.partial; the flags that accept it, here
        gaps = s.partial()
        flags = " and ".join([*(["--accept-partial"] if any(not g.startswith("caveat: ") for g in gaps) else []),
                              *(["--unsafe-fixes"] if any(g.startswith("caveat: ") for g in gaps) else [])])
        text += f"; partially verified: written with {flags}" if s.accepted(options) else \
            f"; partially verified: not written without {flags}"
    return text


def verified_patches(paths: Sequence[str | os.PathLike[str]], config: Optional[Config] = None,
                     options: Optional[FixOptions] = None) -> dict[str, str]:
    """{abs path: patched source} of every verified fix for the targets under ``paths``."""
    from graphmend.core.config import load_config

    config = config or load_config(paths)
    return run_fix(paths, config, options or FixOptions()).patches
