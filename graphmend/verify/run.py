"""The parent side of verification: two fresh workers per attempt (original, patched)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from graphmend.core.jobs import Job, run_job
from graphmend.core.model import Break, Recompile, TargetResult
from graphmend.core.serial import from_dict
from graphmend.core.sources import SourceError, read_source
from graphmend.verify.modes import CHECK_NAMES, COMPILED_RUNS
from rewrites.rules import RULES

WORKER = "graphmend.verify.worker"


@dataclass
class Surfaced:
    """A break the fix let Dynamo reach: the graph split at ``split`` before (for the breaks
    at ``hid``, which the fix removed) and still does, now further in, at ``where``."""

    where: str  # "GM401 at file.py:12: reason"
    split: str  # "file.py:30"
    hid: list[tuple[str, int]]  # (real path, original line) of the breaks that hid it
    # set when the hiding break made Dynamo skip this whole function (a break in a loop):
    # it ran eagerly before, and compiles now up to ``where``
    skipped: Optional[str] = None

    def note(self) -> str:
        if self.skipped:
            return (f"Dynamo no longer skips `{self.skipped}` (the break at {self.split} made it run eagerly); "
                    f"it now compiles it and stops at {self.where}")
        return f"the graph still splits at {self.split}: Dynamo now gets further and stops at {self.where}"


@dataclass
class Verdict:
    error: Optional[str] = None
    mismatches: list[str] = field(default_factory=list)
    new_breaks: list[str] = field(default_factory=list)
    # breaks at a place where the graph was already split, for a reason the fix removed:
    # Dynamo now gets further into the same call before it stops (see compare_breaks)
    surfaced: list[Surfaced] = field(default_factory=list)
    remaining_keys: list[tuple] = field(default_factory=list)
    key_lines: dict = field(default_factory=dict)  # before-key -> its original lines
    breaks_after: int = 0
    unexercised: list[str] = field(default_factory=list)
    # what was proven: the checks that ran (eval, train+grad, autocast, bf16), the ones the
    # original could not serve (name -> why), and which way each condition went
    checks: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    arms: dict[str, list[bool]] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    graphs_grew: Optional[str] = None
    # train-mode differences accepted as float32 rounding (equal in float64), one line each
    rounding: list[str] = field(default_factory=list)
    remaining_reasons: list[str] = field(default_factory=list)
    # the recompiles (not the first size change automatic dynamic shapes expects) over the
    # target's calls, before and with the patches; each one left, in Dynamo's words
    recompiles_before: int = 0
    recompiles_after: int = 0
    recompiles_left: list[str] = field(default_factory=list)
    recompiles_grew: Optional[str] = None
    # more recompiles accepted as warm-up (compare_recompiles): what they are and why they may stay
    recompiles_warmup: Optional[str] = None
    # the patched calls run once more under set_stance("fail_on_recompile") (TargetResult.replay_recompile)
    replay_recompile: Optional[str] = None
    after: Optional[TargetResult] = None
    # the breaks left, in ORIGINAL coordinates (before-breaks still there) plus new ones
    remaining_breaks: list = field(default_factory=list)
    # the breaks the original's capture did not log (new or surfaced) at a line of the file
    # on disk: what a further round of rewrites may fix
    exposed: list = field(default_factory=list)
    # every file the two sides' runs read (graphmend.core.cache.reads): a kept verdict holds
    # only while they are unchanged
    read: list[str] = field(default_factory=list)


@dataclass
class Original:
    """The original side of a target's verification, run once and shared by every attempt
    (each set of rewrites tried): its records are in ``state``, a file of ``tmp``."""

    spec: dict
    state: str
    result: dict = field(default_factory=dict)
    error: Optional[str] = None
    read: list[str] = field(default_factory=list)  # the files its run read
    timeout: float = 300.0
    memory_limit: Optional[int] = None
    # why the original compiled does not show what it shows in eager ("" where it does),
    # once a patched program's compiled run differed: None until then
    compiled_differs: Optional[str] = None

    def probe_compiled(self, seed: int, patched: Optional[str]) -> tuple[str, Optional[str]]:
        """The original's compiled calls against its eager ones (compiled once for every
        attempt): why they differ ("" where they agree); and where they do, how the patched
        side's compiled calls (the file ``patched``) differ from the original's compiled ones
        (None where they agree, or where there is nothing to compare)."""
        if self.compiled_differs == "":
            return "", None
        payload = {"spec": self.spec, "mode": "probe", "state": self.state, "seed": seed, "patched": patched}
        out = run_job(Job(WORKER, payload, label=self.spec["name"], timeout=self.timeout,
                          memory_limit=self.memory_limit, warm=True))
        error = out.error or (out.result or {}).get("error")
        # a probe that could not run tells nothing: the difference stands
        self.compiled_differs = "" if error else (out.result or {}).get("compiled_differs") or ""
        agrees = (out.result or {}).get("agrees", "not compared") if patched else "not compared"
        return self.compiled_differs, agrees


def _read(result: Optional[dict], state: str) -> list[str]:
    """The files a worker's run read, less the ones verification itself keeps beside ``state``."""
    scratch = os.path.join(os.path.dirname(os.path.realpath(state)), "")
    files = (result or {}).get("read") or []
    return [f for f in files if isinstance(f, str) and not f.startswith(scratch)]


