"""The tables over many models. ``mend sweep``'s: one row per architecture and run mode, the
root causes of breaks and recompiles over the whole sweep with their fan-out, the changes
against a baseline sweep, the population table of ``mend sweep --fix`` and the report that
holds them (``SweepReport.to_json``, read back by ``--baseline``). The corpus table's
(``mend corpus``): breaks before and after ``mend fix``, per target.

They share ``SCHEMA_VERSION`` and the generic (de)serialisation of ``graphmend.core.model``;
that module does not import this one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from graphmend.core.model import SCHEMA_VERSION, readable_major
from graphmend.core.serial import from_dict, to_dict

# SweepRow.status
SWEEP_CLEAN = "one graph"  # ran, no break (explain's count and the log's)
SWEEP_BREAKS = "breaks"
SWEEP_NOT_BUILT = "not built"  # the architecture did not build tiny from its config (why says why)
SWEEP_FAILED = "failed"  # built, but the capture errored, hung or crashed


@dataclass
class SweepRow:
    """One architecture in one run mode, with the counts ``mend analyze`` of its generated
    target gives (they come from the same capture)."""

    model: str  # the library's name for it ("bert", "gpt2")
    run_mode: str
    status: str  # SWEEP_*
    target: str = ""  # the generated target's name (TargetResult.name)
    graph_count: int = 0  # as torch._dynamo.explain counts
    graph_break_count: int = 0
    breaks: int = 0  # distinct breaks listed, counted by explain or not
    frames_skipped: int = 0
    # recompiles over the target's calls, those automatic dynamic shapes expect left out (each
    # has a GM7xx rule); of them, those placed at a source line (Recompile.located)
    recompiles: int = 0
    recompiles_located: int = 0
    # of them, those in a frame Dynamo compiled only because a graph break split its caller
    recompiles_after_break: int = 0
    recompile_limit: bool = False  # one reached the recompile limit: the frame ran in eager after
    why: str = ""  # not built / failed: one line
    where: list[str] = field(default_factory=list)  # "file:line" of its first breaks
    causes: list[int] = field(default_factory=list)  # indexes into SweepReport.causes
    fixable: int = 0  # of its distinct breaks, those whose cause has a safe fix
    fixable_unsafe: int = 0  # those only an --unsafe-fixes rewrite covers
    duration_s: float = 0.0
    library: str = ""
    modality: str = ""  # the library module's word for its inputs: text, vision, audio, ...
    # after mend sweep --fix (mend fix over the pair's target, verification only): FIX_* or ""
    # (not fixed: it did not break, or --fix was not asked)
    fix: str = ""
    breaks_after: Optional[int] = None  # logged breaks left with the target's passing fixes applied
    breaks_removed: int = 0  # fix's breaks_before - breaks_after
    # the recompiles over the fix's own calls left with the passing fixes applied, and those
    # they removed (fix's recompiles_before - recompiles_after)
    recompiles_after: Optional[int] = None
    recompiles_removed: int = 0
    fix_why: str = ""  # error / not kept: one line


# SweepRow.fix: how the breaks (and recompiles) mend fix removed from a pair were removed
FIX_VERIFIED = "verified"  # every rewrite that removed them is verified: safe, what --write writes
FIX_PARTIAL = "partial"  # one of them is partially verified (a skipped check, a caveat): counted apart
FIX_NOT_KEPT = "not kept"  # one of them was rejected for another target, or measured slower: not written
FIX_NONE = "none"  # no rewrite removed a break or a recompile
FIX_ERROR = "error"  # mend fix could not run the target


@dataclass
class PopulationRow:
    """One line of the population table (``mend sweep --fix``): one library and modality, or
    its total (modality "all"). Counted by the sweep stage from the rows; renderers show it."""

    library: str
    modality: str
    enumerated: int = 0  # models the sweep ran
    built: int = 0  # built in at least one mode
    pairs: int = 0  # (model, mode) pairs that ran to a capture (clean or breaking)
    breaking: int = 0  # of them, those that break
    breaks: int = 0  # Dynamo's logged breaks over the breaking pairs (SweepRow.breaks)
    graph_breaks: int = 0  # explain's graph_break_count over them
    removed: int = 0  # logged breaks removed by verified (safe) fixes
    zeroed: int = 0  # breaking pairs verified fixes bring to zero logged breaks
    removed_partial: int = 0  # removed where a partially verified fix took part (not safe)
    zeroed_partial: int = 0
    removed_not_kept: int = 0  # removed by a rewrite mend fix would not write (rejected elsewhere, slower)
    fix_errors: int = 0  # breaking pairs mend fix could not run
    removed_pct: float = 0.0  # removed / breaks, in percent
    recompiling: int = 0  # pairs that ran and recompiled (SweepRow.recompiles)
    recompiles: int = 0  # their recompiles
    recompiles_located: int = 0  # of them, those placed at a source line (Recompile.located)
    recompiles_after_break: int = 0  # of them, those in a frame compiled only after a break (Recompile.after_break)
    # recompiles removed by verified fixes (mend fix over the pairs that break or recompile)
    recompiles_removed: int = 0


@dataclass
class SweepCause:
    """One root cause over the whole sweep: the same rule on the same source line with the same
    Dynamo reason, however many files carry that line (transformers copies code between
    models) and however many models hit it. Counted once, with its fan-out."""

    rule: str
    category: str
    reason: str  # Dynamo's first line
    source: str = ""  # the offending line, whitespace-normalised
    gb_type: Optional[str] = None
    sites: list[str] = field(default_factory=list)  # "file:line", library-relative
    models: list[str] = field(default_factory=list)  # architectures that hit it (any mode)
    modes: list[str] = field(default_factory=list)
    breaks: int = 0  # (model, mode, break) records it accounts for
    fan_out: int = 0  # dynamic occurrences (every layer, every recompile)
    counted: bool = False  # explain counted it somewhere
    frames_skipped: int = 0  # frames Dynamo skipped because of it
    fix: str = "advice"  # "safe" (mend fix) | "unsafe" (--unsafe-fixes) | "advice" | "none" (no rule: GM9xx)
    fix_why: str = ""  # where no site plans a rewrite: the planner's reason at the first site
    # after mend sweep --fix: of ``breaks``, those verified fixes removed (the pair's fix is
    # verified and its re-trace has the break no more)
    removed: int = 0
    # after mend sweep --fix, where a rewrite is planned at a site: the first such rewrite
    # mend fix would not write, with its verdict ("rejected: a new break appeared: ...")
    verdict: str = ""


@dataclass
class SweepRecompileCause:
    """One cause of recompiles over the whole sweep: the same GM7xx rule guarding the same
    value (the guarded line's text, else what the guard holds, in the recompiled function),
    however many files carry it and models hit it."""

    rule: str
    what: str  # the guarded line, whitespace-normalised; else the expression the guard holds
    reason: str  # the first failed guard, in Dynamo's words (one line)
    function: str = ""  # the function that recompiled
    sites: list[str] = field(default_factory=list)  # "file:line", library-relative; where it is told
    models: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    recompiles: int = 0  # recompiles it accounts for, over every model and mode
    located: int = 0  # of them, placed at a source line (Recompile.located)
    after_break: int = 0  # of them, in a frame compiled only because a break split its caller
    limit: bool = False  # some model reached the recompile limit through it (eager from then on)


@dataclass
class SweepChange:
    """One architecture and run mode against the baseline sweep."""

    model: str
    run_mode: str
    kind: str  # "breaks" (was one graph) | "graphs" (more graphs) | "fails" (ran, now does not) | the improvements: "fixed" | "fewer graphs" | "runs"
    before: str = ""  # "1 graph, 0 breaks" / "not built: ..." in words
    after: str = ""


@dataclass
class SweepTotals:
    enumerated: int = 0  # architectures the enumeration kept (and --only left)
    skipped: int = 0  # architectures of the library that were not kept (not text, ...)
    built: int = 0  # built in at least one mode
    not_built: int = 0
    runs: int = 0  # (architecture, mode) pairs run
    by_mode: dict[str, dict[str, int]] = field(default_factory=dict)  # mode -> status -> architectures
    causes: int = 0
    causes_safe: int = 0
    causes_unsafe: int = 0
    breaks: int = 0  # distinct (model, mode, break) records
    breaks_fixable: int = 0  # of them, under a cause with a safe fix
    breaks_fixable_unsafe: int = 0
    wall_s: float = 0.0
    runs_per_hour: float = 0.0  # (architecture, mode) pairs per hour of this sweep's wall time
    regressions: Optional[int] = None  # with a baseline
    improvements: Optional[int] = None


@dataclass
class SweepReport:
    """What ``mend sweep`` produced: every architecture and mode, the root causes, the changes
    against a baseline. Renderers (reports.sweep) only show it."""

    library: str
    library_version: str = ""
    schema_version: str = SCHEMA_VERSION
    graphmend_version: str = ""
    torch_version: Optional[str] = None
    python_version: str = ""
    platform: str = ""
    cpus: int = 0
    jobs: int = 1
    executor: str = "local"  # where the jobs ran: local worker processes, or ray tasks
    fullgraph: bool = False  # compiled as torch.compile(fullgraph=True): a break is the first, which raised
    run_modes: list[str] = field(default_factory=lambda: ["eval"])
    selection: str = ""  # how architectures were chosen, in words
    command: str = ""
    targets_dir: str = ""  # where the generated targets are (kept with --targets-dir)
    rows: list[SweepRow] = field(default_factory=list)  # model-major, modes in order
    causes: list[SweepCause] = field(default_factory=list)  # most models first
    recompile_causes: list[SweepRecompileCause] = field(default_factory=list)  # most recompiles first
    skipped: dict[str, str] = field(default_factory=dict)  # model -> why the enumeration left it out
    baseline: Optional[str] = None
    regressions: list[SweepChange] = field(default_factory=list)
    improvements: list[SweepChange] = field(default_factory=list)
    totals: SweepTotals = field(default_factory=SweepTotals)
    fix_note: str = ""  # what "fixable" means in this report
    # mend sweep --fix: per modality, then the library's total (modality "all")
    population: list[PopulationRow] = field(default_factory=list)
    fix_wall_s: float = 0.0  # of totals.wall_s, the time mend fix took

    def to_json(self, indent: Optional[int] = 1) -> str:
        return json.dumps(to_dict(self), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> "SweepReport":
        data = json.loads(text)
        if not isinstance(data, dict) or "rows" not in data or "library" not in data:
            raise ValueError("not a mend sweep report (no library and rows)")
        # 2.0 changed the analysis report's issues only: a 1.x sweep report (a CI baseline) reads as it is
        readable_major(data.get("schema_version", ""))
        return from_dict(cls, data)


# -- the corpus table -----------------------------------------------------------------------

@dataclass
class CorpusRow:
    """One target of the corpus table (``mend corpus``): breaks before and after ``mend fix``."""

    target: str  # "<file>::<function>"
    before_by_category: dict[str, int] = field(default_factory=dict)
    breaks_before: int = 0
    breaks_after: int = 0
    fixed: int = 0  # breaks_before - breaks_after, never below 0
    fixable: Optional[int] = None  # manifest sites marked fixable (and reported by this torch)
    fixable_removed: Optional[int] = None
    outputs_equal: Optional[bool] = None
    unexercised: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)  # "rule file:line: why it stays"
    error: Optional[str] = None
    hf: bool = False
    graph_breaks_before: Optional[int] = None  # torch._dynamo.explain's graph_break_count
    graph_breaks_after: Optional[int] = None


@dataclass
class CorpusTable:
    root: str
    torch_version: Optional[str] = None
    transformers_version: Optional[str] = None
    skipped_hf: bool = False
    categories: list[str] = field(default_factory=list)  # column order
    rows: list[CorpusRow] = field(default_factory=list)
    totals: Optional[CorpusRow] = None
