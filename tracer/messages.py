"""Parsing Dynamo's graph-break log text into plain fields, without importing torch.

Dynamo's ``graph_breaks`` artifact logs one record per break::

    Graph break in user code at FILE:LINE
    Graph Break Reason: [prefix:\n\n]GB_TYPE
      Explanation: ...
      Hint: ...
      Developer debug context: ...
     For more details about this graph break, please visit: https://.../gb/gb0170.html
    [Stack variable source attribution: ...]
    User code traceback:
      File "FILE", line N, in FN
        source
        ^^^^^

torch 2.9-2.14 word this differently (prefixes, the documentation host, older
one-line reasons such as ``generic_jump TensorVariable()``); everything here is
regex-based and tolerant of missing parts, and the fixtures in
tests/fixtures/messages pin the wordings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

# A duplicate of an already-logged break (same gb_type and frame chain) is logged short.
_DUP_RE = re.compile(
    r"^Graph break \(user stack suppressed due to duplicate graph break\) in user code at (?P<file>.+?):(?P<line>\d+)\s*\n"
    r"Graph Break Reason: (?P<reason>.*)\Z", re.S)
_HEAD_RE = re.compile(r"^Graph break in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_REASON_RE = re.compile(r"^Graph Break Reason: ", re.M)
_TB_RE = re.compile(r'^ {2}File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>.+))?$')
_GBID_RE = re.compile(r"/gb/(gb\d{4})\.html", re.I)
# Wrappers Dynamo puts before the real message.
_PREFIXES = (
    re.compile(r"^Encountered graph break when attempting to trace [^\n]*:\s*\n\s*\n", re.S),
    re.compile(r"^Failed to handle graph break gracefully\.[^\n]*\n\s*\n", re.S),
    re.compile(r"^Unsupported:\s*", re.S),
)
_SKIP_MARKERS = ("Skipping the function and falling back to eager", "graph break in loop",
                 "Skipping frame", "skip_frame", "frame skipped")
_NESTED = "*** While handling this graph break, another graph break occurred: ***"
# The frame Dynamo gave up on, as the debug context of "graph break in loop" names it:
# ``frame skipped: forward (/src/model.py line 24)`` (the line is the code's first line).
_SKIPPED_FRAME_RE = re.compile(r"frame skipped: (?P<fn>\S+) \((?P<file>.+?) line (?P<line>\d+)\)")


@dataclass
class StackEntry:
    file: str
    line: int
    function: str
    source_line: Optional[str] = None
    caret_col: Optional[int] = None  # column of the first ^ relative to the stripped source


@dataclass
class ParsedBreak:
    reason: str  # the first line of Dynamo's core message (gb_type in 2.7+)
    message: str  # the core message, wrappers removed
    gb_type: Optional[str] = None
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    context: str = ""
    registry_id: Optional[str] = None  # from the documentation link, when present
    frame_skipped: bool = False
    # When a second break occurred while handling the first (e.g. a break in a loop),
    # the parts of that outer message: gb_type "graph break in loop".
    outer_gb_type: Optional[str] = None
    file: Optional[str] = None
    line: Optional[int] = None
    stack: list[StackEntry] = field(default_factory=list)
    duplicate: bool = False
    # the frame Dynamo skipped (it ran in eager), where the message names it
    skipped_frame: Optional[StackEntry] = None

    @property
    def headline(self) -> str:
        """The break in one line: "<reason>: <the explanation's first line>" where the torch
        gives both (2.6+), else the reason (the pytest plugin's failure message)."""
        first = next((line.strip()[len("Explanation:"):].strip() for line in self.message.splitlines()
                      if line.startswith("  Explanation:")), "")
        head = self.reason.rstrip(":")
        return f"{head}: {first}" if first else head


def strip_prefixes(text: str) -> str:
    text = text.strip("\n")
    changed = True
    while changed:
        changed = False
        for rx in _PREFIXES:
            m = rx.match(text)
            if m:
                text = text[m.end():].lstrip("\n")
                changed = True
    return text


def parse_reason(text: str) -> ParsedBreak:
    """Parse the message of an ``Unsupported`` (what follows ``Graph Break Reason:``)."""
    raw = text
    frame_skipped = any(m in raw for m in _SKIP_MARKERS)
    text = strip_prefixes(raw)
    outer = None
    if _NESTED in text:
        first, _, rest = text.partition(_NESTED)
        outer = rest.strip("\n").splitlines()[0].strip() if rest.strip() else None
        text = first
    core = text.strip("\n")
    lines = core.splitlines()
    reason = lines[0].strip() if lines else ""
    structured = any(l.startswith("  Explanation:") for l in lines)
    explanation, hints, context = [], [], []
    current: Optional[list[str]] = None
    for line in lines[1:]:
        s = line.strip()
        if line.startswith("  Explanation:"):
            current = explanation
            explanation.append(s[len("Explanation:"):].strip())
        elif line.startswith("  Hint:"):
            hints.append(s[len("Hint:"):].strip())
            current = None
            continue
        elif line.startswith("  Developer debug context:"):
            current = context
            context.append(s[len("Developer debug context:"):].strip())
        elif s.startswith("For more details about this graph break"):
            current = None
        elif current is not None and s:
            current.append(s)
        elif hints and s and line.startswith("    ") and current is None:
            hints[-1] += " " + s  # a wrapped hint
    m = _GBID_RE.search(raw)
    skipped = _SKIPPED_FRAME_RE.search(raw)
    return ParsedBreak(
        reason=reason,
        message=core,
        gb_type=reason if structured else None,
        explanation=" ".join(x for x in explanation if x).strip(),
        hints=hints,
        context=" ".join(x for x in context if x).strip(),
        registry_id=m.group(1).upper() if m else None,
        frame_skipped=frame_skipped,
        outer_gb_type=outer,
        skipped_frame=StackEntry(file=skipped.group("file"), line=int(skipped.group("line")),
                                 function=skipped.group("fn")) if skipped else None,
    )


def parse_stack(text: str) -> list[StackEntry]:
    """Frames of a ``traceback.format_list`` block (innermost last)."""
    out: list[StackEntry] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _TB_RE.match(lines[i])
        if not m:
            i += 1
            continue
        entry = StackEntry(file=m.group("file"), line=int(m.group("line")), function=(m.group("fn") or "").strip())
        j = i + 1
        if j < len(lines) and lines[j].startswith("    ") and not _TB_RE.match(lines[j]):
            entry.source_line = lines[j].strip()
            j += 1
            if j < len(lines) and set(lines[j].strip()) <= set("^~") and lines[j].strip():
                entry.caret_col = len(lines[j]) - len(lines[j].lstrip()) - 4
                j += 1
        out.append(entry)
        i = j
    return out


_PROVENANCE_RE = re.compile(r'# File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>[^,]+), code: (?P<code>.*?)'
                            r'(?=\s+\S+ = \S+\(|\s+# File |$)', re.S)


def provenance(explanation: str) -> list[StackEntry]:
    """Where the value behind a data-dependent branch was computed, as the break's
    explanation spells it in torch 2.13 (``# File "f.py", line 169, in fn, code: return
    np.lcm(a, b)``); empty for messages without it."""
    return [StackEntry(file=m.group("file"), line=int(m.group("line")), function=m.group("fn").strip(),
                       source_line=m.group("code").strip())
            for m in _PROVENANCE_RE.finditer(explanation or "")]


def parse_log_record(text: str) -> Optional[ParsedBreak]:
    """Parse one record of the ``graph_breaks`` artifact; None for anything else."""
    dup = _DUP_RE.match(text.strip("\n"))
    if dup:
        pb = parse_reason(dup.group("reason"))
        pb.file, pb.line, pb.duplicate = dup.group("file"), int(dup.group("line")), True
        return pb
    head = _HEAD_RE.search(text)
    rm = _REASON_RE.search(text)
    if not head and not rm:
        return None
    body = text[rm.end():] if rm else text
    tb_at = body.find("\nUser code traceback:")
    attr_at = body.find("\nStack variable source attribution:")
    cut = min(x for x in (tb_at, attr_at, len(body)) if x >= 0)
    pb = parse_reason(body[:cut])
    if tb_at >= 0:
        pb.stack = parse_stack(body[tb_at + len("\nUser code traceback:"):])
    if head:
        pb.file, pb.line = head.group("file"), int(head.group("line"))
    elif pb.stack:
        pb.file, pb.line = pb.stack[-1].file, pb.stack[-1].line
    return pb


_FRAME_SKIP_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def parse_frame_skip(text: str) -> Optional[ParsedBreak]:
    """A record that only says a frame was skipped whole (``Graph break: torch.compile cannot
    properly resume from this graph break, which results in a skip. ... The graph break
    occurred in the following user code: File ...``); the break is at the innermost frame
    it lists. None for any other text."""
    if "skip" not in text or "Graph break" not in text:
        return None
    frames = _FRAME_SKIP_RE.findall(text)
    file, line = frames[-1] if frames else (None, None)
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    return ParsedBreak(reason=first, message=text.strip("\n"), frame_skipped=True, file=file,
                       line=int(line) if line else None)


_RECOMPILE_RE = re.compile(r"Recompiling function (?P<fn>\S+) in (?P<file>.+?):(?P<line>\d+)")


_GUARD_ENTRY_RE = re.compile(r"^\s*-\s*\d+/\d+:\s*(.+)$", re.M)
_GUARD_HEAD_RE = re.compile(r"^\s*-\s*(?P<frame>\d+)/\d+:", re.M)
# a cached version's guard on which function's code runs: it failed for another function
_OTHER_CODE = re.compile(r"___check_obj_id\(\s*[^,()]+\.__code__\s*,")
_STACK_FILE_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
# "guard   # source line  # path/tail.py:LINE in fn": the comments Dynamo puts after a guard
_GUARD_COMMENT_RE = re.compile(r"#\s*(?P<src>.*?)\s+#\s*(?P<tail>\S+?):(?P<line>\d+)\b")


def _guarded_line(entry: str, function_file: str) -> dict:
    """The user line whose value the newest failed guard checks: the last frame of the
    entry's user stack (the line and its text), else the guard's own source comment (whose
    path Dynamo shortens: kept only when it is the recompiled function's file)."""
    out: dict = {}
    frames = list(_STACK_FILE_RE.finditer(entry))
    if frames:
        last = frames[-1]
        out["guard_file"], out["guard_line"] = last.group("file"), int(last.group("line"))
        after = entry[last.end():].split("\n")[1:2]
        src = after[0].strip().lstrip("-").strip() if after else ""
        if src and not src.startswith(("File ", "- ")):
            out["guard_source"] = src
    c = _GUARD_COMMENT_RE.search(entry.split("\n")[0])
    if c:
        out.setdefault("guard_source", c.group("src").strip() or None)
        if "guard_line" not in out:
            out["guard_line"] = int(c.group("line"))
            if function_file.endswith(c.group("tail")):
                out["guard_file"] = function_file
    return out


def parse_recompile(text: str) -> Optional[dict]:
    """``Recompiling function f in FILE:LINE\\n    triggered by the following guard failure(s): ...``;
    ``frame``: Dynamo's id of the frame (its compile ids are ``frame/compile``), 0 for the first
    one it compiled."""
    m = _RECOMPILE_RE.search(text)
    if not m:
        return None
    rest = text[m.end():].strip()
    # One "- N/M: guard  # source  # file:line ..." entry per cached version, newest first,
    # each followed by its user stack: the newest entry's guard is the reason; its source
    # comment and stack name the user line whose value the guard checks. An entry that failed
    # on a function's code (``___check_obj_id(func.__code__, ...)``) was compiled for another
    # function sharing this code (a decorator's wrapper): the reason is the newest entry of
    # this one's, and where every entry is another function's, this function is new to the code.
    entries = [g.split("  #")[0].strip() for g in _GUARD_ENTRY_RE.findall(rest)]
    guarded: dict = {}
    if entries:
        own = [i for i, e in enumerate(entries) if not _OTHER_CODE.match(e)]
        at = own[0] if own else 0
        reason = entries[at]
        if len(entries) > 1:
            reason += f" ({len(entries) - 1} {'older' if at == 0 else 'other'} compiled version(s) failed their " \
                      "guards too)"
        heads = list(_GUARD_HEAD_RE.finditer(rest))
        entry = rest[heads[at].start():heads[at + 1].start() if len(heads) > at + 1 else len(rest)]
        guarded = {**_guarded_line(entry, m.group("file")), "frame": int(heads[at].group("frame")),
                   "new_code": not own}
    else:
        lines = [l.strip() for l in rest.splitlines() if l.strip() and not l.strip().startswith("triggered by")]
        reason = lines[0] if lines else rest
    return {"function": m.group("fn"), "file": m.group("file"), "line": int(m.group("line")), "reason": reason,
            **guarded}


_LIMIT_RE = re.compile(r"hit config\.(?:recompile_limit|cache_size_limit|accumulated_\w+) \((?P<n>\d+)\)")
_LIMIT_FN_RE = re.compile(r"function: '(?P<fn>[^']+)' \((?P<file>.+?):(?P<line>\d+)\)")
_LIMIT_REASON_RE = re.compile(r"last reason: (?:\d+/\d+: )?(?P<reason>.+)")


def parse_recompile_limit(text: str) -> Optional[tuple[str, Optional[str], Optional[int], str]]:
    """``torch._dynamo hit config.recompile_limit (8)\n   function: 'forward' (FILE:LINE)\n
    last reason: 0/7: GUARD``: (function, file, line, the last failed guard), or None."""
    m = _LIMIT_RE.search(text)
    if not m:
        return None
    fn = _LIMIT_FN_RE.search(text)
    why = _LIMIT_REASON_RE.search(text)
    reason = why.group("reason").strip() if why else f"recompile limit ({m.group('n')}) reached"
    if not fn:
        return ("?", None, None, reason)
    return (fn.group("fn"), fn.group("file"), int(fn.group("line")), reason)