def run_original(spec: Any, conditions: dict[str, list], tmp: str, timeout: float, seed: int = 0,
                 probe_dtype: Optional[str] = None, constants: Sequence[float] = (),
                 memory_limit: Optional[int] = None) -> Original:
    """The original program in a fresh worker, instrumented at ``conditions`` (every
    condition any attempt rewrites) to record which way each went; ``constants``: numbers the
    rewritten conditions compare against (inputs filled with them are tried until every arm
    has run); with ``probe_dtype`` it is traced once more in that dtype."""
    spec_d = dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else dict(spec)
    state = os.path.join(tmp, "state.pt")
    out = run_job(Job(WORKER, {"spec": spec_d, "mode": "original", "conditions": conditions,
                               "constants": list(constants), "state": state, "seed": seed,
                               "probe_dtype": probe_dtype}, label=spec_d["name"], timeout=timeout,
                          memory_limit=memory_limit, warm=True))
    error = out.error or (out.result or {}).get("error")
    return Original(spec_d, state, out.result or {}, f"original run: {error}" if error else None,
                    _read(out.result, state), timeout, memory_limit)


def verify_target(original: Original, patches: dict[str, str], before: TargetResult, texts: dict[str, str],
                  timeout: float, seed: int = 0, probe_dtype: Optional[str] = None,
                  memory_limit: Optional[int] = None, calls: int = 1) -> Verdict:
    """The patched side against ``original``: ``patches`` applied through the overlay, the
    original's calls replayed and compared record by record, then re-traced over ``calls``
    calls (the capture's: the later ones of other sizes); with ``probe_dtype``, the patched
    program must trace in that dtype wherever the original does."""
    v = Verdict(read=list(original.read))
    if original.error:
        v.error = original.error
        return v
    res = original.result
    v.unexercised = [_short(u) for u in res.get("unexercised", [])]
    v.checks = list(res.get("checks", []))
    v.skipped = dict(res.get("skipped", {}))
    v.arms = {k: list(a) for k, a in (res.get("arms") or {}).items()}
    v.inputs = list(res.get("inputs", []))
    # re-traced in the run mode the breaks were captured in: what the fix must remove is there
    pat = run_job(Job(WORKER, {"spec": original.spec, "mode": "patched", "patches": patches, "state": original.state,
                               "seed": seed, "retrace": True, "probe_dtype": probe_dtype, "run_mode": before.run_mode,
                               "calls": calls},
                      label=original.spec["name"], timeout=timeout, memory_limit=memory_limit, warm=True))
    v.read = sorted(set(v.read) | set(_read(pat.result, original.state)))
    if pat.error or (pat.result or {}).get("error"):
        v.error = f"patched run: {pat.error or pat.result.get('error')}"
        return v
    v.mismatches = list(pat.result.get("mismatches", []))
    compiled = next((c for c in (CHECK_NAMES[m] for m in COMPILED_RUNS) if c in v.checks), None)
    v.rounding = list(pat.result.get("rounding", []))
    if pat.result.get("compiled_differs") and compiled and any(m.startswith(compiled) for m in v.mismatches):
        why, other = original.probe_compiled(seed, pat.result.get("compiled_calls"))
        if why:  # the original differs from its eager self too: eager cannot be the reference
            v.mismatches = [m for m in v.mismatches if not m.startswith(compiled)]
            if other is None:  # the compiler's own difference, made the same way by both
                v.rounding.append(f"{compiled}: {why}; the patched program compiled shows what the original "
                                  "compiled shows")
            else:  # the check cannot tell, and says why
                v.checks = [c for c in v.checks if c != compiled]
                v.skipped[compiled] = f"{why}; the patched program compiled differs from both: {other}"
    if probe_dtype and not res.get("probe") and pat.result.get("probe"):
        v.error = f"re-trace in {probe_dtype}: {pat.result['probe']}"
        return v
    cap = pat.result.get("capture") or {}
    if cap.get("error") and not cap.get("breaks") and "name" not in cap:
        v.error = f"re-trace: {cap['error']}"
        return v
    after = from_dict(TargetResult, cap)
    v.after = after
    if after.error and not before.error:
        v.error = f"re-trace: {after.error}"
        return v
    compare_breaks(v, before, after, patches, texts)
    compare_recompiles(v, before, after)
    # more graphs is a worse split, unless frames Dynamo skipped before (ran eagerly) now compile
    if after.graph_count > before.graph_count and after.frames_skipped >= before.frames_skipped:
        v.graphs_grew = (f"the target now compiles to {after.graph_count} graphs instead of {before.graph_count} "
                         f"({'; '.join(v.remaining_reasons[:2]) or 'no break reported'})")
    return v


