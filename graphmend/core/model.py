"""The data model: every stage speaks in these plain dataclasses.

Findings, breaks, fixes, bench rows and the report cross stage borders only in these types,
and their JSON form (``Report.to_json``) is a contract that other tools read. Bump
``SCHEMA_VERSION`` on any incompatible change. The tables over many models (``mend sweep``'s
and the corpus table) are in ``graphmend.core.tables``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from graphmend.core.serial import from_dict, to_dict

SCHEMA_VERSION = "2.0"


# Status values, kept as plain strings so the JSON stays readable.
CONFIRMED = "confirmed"  # a static finding a dynamic break hit at the same place
POTENTIAL = "potential"  # a static finding no target hit (or no target ran)
VERIFIED = "verified"  # a fix that passed re-trace and differential run
REJECTED = "rejected"  # a fix that was tried and failed verification or a precondition
UNVERIFIED = "unverified"  # a fix whose checks passed on inputs that never ran one of its rewritten arms
ADVICE = "advice"  # no automatic fix: what to do by hand, and why
# a fix that passed verification but whose compiled program measured slower than the
# original's beyond noise (mend fix --bench): written only with --allow-slower
REGRESSES = "regresses"
# a fix that passed every check that ran, on a partial proof (Fix.partial says why): a check
# that could observe a difference did not run, or a caveat its family documents applies;
# written only with --accept-partial (a caveat: --unsafe-fixes, which alone plans it)
PARTIAL = "partially verified"
# Issue statuses beyond CONFIRMED and POTENTIAL (a Finding's status is one of the four too)
DYNAMIC = "dynamic"  # a dynamic break no static rule found
UNREACHED = "unreached"  # a static finding inside a frame Dynamo skipped: it ran in eager, never traced


@dataclass
class Frame:
    """One frame of a break's stack."""

    file: str
    line: int
    function: str
    source: Optional[str] = None  # the line's text, stripped, where kept (library frames)


@dataclass
class Break:
    """One distinct graph break Dynamo reported, at its innermost user frame."""

    rule: str  # GMxxx code; GM9xx when no rule explains it
    category: str  # rule family name, e.g. "control-flow", "side-effect"
    reason: str  # Dynamo's first line
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    gb_type: Optional[str] = None  # Dynamo's graph-break type, where the torch has it
    registry_id: Optional[str] = None  # id in torch's graph-break registry (GB0xxx)
    # Dynamo's "Developer debug context": what it held ("attempted to jump with SymNodeVariable()")
    context: str = ""
    file: Optional[str] = None
    line: Optional[int] = None
    col: Optional[int] = None  # 0-based, as ast/libcst/Dynamo give it; renderers show col + 1
    source_line: Optional[str] = None  # the file's line as it is (indentation kept; col indexes it)
    function: Optional[str] = None
    occurrences: int = 1
    stack: list[Frame] = field(default_factory=list)
    # False for breaks explain() does not count (frame skipped, break at a resume start).
    counted: bool = True
    kind: str = "graph_break"  # "graph_break" | "frame_skipped"
    compiled_function: Optional[str] = None  # the torch.compile'd callable (mend run)
    end_col: Optional[int] = None  # 0-based, exclusive: end of the offending expression on `line`
    phase: str = "forward"  # "backward": hit tracing the backward under compiled autograd
    # the target's call that first hit it: above 1, only a later call (other sizes) did
    call: int = 1
    # set when a target ran in both run modes and only this one hit the break
    only_in_mode: Optional[str] = None
    # frame_skipped only: the frame Dynamo gave up on, as its message names it (the code's
    # name, maybe a resume function, and its first line); it ran in eager
    skipped_frame: Optional[Frame] = None
    # the code below the innermost user frame that Dynamo broke in (the standard library, an
    # installed package, a Dynamo polyfill), outermost first, the failing line last; empty
    # when it broke on the user's own line. The user line is where it was called from.
    library: list[Frame] = field(default_factory=list)


# "tensor 'mems' rank mismatch. expected 1, actual 3": a guard on one of the function's tensors;
# "Duplicate tensors found: ["timestep", "prev_timestep"]": on two of them being one tensor
_TENSOR_GUARD = re.compile(r"tensor '[^']+' |Duplicate tensors found")


