"""One target's verification of the rewrites it runs: the sets tried (together, then each
alone), every site's verdict, the ``Outcome``, and its verdicts added to the site records."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from graphmend.core.cache import text_digest
from graphmend.core.config import Config
from graphmend.core.model import REJECTED, UNVERIFIED, Break, FixTarget, TargetResult
from graphmend.fix_candidates import RECOMPILE_RULES, SiteRecord, _patch_for

if TYPE_CHECKING:  # for annotations only: fixing is never imported at run time (no cycle)
    from graphmend.fixing import FixOptions

PROBE_DTYPE = "bfloat16"  # the half precision every CPU build traces
MAX_ISOLATED = 12  # rewrites verified one by one when their set fails, per target


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


def _transient(text: str) -> bool:
    """Whether a worker's failure is the machine's (a timeout, memory, a killed worker) rather
    than anything the program did."""
    from graphmend.core.jobs import TRANSIENT

    return any(sign in text for sign in TRANSIENT)


def _unfinished(v) -> bool:
    """Whether verification attempt ``v`` stopped for a reason of the machine."""
    return bool(v.error) and _transient(v.error)


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
                          memory_limit=config.memory_limit, calls=options.calls)
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
        if v.recompiles_grew:
            return f"the compiled program got worse: {v.recompiles_grew}"
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
            elif s.site.rule in RECOMPILE_RULES and v.recompiles_after >= v.recompiles_before:
                left = v.recompiles_left[0] if v.recompiles_left else "none recorded"
                out[id(s)] = (REJECTED, f"the recompile remains after the rewrite ({left})")
            elif s.site.rule in RECOMPILE_RULES and v.replay_recompile:
                out[id(s)] = (REJECTED, "the calls made once more under torch.compiler.set_stance"
                              f"(\"fail_on_recompile\") still recompile ({v.replay_recompile})")
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
        _couple(sites, verdicts)
        passing = [s for s in sites if verdicts[id(s)] is None or verdicts[id(s)][0] == PASS]
        final = None
        if passing:
            # the rewrites that passed, once more together: that set is what gets applied
            v2 = attempt(passing)
            verdicts.update(judge(v2, passing))
            failed = next((f for f in passing if verdicts[id(f)] is not None and verdicts[id(f)][0] != PASS), None)
            if failed is None:
                final = v2
            else:
                # the others passed with it applied, and were never run together without it:
                # nothing of this set is applied, so none of them is verified here
                status, why = verdicts[id(failed)]
                for s in passing:
                    if verdicts[id(s)] is not None and verdicts[id(s)][0] == PASS:
                        verdicts[id(s)] = (UNVERIFIED, f"verified only together with the {failed.site.rule} rewrite "
                                                       f"at line {failed.site.line}, which is then {status}: {why}")
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
            ft.recompiles_after = final.recompiles_after
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


def _couple(sites: list[SiteRecord], verdicts: dict) -> None:
    """A rewrite is planned from the original lines that selected it, with every other rewrite
    those lines select (``_patch_for``): one that passed cannot be applied without one at the
    same lines that did not. It takes that one's verdict, and is not written either."""
    failed = [s for s in sites if verdicts.get(id(s)) is not None and verdicts[id(s)][0] != PASS]
    for s in sites:
        o = verdicts.get(id(s))
        if o is not None and o[0] != PASS:
            continue
        other = next((f for f in failed if f.file == s.file and f.trigger & s.trigger), None)
        if other is not None:
            status, why = verdicts[id(other)]
            verdicts[id(s)] = (status, applied_with(other, status, why))


def applied_with(other: SiteRecord, status: str, why: str) -> str:
    """Why a rewrite that passed is not written: ``other``, planned from the same lines, is not."""
    return (f"applied only with the {other.site.rule} rewrite at line {other.site.line}, planned from the same "
            f"lines, which is {status}: {why}")


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
            # what the checks accepted (rounding, warm-up recompiles), said with the fix
            for note in [*final.rounding, *([final.recompiles_warmup] if final.recompiles_warmup else [])]:
                if note not in s.notes:
                    s.notes.append(note)