# -- what a break is, across a patch that moved it --------------------------------------

def _source_line(text_by_file: dict[str, str], file: str, line: int) -> str:
    text = text_by_file.get(file)
    if text is None:
        try:
            text = read_source(file)
        except SourceError:
            return ""
        text_by_file[file] = text
    lines = text.splitlines()
    return " ".join(lines[line - 1].split()) if 0 < line <= len(lines) else ""


def break_key(b: Break, texts: dict[str, str]) -> tuple:
    """What identifies a break across line shifts: (file, function, source text, kind)."""
    f = os.path.realpath(b.file) if b.file else ""
    src = _source_line(texts, f, b.line) if f and b.line else (b.source_line or "")
    return (f, b.function or "", src, b.kind)


def split_key(b: Break, texts: dict[str, str]) -> tuple:
    """Where the graph was split for ``b``: its outermost user frame (the instruction of the
    compiled frame Dynamo stopped at), keyed like ``break_key``."""
    if not b.stack:
        return break_key(b, texts)[:3]
    top = b.stack[0]
    f = os.path.realpath(top.file)
    return (f, top.function or "", _source_line(texts, f, top.line))


def break_keys(breaks: Sequence[Break], texts: dict[str, str]) -> dict[tuple, Break]:
    """Breaks keyed by ``break_key``."""
    return {break_key(b, texts): b for b in breaks}


_UNBACKED_GUARD = "data-dependent expression"  # Dynamo's words for a guard on an unbacked symbol