@dataclass
class Recompile:
    """Dynamo compiled a function again: a guard of its cached graph failed. Not a graph break."""

    function: str
    reason: str  # the guard that failed, in Dynamo's words
    file: Optional[str] = None  # the recompiled function's
    line: Optional[int] = None
    # the user line whose value the failed guard checks, where Dynamo's record names it
    guard_file: Optional[str] = None
    guard_line: Optional[int] = None
    guard_source: Optional[str] = None  # that line's text, stripped
    call: int = 1  # the target's call that recompiled (1: the first; mend analyze --calls makes more)
    # the cause (tracer.classify.classify_recompiles): a GM7xx code; "" when none (``expected``,
    # or a report saved before recompiles were classified): no issue
    rule: str = ""
    # the first size change of a dimension: automatic dynamic shapes made the size dynamic
    # (one recompile per function and dimension, what Dynamo is meant to do)
    expected: bool = False
    expression: Optional[str] = None  # what the guard holds, as the code spells it: self.step, x.shape[1]
    # this recompile reached torch._dynamo.config.recompile_limit: the function runs in eager from then on
    limit: bool = False
    # Dynamo's id of the recompiled frame: 0 is the first frame it compiled, the target's own
    # entry; a later one is a frame compiled on its own because a frame that called it broke
    # (a resume function, a callee it could not inline), so the recompile goes with that break
    frame: Optional[int] = None
    # frame 0's code entered again, by a frame compiled on its own: a decorator's wrapper that
    # is the entry and also wraps functions a graph break left to run as frames of their own
    # (Dynamo numbers frames by code, so they share the entry's 0). Told by the recompile
    # coming in the target's first call, after another of frame 0 in the same call, or for a
    # function the code had never run (every cached version failed on the function's code).
    reentered: bool = False

    @property
    def after_break(self) -> bool:
        """Whether the recompiled frame is one Dynamo compiled only because a graph break split
        its caller (a recompile a fix of that break takes away with it)."""
        return bool(self.frame) or self.reentered

    @property
    def guarded(self) -> bool:
        """Whether Dynamo's record names the user line whose value the failed guard holds."""
        return bool(self.guard_file and self.guard_line)

    @property
    def located(self) -> bool:
        """Whether the recompile is placed at a source line: the user line whose value the failed
        guard holds, or, for a guard on a tensor argument (its size, stride, rank, dtype), the
        recompiled function's own line, whose argument the guard names."""
        return self.guarded or bool(self.file and self.line and _TENSOR_GUARD.match(self.reason or ""))

    @property
    def place(self) -> tuple[Optional[str], Optional[int]]:
        """Where the recompile is told: the guarded line where known, else the recompiled function's."""
        return (self.guard_file, self.guard_line) if self.guarded else (self.file, self.line)


@dataclass
class LoweringFailure:
    """A graph Dynamo captured that Inductor could not compile (``mend analyze --lower``):
    ``torch.compile`` raises there though Dynamo broke nothing."""

    reason: str  # the exception's first line, its type named ("LoweringException: AssertionError: ...")
    op: Optional[str] = None  # the op Inductor failed on ("aten._weight_int8pack_mm.default"), where known
    # the user's line that called it (the failing node's stack trace, innermost user frame)
    file: Optional[str] = None
    line: Optional[int] = None
    function: Optional[str] = None
    source_line: Optional[str] = None
    rule: str = "GM608"


@dataclass
class TargetResult:
    """The dynamic capture of one target."""

    name: str  # "<path relative to the analysed root>::<function>"
    file: str
    function: str
    # "eval": .eval() under no_grad; "train": .train(), grad on, a backward after the call
    run_mode: str = "eval"
    graph_count: int = 0  # as torch._dynamo.explain counts
    graph_break_count: int = 0  # as torch._dynamo.explain counts
    frames_skipped: int = 0
    ops_per_graph: list[int] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    error: Optional[str] = None
    duration_s: float = 0.0
    breaks: list[Break] = field(default_factory=list)
    # `mend fix` only (None elsewhere): the target re-traced with every verified fix applied,
    # as its FixTarget in `fix_targets` also says
    breaks_before: Optional[int] = None
    breaks_after: Optional[int] = None
    outputs_equal: Optional[bool] = None
    unexercised_branches: Optional[list[str]] = None
    calls: int = 1  # the calls the capture made (--calls): the graph figures are the first's
    # --calls > 1: those calls once more under torch.compiler.set_stance("fail_on_recompile"):
    # "" none recompiled (the program settled), else the recompile refused; None: not told
    replay_recompile: Optional[str] = None
    # train mode with compiled autograd only: the backward's graphs (breaks: phase "backward")
    backward_graph_count: Optional[int] = None
    # torch._dynamo.config.nested_graph_breaks as the capture ran (None: this torch has no such option)
    nested_graph_breaks: Optional[bool] = None
    # --fullgraph: compiled as torch.compile(fullgraph=True), which raises at the first break
    # (that break the one recorded) and traces data-dependent scalars and shapes the default
    # compile breaks on
    fullgraph: bool = False
    # --lower only: the graphs Inductor could not compile for the CPU (None: not checked)
    lowering: Optional[list[LoweringFailure]] = None

    @property
    def caused_recompiles(self) -> list[Recompile]:
        """The recompiles with a cause (a GM7xx rule): every one but automatic dynamic shapes'
        first size change of a dimension, which is what Dynamo is meant to do."""
        return [r for r in self.recompiles if r.rule]


