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
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from graphmend.collect import CollectOptions, collect
from graphmend.core.cache import Cache, text_digest
from graphmend.core.config import Config
from graphmend.core.env import torch_version
from graphmend.core.model import (ADVICE, FAILS, PARTIAL, REGRESSES, REJECTED, SLOWER, UNVERIFIED, VERIFIED, Break, CostCheck,
                                  Fix, FixTarget, Replacement, Report, TargetResult, new_report)
from graphmend.core.serial import from_dict, to_dict
from graphmend.core.sources import SourceText, report_root, split_lines
from graphmend.fix_candidates import (CONTROL_RULES, INDEX_RULES, SHAPE_RULES, FileCandidate, SiteRecord,
                                      _break_files, _file_error, _patch_for, _real, _selected, _unwritable,
                                      candidate, propose, state_guards, users_files)
from graphmend.fix_outcomes import Outcome, _record, _transient, _verify_sites, applied_with

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
    # calls per target, the later ones of other sizes (mend analyze --calls): what recompiles
    # shows there, and the re-trace that proves a fix recompiles no more than the original
    calls: int = 3


# (target, the patches about to be written, the target's verdict key) -> each target's cost
# checks, one per mode (graphmend.bench.gate.cost_gate: the CLI composes the two stages,
# neither imports the other)
CostGate = Callable[[Sequence[tuple[object, dict[str, str], Optional[str]]]], list[list[CostCheck]]]


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
                  CollectOptions(jobs=options.jobs, timeout=options.timeout, only=options.only, cache=cache,
                                 calls=options.calls),
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
        for f, line in state_guards(t):
            hit.setdefault((t.name, f), set()).add(line)
    for (name, f), ls in hit.items():
        hit_any.setdefault(f, []).append(ls)
    reused: list[str] = []
    keys: dict[str, Optional[str]] = {}  # target -> its verdict's cache key (None: not kept)

    def verify_one(t: TargetResult, spec, sites: Optional[list[SiteRecord]], advance) -> tuple:
        """(FixTarget, the breaks left, Outcome or None, the verdict's cache key) of one
        target, with ``sites`` rewritten (None: the sites its breaks and files select)."""
        recompiles = len(t.caused_recompiles)
        ft = FixTarget(name=t.name, breaks_before=len(t.breaks), breaks_after=len(t.breaks),
                       graph_breaks_before=t.graph_break_count, graph_breaks_after=t.graph_break_count,
                       recompiles_before=recompiles, recompiles_after=recompiles)
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
            for kind, wanted in ((c.tensor_lines, b.rule in CONTROL_RULES), (c.shape_lines, b.rule in SHAPE_RULES),
                                 (c.index_lines, b.rule in INDEX_RULES)):
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
        r, ok_lines = _without_strays(c, options, applied)
        if not ok_lines:
            continue
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


def _without_strays(c: "FileCandidate", options: FixOptions, applied) -> tuple[object, set[int]]:
    """(plan, lines) of the rewrites of ``c`` that ``applied`` takes. The lines plan every rewrite
    they select: where that includes one ``applied`` does not take (a rewrite at the same lines
    that another target left unverified), the sites at its lines take its status and its lines
    go, until the plan holds only rewrites to write."""
    while True:
        ok_lines: set[int] = set().union(*(s.trigger for s in c.sites if applied(s)))
        if not ok_lines:
            return None, ok_lines
        r = c.fix(ok_lines, options.rules)
        planned = {(a.rule, a.line) for a in r.applied}
        strays = [x for x in c.sites if not applied(x) and (x.site.rule, x.site.line) in planned]
        if not strays:
            return r, ok_lines
        taking = [s for s in c.sites if applied(s)]
        # the sites at a stray's lines; where none shares them, no site of the file can be
        # told apart from what brings it in: none is written
        sharing = [s for s in taking if any(x.trigger & s.trigger for x in strays)] or taking
        for s in sharing:
            x = next((x for x in strays if x.trigger & s.trigger), strays[0])
            s.status = x.status if x.status in (REJECTED, UNVERIFIED) else UNVERIFIED
            s.reason = applied_with(x, x.status or "not verified", x.reason)


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
                     config.memory_limit, options.calls)


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