def compare_breaks(v: Verdict, before: TargetResult, after: TargetResult, patches: dict[str, str],
                   texts: dict[str, str]) -> None:
    """Fill ``v`` with what the re-trace ``after`` (of the program with ``patches``) says
    against ``before``: new breaks, surfaced ones, the breaks left and why."""

    before_keys = break_keys(before.breaks, dict(texts))
    after_texts = dict(texts)
    after_texts.update({os.path.realpath(p): t for p, t in patches.items()})
    after_keys = break_keys(after.breaks, after_texts)
    v.breaks_after = len(after.breaks)
    # a frame Dynamo skipped before (a break in its loop) and still skips, now named after the
    # first break left in the loop (a diffusers sampling loop once a scheduler's first break is
    # fixed), is the same skip, not a new break: as many skips went as came, no more frames skipped
    gone = [k for k, b in before_keys.items() if b.kind == "frame_skipped" and k not in after_keys]
    came = [k for k, b in after_keys.items() if b.kind == "frame_skipped" and k not in before_keys]
    same_skips = set(came[:len(gone)]) if after.frames_skipped <= before.frames_skipped else set()
    # breaks that were there before keep the line of the file on disk (an added import
    # shifts the patched text); new ones are named at the original line they map to
    moved = {k: _in_original(b, after_texts, texts) for k, b in after_keys.items() if k not in before_keys}
    # where the graph split for a reason the fix removed
    gone_splits: dict[tuple, list] = {}
    for k, b in before_keys.items():
        if k not in after_keys and b.stack:
            gone_splits.setdefault(split_key(b, texts), []).append(b)
    fewer = after.graph_break_count < before.graph_break_count
    # frames Dynamo skipped before (a break in a loop: the whole function ran eagerly) and
    # compiles now: a break further in was there all along, hidden by the skip
    was_skipped = {(os.path.realpath(b.skipped_frame.file or ""), _user_function(b.skipped_frame.function)): b
                   for k, b in before_keys.items() if b.kind == "frame_skipped" and b.skipped_frame is not None
                   and k not in after_keys}
    # a guard on an unbacked int where the original had none is the rewrite's own doing (the
    # sizes it kept in the graph), never a break the removed split hid
    unbacked_before = any(_UNBACKED_GUARD in (b.reason or "") for b in before.breaks)
    for k, b in moved.items():
        if b.line is not None:
            v.exposed.append(b)  # a further round may fix it (fixing.FOLLOW_ROUNDS)
        line = b.line if b.line is not None else f"{after_keys[k].line} (a line the rewrite wrote)"
        where = f"{b.rule} at {os.path.basename(b.file or '?')}:{line}: {b.reason}"
        hid = gone_splits.get(split_key(after_keys[k], after_texts))
        skip = was_skipped.get((os.path.realpath(b.file or ""), _user_function(b.function or ""))) \
            if b.line is not None else None
        caused = not unbacked_before and _UNBACKED_GUARD in (b.reason or "")
        if caused:
            v.new_breaks.append(where)
        elif fewer and hid and b.line is not None:
            top = hid[0].stack[0]
            v.surfaced.append(Surfaced(where, f"{os.path.basename(top.file)}:{top.line}",
                                       [(os.path.realpath(h.file or ""), h.line) for h in hid]))
        elif skip is not None:
            v.surfaced.append(Surfaced(where, f"{os.path.basename(skip.file or '')}:{skip.line}",
                                       [(os.path.realpath(skip.file or ""), skip.line)],
                                       skipped=skip.skipped_frame.function))
        elif k not in same_skips:
            v.new_breaks.append(where)
    for k, b in before_keys.items():
        v.key_lines.setdefault(k, []).append(b.line)
        if k in after_keys:
            v.remaining_keys.append(k)
            v.remaining_breaks.append(b)
    v.remaining_breaks += [b if b.line is not None else after_keys[k] for k, b in moved.items()]
    v.remaining_reasons = []
    for b in after.breaks:
        key = break_key(b, after_texts)
        b = before_keys[key] if key in before_keys else moved.get(key, b)
        line = b.line if b.line is not None else after_keys[key].line
        v.remaining_reasons.append(f"{b.rule} {os.path.basename(b.file or '')}:{line}: {b.reason}")


# Recompiles a fix may add, as warm-up: those of a rule whose recompiles settle (a Python
# value automatic dynamic shapes then makes dynamic, a state None until the first call sets
# it, grad mode). A frame a break split off recompiled on its own; merged into its caller,
# the caller recompiles for both. Not a size's or a container's length: each new one in use
# would compile again, which calls made again with the same sizes cannot show.
WARMUP_RULES = frozenset(r.code for r in RULES if r.settles)


def _recompile_key(r: Recompile) -> tuple:
    return (r.rule, r.expression or r.guard_source or r.reason)