@dataclass
class Finding:
    """A static finding: a break pattern in the source."""

    rule: str
    file: str
    line: int
    col: int  # 0-based characters, like Break.col; renderers show col + 1
    message: str
    function: Optional[str] = None
    category: str = ""
    status: str = POTENTIAL
    end_line: Optional[int] = None
    end_col: Optional[int] = None
    source_line: Optional[str] = None
    fix_hint: str = ""


@dataclass
class SkippedFrame:
    """A frame Dynamo skipped because of a break inside one of its loops: the whole function
    (or, for a resume function, the rest of it) ran in eager, every graph it would have held
    lost. The costliest fact of a report, told first."""

    function: str  # qualified where the source says so: "TinyTransformer.forward"
    file: str
    line: int  # the def line (its first decorator's, as Dynamo counts)
    loop_line: Optional[int] = None  # the loop whose body broke (`for blk in self.blocks:`)
    resume_line: Optional[int] = None  # a resume function: it ran in eager from this line on
    targets: list[str] = field(default_factory=list)  # the targets (labels) where Dynamo skipped it
    # it ran in eager because it reached the recompile limit (GM706), not because of a break in a loop
    limit: bool = False
    # indexes into Report.issues of the findings in this frame Dynamo never reached
    hides: list[int] = field(default_factory=list)


@dataclass
class Said:
    """What the compiler said of an issue, as it said it: for a break, Dynamo's record of the
    break the issue quotes (its first line, explanation, hints, graph-break type and registry
    id), the user stack and the library frames it broke in; for a recompile the failed guard,
    for a lowering failure Inductor's reason (``reason`` alone)."""

    reason: str = ""
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    gb_type: Optional[str] = None
    registry_id: Optional[str] = None
    stack: list[Frame] = field(default_factory=list)
    library: list[Frame] = field(default_factory=list)

    @classmethod
    def of_break(cls, b: Break) -> "Said":
        return cls(reason=b.reason, explanation=b.explanation, hints=list(b.hints), gb_type=b.gb_type,
                   registry_id=b.registry_id, stack=list(b.stack), library=list(b.library))


@dataclass
class Issue:
    """One cause at one place: a static finding and the dynamic breaks it explains, merged,
    so that every format lists it once. ``fan_out`` counts what one root cause costs: the
    same line broken per layer, per expert, per recompile, in every target."""

    rule: str
    category: str
    status: str  # CONFIRMED | DYNAMIC | POTENTIAL | UNREACHED
    message: str  # the static finding's words, else Dynamo's reason
    file: Optional[str] = None
    line: Optional[int] = None
    col: Optional[int] = None  # 0-based
    end_line: Optional[int] = None
    end_col: Optional[int] = None  # 0-based, exclusive
    source_line: Optional[str] = None
    function: Optional[str] = None
    fix_hint: str = ""  # the static rule's
    also: list[str] = field(default_factory=list)  # other rule codes merged into this one
    # the dynamic evidence, whole: what the break (recompile, lowering failure) quoted here said
    said: Said = field(default_factory=Said)
    targets: list[str] = field(default_factory=list)  # target labels that hit it
    fan_out: int = 0  # dynamic occurrences over every target, mode, layer and recompile
    counted: bool = False  # torch._dynamo.explain counted it in some target
    only_in_mode: Optional[str] = None
    phase: str = "forward"
    # the frames Dynamo skipped because of this break (it sits in one of their loops)
    skipped: list[SkippedFrame] = field(default_factory=list)
    hidden_by: Optional[int] = None  # UNREACHED: index into Report.issues of the skip's cause
    # "safe": a fix family rewrites this rule (`mend fix`); "unsafe": only with --unsafe-fixes;
    # None: advice only. Where the analysis plans fixes (graphmend.fixing.plan_issues), the
    # planner's verdict at this very place, and ``fix_why`` says why it plans none
    fix: Optional[str] = None
    fix_why: str = ""
    findings: list[int] = field(default_factory=list)  # indexes into Report.findings
    breaks: list[list[int]] = field(default_factory=list)  # [target index, break index] pairs
    # a recompile issue (GM7xx): [target index, recompile index] pairs; fan_out counts them
    recompiles: list[list[int]] = field(default_factory=list)
    fixes: list[int] = field(default_factory=list)  # indexes into Report.fixes: the rewrites of this site
    # a lowering failure (GM608): the op Inductor failed on, and [target index, failure index]
    # pairs into TargetResult.lowering
    op: Optional[str] = None
    lowering: list[list[int]] = field(default_factory=list)

    @property
    def said_by(self) -> str:
        """Whose words ``said`` holds: the failed guard of a recompile, Inductor's for a lowering
        failure, Dynamo's for a break."""
        return "Failed guard" if self.recompiles else "Inductor" if self.lowering else "Dynamo"


@dataclass
class FileError:
    """A file or target that could not be processed; the run went on without it."""

    file: str
    message: str
    target: Optional[str] = None