def compare_recompiles(v: Verdict, before: TargetResult, after: TargetResult) -> None:
    """The recompiles of the re-trace against the capture's, over the same calls: the patched
    program may not recompile more (a fix that makes a Python number of the graph change per
    call would recompile on every call), nor recompile when the calls are made once more where
    the original did not. More recompiles stay acceptable as warm-up where ``warmup_refusal`` finds no reason against."""
    was, now = before.caused_recompiles, after.caused_recompiles
    v.recompiles_before, v.recompiles_after = len(was), len(now)
    v.recompiles_left = [f"{r.rule} {r.function}: {r.reason}" for r in now]
    v.replay_recompile = after.replay_recompile
    if len(now) > len(was):
        grew = (f"the target now recompiles {len(now)} time(s) over its calls instead of {len(was)} "
                f"({v.recompiles_left[0]})")
        refused = warmup_refusal(before, after)
        if refused:
            v.recompiles_grew = f"{grew}; {refused}"
        else:
            v.recompiles_warmup = (f"{len(now) - len(was)} more recompile(s) over its calls ({len(now)} instead of "
                                   f"{len(was)}), while it warms up: the calls made again compile nothing, and "
                                   f"each call runs {before.graph_count - after.graph_count} graph(s) fewer")
    elif before.replay_recompile == "" and after.replay_recompile:
        # settled before: a later call of the same sizes now compiles again (a value that changes per call)
        v.recompiles_grew = f"its calls recompile again when made once more ({after.replay_recompile})"


def warmup_refusal(before: TargetResult, after: TargetResult) -> Optional[str]:
    """Why the patched program's added recompiles are not warm-up, or None when they are:
    the calls made once more compile nothing; none reached the recompile limit; each one
    added is of a kind in ``WARMUP_RULES``; and no more are added than graphs each call
    loses, so the calls compile no more graphs in all than the original's did."""
    was, now = before.caused_recompiles, after.caused_recompiles
    if after.replay_recompile != "":
        return ("its calls recompile again when made once more" if after.replay_recompile
                else "its calls were not made again to show it settles")
    if any(r.limit for r in now):
        return "a frame reaches the recompile limit"
    left = Counter(_recompile_key(r) for r in was)
    added = []
    for r in now:
        if left[_recompile_key(r)] > 0:
            left[_recompile_key(r)] -= 1
        else:
            added.append(r)
    other = next((r for r in added if r.rule not in WARMUP_RULES), None)
    if other is not None:
        return f"{other.rule} {other.function}: {other.reason} is not a warm-up recompile"
    if len(now) - len(was) > before.graph_count - after.graph_count:
        return (f"more than the {max(0, before.graph_count - after.graph_count)} graph(s) each call no longer "
                f"compiles")
    return None


_RESUME = re.compile(r"^torch_dynamo_resume_in_(\w+?)_at_\d+$")


def _user_function(name: str) -> str:
    """``torch_dynamo_resume_in_forward_at_25`` (the rest of ``forward`` after a break) -> ``forward``."""
    m = _RESUME.match(name)
    return m.group(1) if m else name


def _in_original(b: Any, patched: dict[str, str], original: dict[str, str]) -> Any:
    """``b`` (a break in the patched program) at its line of the file on disk; ``line`` is
    None when that line is one the rewrite wrote."""
    f = os.path.realpath(b.file) if b.file else ""
    if f not in patched or f not in original or b.line is None:
        return b
    return dataclasses.replace(b, line=original_line(original[f], patched[f], b.line))


def original_line(original: str, patched: str, line: int) -> Optional[int]:
    """The 1-based line of ``original`` that line ``line`` of ``patched`` is an unchanged copy
    of, or None when the patch wrote it."""
    for i, j, n in _matching_blocks(original, patched):
        if j < line <= j + n:
            return i + line - j
    return None


@functools.lru_cache(maxsize=8)
def _matching_blocks(original: str, patched: str) -> tuple:
    # one diff per patched file, however many of its breaks are looked up
    sm = difflib.SequenceMatcher(None, original.splitlines(), patched.splitlines(), autojunk=False)
    return tuple(sm.get_matching_blocks())


def _short(entry: str) -> str:
    """``/abs/dir/file.py:12:8 never taken`` -> ``file.py:12:8 never taken``."""
    path, _, rest = entry.partition(".py:")
    return f"{os.path.basename(path)}.py:{rest}" if rest else entry