@dataclass
class Replacement:
    """One edit of a fix, as SARIF's ``replacements`` take it: the text from (line, col) to
    (end_line, end_col) is replaced by ``text``. Lines 1-based, columns 0-based, the end
    exclusive; line endings in ``text`` are the file's own. Applied in order of position,
    each against the original file (a pure insertion deletes nothing: end == start)."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass
class Fix:
    """One proposed source rewrite and its verdict."""

    file: str
    line: int
    rule: str
    status: str  # VERIFIED | PARTIAL | UNVERIFIED | REJECTED | REGRESSES | ADVICE
    reason: str = ""
    diff: str = ""
    function: Optional[str] = None
    end_line: Optional[int] = None
    # Out-of-tree fixes (installed packages): the sys.path entry the module came from.
    import_root: Optional[str] = None
    advice: str = ""  # concrete replacement code, for ADVICE
    # what verification proved: the checks that ran and passed ("eval", "train+grad",
    # "autocast", "bf16", "inputs", "exceptions", "arms", "retrace") and the ones that could
    # not run, each "check: why" (a verified fix with "train+grad" here is verified eval only)
    checks: list[str] = field(default_factory=list)
    skipped_checks: list[str] = field(default_factory=list)
    # PARTIAL: what the proof lacks, one "check: why" per skipped check that could have seen a
    # difference, and "caveat: ..." for a documented one (the status's reason, in one place)
    partial: list[str] = field(default_factory=list)
    # the rewrite as edits of the original file (``diff`` structured): what SARIF's ``fixes`` carry
    replacements: list[Replacement] = field(default_factory=list)


@dataclass
class FixTarget:
    """A target re-traced with every verified fix applied."""

    name: str
    breaks_before: int
    breaks_after: int
    outputs_equal: Optional[bool] = None
    unexercised_branches: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)  # why each remaining break stays
    error: Optional[str] = None
    # breaks_* count distinct break sites; these are torch._dynamo.explain's graph_break_count
    # (a break in a loop or a repeated layer counts each time), before and after the fixes
    graph_breaks_before: Optional[int] = None
    graph_breaks_after: Optional[int] = None
    costs: list["CostCheck"] = field(default_factory=list)  # mend fix --bench: one per torch.compile mode
    # "file:line" of each rewrite the passing set applied to this target (Fix.file, Fix.line):
    # its Fix record's status says whether what this target lost is a verified fix's doing
    fixes: list[str] = field(default_factory=list)
    # the recompiles over the target's calls of other sizes (mend fix --calls; the first size
    # change automatic dynamic shapes expects left out), before and with the verified fixes
    recompiles_before: int = 0
    recompiles_after: int = 0


# CostCheck.verdict
SLOWER = "slower"  # the mended arm's median is above the original's beyond both spreads and the tolerance
NOT_SLOWER = "not slower"
# the mended arm failed where the original ran (a compile error in this mode): worse than slower
FAILS = "fails"
UNTOLD = "untold"  # an arm failed for a reason not its program's, or timings stayed unstable


@dataclass
class CostCheck:
    """The cost gate's measurement of one target in one torch.compile mode: its compiled
    original against its compiled mended program (every verified fix applied), timed in
    their own workers in the same run."""

    target: str
    mode: str  # torch.compile mode: default | reduce-overhead | max-autotune
    device: str
    run_mode: str = "eval"
    verdict: str = UNTOLD  # SLOWER | FAILS | NOT_SLOWER | UNTOLD
    ratio: Optional[float] = None  # mended median / original median
    original_ms: Optional[float] = None
    original_iqr_ms: Optional[float] = None
    mended_ms: Optional[float] = None
    mended_iqr_ms: Optional[float] = None
    graphs_original: Optional[int] = None
    graphs_mended: Optional[int] = None
    # UNTOLD: which arm failed or was unstable; FAILS: the mended arm's error; NOT_SLOWER with no
    # original_ms: the original's error (the mended program runs where it fails)
    why: str = ""


@dataclass
class BenchRow:
    target: str
    arm: str  # eager | original | mended | reference
    device: str
    mode: str
    dtype: str = "float32"
    cold_s: Optional[float] = None
    median_ms: Optional[float] = None
    iqr_ms: Optional[float] = None
    # the IQR is above graphmend.bench.stats.UNSTABLE_IQR_RATIO of the median: noise, not a fact
    unstable: bool = False
    unstable_why: str = ""  # unstable: the figures that make it so (graphmend.bench.stats.unstable_reason)
    graph_count: Optional[int] = None
    break_count: Optional[int] = None
    kernel_count: Optional[int] = None
    backend: Optional[str] = None  # "triton" | "cpp/openmp" | None (eager)
    peak_mem_mb: Optional[float] = None
    outputs_match: Optional[bool] = None
    runs: int = 0
    cache_dir: Optional[str] = None
    error: Optional[str] = None
    memory: Optional[str] = None  # what peak_mem_mb measures: "cuda_max_allocated" | "cpu_peak_rss_delta"
    mismatch: Optional[str] = None  # the first difference, when outputs_match is False
    skipped: bool = False  # arm not run (error says why); not a failure of the run
    # "train": each timed call was a training step (forward, backward, optimizer step) and
    # outputs_match compares the first step's loss, outputs and gradients
    run_mode: str = "eval"
    optimizer: Optional[str] = None  # train mode: "sgd" | "adamw"
    # a compiled arm Inductor could not build (the lowering check, GM608): error says it in one line
    lowering: Optional[LoweringFailure] = None


@dataclass
class BenchRatio:
    target: str
    name: str  # "original/eager", "mended/original", "mended/reference"
    value: Optional[float]
    mode: str = "default"
    device: str = "cpu"
    run_mode: str = "eval"
    unstable: bool = False  # a median it divides is unstable (BenchRow.unstable)
    # mended/original only: the mended arm is slower beyond noise (graphmend.bench.stats.slower)
    slower: bool = False


@dataclass
class CheckEntry:
    """A break keyed the way the baseline keys it."""

    file: str
    rule: str
    function: str
    source: str  # whitespace-normalised source line (the key)
    count: int = 1
    line: Optional[int] = None
    message: str = ""
    fix_hint: str = ""
    col: Optional[int] = None  # 0-based, like Finding.col
    origin: str = "static"  # "static" (a Finding) | "dynamic" (a Break): keyed apart in the baseline
    target: Optional[str] = None  # the target that hit a dynamic break
    run_mode: Optional[str] = None  # the run mode that hit a dynamic break ("eval" | "train")
    nested_graph_breaks: bool = False  # a dynamic break found with Dynamo's nested graph breaks on
    # the line as the file has it (stripped), what views show; None for a stale entry (only its key is kept)
    source_line: Optional[str] = None


@dataclass
class CheckResult:
    baseline: str
    new: list[CheckEntry] = field(default_factory=list)
    stale: list[CheckEntry] = field(default_factory=list)
    known: int = 0
    updated: bool = False  # --update-baseline wrote the baseline
    failed_targets: list[str] = field(default_factory=list)  # "name: error" of targets that errored


@dataclass
class Summary:
    """Totals over one report (``summarize``), so renderers show figures and never count."""

    targets: int = 0
    targets_failed: int = 0
    graphs: int = 0  # explain's graph_count, summed over targets
    graph_breaks: int = 0  # explain's graph_break_count, summed over targets
    breaks: int = 0  # distinct breaks listed, counted by explain or not
    break_occurrences: int = 0
    frames_skipped: int = 0
    recompiles: int = 0
    findings: int = 0
    confirmed: int = 0
    potential: int = 0
    fixes_verified: int = 0
    fixes_partial: int = 0  # passed every check that ran, on a partial proof (Fix.partial)
    fixes_rejected: int = 0
    fixes_unverified: int = 0
    fixes_advice: int = 0
    fixes_regresses: int = 0
    errors: int = 0
    break_rules: dict[str, int] = field(default_factory=dict)  # rule -> distinct breaks, by code
    finding_rules: dict[str, int] = field(default_factory=dict)  # rule -> findings, by code
    # over Report.issues, the deduplicated view every format lists
    issues: int = 0
    issues_confirmed: int = 0  # static and dynamic evidence
    issues_dynamic: int = 0  # dynamic only
    issues_potential: int = 0  # static only, no target reached it
    issues_unreached: int = 0  # static only, in a frame Dynamo skipped
    fan_out: int = 0  # dynamic occurrences behind the issues
    lowering_failures: int = 0  # issues of graphs Inductor could not compile (--lower)
    skipped_frames: int = 0  # distinct frames Dynamo skipped (SkippedFrame records)
    fixable: int = 0  # issues a fix family rewrites (`mend fix`)
    fixable_unsafe: int = 0  # issues only an --unsafe-fixes rewrite covers
    issue_rules: dict[str, int] = field(default_factory=dict)  # rule -> issues, by code
    top: list[int] = field(default_factory=list)  # indexes into Report.issues, costliest first
    # mend check only (None elsewhere): what its views list, so their totals say that and not
    # the findings/breaks counts (check's views show the new ones in the check section alone)
    check_new: Optional[int] = None  # entries not in the baseline (static and dynamic)
    check_known: Optional[int] = None  # entries the baseline knows
    check_stale: Optional[int] = None  # baseline entries no longer found (fixed)
    # mend bench: what its tables hold
    bench_targets: int = 0
    bench_arms: int = 0  # arms run (skipped ones not counted)
    bench_unstable: int = 0
    bench_failed: int = 0


@dataclass
class Report:
    """Everything one command produced; what renderers render and JSON carries."""

    command: str = "analyze"
    schema_version: str = SCHEMA_VERSION
    graphmend_version: str = ""
    torch_version: Optional[str] = None
    python_version: str = ""
    platform: str = ""
    root: str = ""
    # the run modes targets ran in (graphmend.core.modes); each TargetResult says its own
    run_modes: list[str] = field(default_factory=lambda: ["eval"])
    # Dynamo's nested_graph_breaks as targets ran (None: not run, or this torch has no such option)
    nested_graph_breaks: Optional[bool] = None
    targets: list[TargetResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    # findings and breaks merged, one per cause and place (graphmend.correlate.diagnose)
    issues: list[Issue] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    fix_targets: list[FixTarget] = field(default_factory=list)
    bench: list[BenchRow] = field(default_factory=list)
    ratios: list[BenchRatio] = field(default_factory=list)
    check: Optional[CheckResult] = None
    errors: list[FileError] = field(default_factory=list)
    files_scanned: int = 0
    # what to do next, in words: how to get the dynamic half, the fix command
    next_steps: list[str] = field(default_factory=list)
    summary: Optional[Summary] = None  # filled by summarize() (reports.render does it when absent)

    # -- JSON -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Report":
        if readable_major(data.get("schema_version", "")) == "1":
            data = _from_schema_1(data)
        return from_dict(cls, data)

    @classmethod
    def from_json(cls, text: str) -> "Report":
        return cls.from_dict(json.loads(text))


def readable_major(version: Any) -> str:
    """The major version of a report's ``schema_version`` (the analysis report's or the sweep
    report's: they share it), "1" or this graphmend's own; ValueError for any other."""
    major = str(version).split(".")[0]
    if major not in ("1", SCHEMA_VERSION.split(".")[0]):
        raise ValueError(f"unsupported schema_version {str(version)!r} (this graphmend reads {SCHEMA_VERSION} and 1.x)")
    return major


_SAID = tuple(Said.__dataclass_fields__)  # the fields a 1.x issue held flat


def _from_schema_1(data: dict[str, Any]) -> dict[str, Any]:
    """A 1.x report as 2.0 has it, stamped 2.0: a 1.x issue held its evidence's fields flat."""
    issues = [{**{k: v for k, v in i.items() if k not in _SAID}, "said": {k: i[k] for k in _SAID if k in i}}
              if isinstance(i, dict) and "said" not in i else i for i in data.get("issues") or []]
    return {**data, "schema_version": SCHEMA_VERSION, "issues": issues}


def new_report(command: str, root: str = "", torch_version: Optional[str] = None) -> Report:
    """A report stamped with the versions of this run (torch's only when already known)."""
    from graphmend.core import env

    return Report(command=command, root=root, **env.stamp(torch_version))


def nested_setting(targets: Sequence[TargetResult]) -> Optional[bool]:
    """Dynamo's nested_graph_breaks as the run's captures had it (one setting per run)."""
    return next((t.nested_graph_breaks for t in targets if t.nested_graph_breaks is not None), None)


def summarize(report: Report) -> Summary:
    """The totals renderers show; computed here so that no renderer counts."""
    breaks = [b for t in report.targets for b in t.breaks]
    status = [f.status for f in report.findings]
    fixes = [f.status for f in report.fixes]
    issues = report.issues
    kinds = [i.status for i in issues]
    check = report.check

    def by_rule(items: list) -> dict[str, int]:
        out: dict[str, int] = {}
        for item in items:
            out[item.rule] = out.get(item.rule, 0) + 1
        return dict(sorted(out.items()))

    return Summary(
        targets=len(report.targets),
        targets_failed=sum(1 for t in report.targets if t.error),
        graphs=sum(t.graph_count for t in report.targets),
        graph_breaks=sum(t.graph_break_count for t in report.targets),
        breaks=len(breaks),
        break_occurrences=sum(b.occurrences for b in breaks),
        frames_skipped=sum(t.frames_skipped for t in report.targets),
        recompiles=sum(len(t.recompiles) for t in report.targets),
        findings=len(report.findings),
        confirmed=status.count(CONFIRMED),
        potential=status.count(POTENTIAL),
        fixes_verified=fixes.count(VERIFIED),
        fixes_partial=fixes.count(PARTIAL),
        fixes_rejected=fixes.count(REJECTED),
        fixes_unverified=fixes.count(UNVERIFIED),
        fixes_advice=fixes.count(ADVICE),
        fixes_regresses=fixes.count(REGRESSES),
        errors=len(report.errors),
        break_rules=by_rule(breaks),
        finding_rules=by_rule(report.findings),
        issues=len(issues),
        issues_confirmed=kinds.count(CONFIRMED),
        issues_dynamic=kinds.count(DYNAMIC),
        issues_potential=kinds.count(POTENTIAL),
        issues_unreached=kinds.count(UNREACHED),
        fan_out=sum(i.fan_out for i in issues if not i.lowering and not i.recompiles),  # break occurrences
        lowering_failures=sum(1 for i in issues if i.lowering),
        skipped_frames=sum(len(i.skipped) for i in issues),
        fixable=sum(1 for i in issues if i.fix == "safe"),
        fixable_unsafe=sum(1 for i in issues if i.fix == "unsafe"),
        issue_rules=by_rule(issues),
        top=top_issues(issues),
        check_new=len(check.new) if check else None,
        check_known=check.known if check else None,
        check_stale=len(check.stale) if check else None,
        bench_targets=len({b.target for b in report.bench}),
        bench_arms=sum(1 for b in report.bench if not b.skipped),
        bench_unstable=sum(1 for b in report.bench if b.unstable),
        bench_failed=sum(1 for b in report.bench if b.error and not b.skipped),
    )


TOP_CAUSES = 10


def top_issues(issues: list[Issue], limit: int = TOP_CAUSES) -> list[int]:
    """The costliest issues first: a break that made Dynamo skip a frame (a whole forward in
    eager), then the widest fan-out, then the most targets; a static-only finding last."""
    def cost(i: int) -> tuple:
        it = issues[i]
        return (-len(it.skipped), -it.fan_out, -len(it.targets), it.status not in (CONFIRMED, DYNAMIC), i)

    return sorted(range(len(issues)), key=cost)[:limit]
