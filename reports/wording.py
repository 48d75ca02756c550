"""The wording every report format shares: paths as reports show them (relative to
``Report.root`` where they lie under it), text made safe to print, counts, and the sentences
for a break, a recompile, a skipped frame, a fix and a cost check.

Pure string operations (no filesystem access, no resolving), so renders are the same on
every machine and a saved report re-renders identically anywhere.
"""

from __future__ import annotations

import re
from typing import Optional

# What a terminal obeys rather than shows (C0 but tab and newline, DEL, C1: ESC/OSC sequences
# set the title, make links, clear the screen), what reorders a line (the bidi controls), and
# lone surrogates: the bytes of a name that is not UTF-8, which no UTF-8 output can carry.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escaped(m: "re.Match[str]") -> str:
    n = ord(m.group())
    if 0xDC80 <= n <= 0xDCFF:  # os.fsdecode's stand-in for the byte n - 0xDC00
        return f"\\x{n - 0xDC00:02x}"
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def printable(text: Optional[str]) -> str:
    """``text`` from a user's files (a message, a file name, a source line, a target) as a
    human-read format shows it: what a terminal would obey, the bidi controls and a name's
    non-UTF-8 bytes become visible escapes (``\\x1b``, ``\\u202e``, ``\\xff``); tabs and
    newlines stay. Machine formats keep the text as it is."""
    if not text:
        return ""
    return _UNPRINTABLE.sub(_escaped, text)


def rel(path: Optional[str], root: str) -> str:
    """``path`` relative to ``root`` when it starts with it, else unchanged ("" for None)."""
    if not path:
        return ""
    if root:
        base = root.rstrip("/\\")
        for sep in ("/", "\\"):
            if path.startswith(base + sep):
                return path[len(base) + 1:].replace("\\", "/")
    return path


def is_under(path: Optional[str], root: str) -> bool:
    """Under the root: a path that starts with it, or a relative one (a JSON report writes the
    paths under its root relative to it)."""
    if not path:
        return False
    relative = not path.startswith(("/", "\\", "<")) and not re.match(r"[A-Za-z]:", path)
    return relative or rel(path, root) != path


def location(path: Optional[str], line: Optional[int], root: str, col: Optional[int] = None) -> str:
    """``path:line`` or ``path:line:col`` (col shown 1-based; the model holds it 0-based)."""
    if not path:
        return "<unknown location>"
    text = rel(path, root)
    if line is not None:
        text += f":{line}"
        if col is not None:
            text += f":{col + 1}"
    return text


_INSTALLED = re.compile(r".*[/\\](?:site-packages|dist-packages|lib[/\\]python\d+\.\d+)[/\\]")


def library_path(path: str, root: str) -> str:
    """A library file as a reader knows it: ``functools.py``, ``torch/_dynamo/polyfills/builtins.py``
    (the path below site-packages or the standard library's folder); under the root, relative."""
    shown = rel(path, root)
    return _INSTALLED.sub("", shown) if shown == path else shown


def library_cause(frames: list, root: str) -> Optional[str]:
    """Where below the user's line Dynamo broke, in one line: the library frame that broke
    (qualified name, file:line, its code), after the library frames that called it."""
    if not frames:
        return None
    *calls, last = frames
    text = f"{last.function or '<module>'} ({library_path(last.file, root)}:{last.line})"
    if last.source:
        text += f": {last.source}"
    if calls:
        text += "; called through " + " -> ".join(f"{f.function} ({library_path(f.file, root)}:{f.line})" for f in calls)
    return text


def target_label(name: str, run_mode: str) -> str:
    """A target as reports name it: ``file.py::fn``, with ``[train]`` when it ran in train mode."""
    return f"{name} [{run_mode}]" if run_mode == "train" else name


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def break_counts(breaks: int, recompiles: int, explain: int) -> str:
    """``1 break, 1 recompile (explain counts 3)``: the distinct breaks and the recompiles
    apart, with torch._dynamo.explain's graph_break_count (graphs - 1: every recompile's graphs
    included) beside them, named as such. Every format says it in these words."""
    return f"{plural(breaks, 'break')}, {plural(recompiles, 'recompile')} (explain counts {explain})"


def recompile_text(rc, root: str) -> str:
    """One recompile: the function, the guard that failed (Dynamo's words) and the user line
    whose value it checks, where the record names it."""
    where = f" ({location(rc.file, rc.line, root)})" if rc.file else ""
    text = f"recompiled {rc.function}{where}: guard failed: {rc.reason}"
    if getattr(rc, "guard_line", None) is not None:
        text += f"; it guards {location(rc.guard_file, rc.guard_line, root) if rc.guard_file else f'line {rc.guard_line}'}"
        if rc.guard_source:
            text += f": {rc.guard_source}"
    if getattr(rc, "rule", ""):
        text += f" [{rc.rule}{', call ' + str(rc.call) if getattr(rc, 'call', 1) > 1 else ''}]"
    elif getattr(rc, "expected", False):
        text += " (expected: automatic dynamic shapes made the size dynamic)"
    return text


def replay_text(t) -> str:
    """What a target's calls did when made once more under set_stance("fail_on_recompile"),
    where they still recompiled (a value that moves every call), else ""."""
    if not getattr(t, "replay_recompile", None):
        return ""
    return (f"its calls made once more still recompile ({t.replay_recompile}): it recompiles on every "
            "such call, up to the recompile limit")


def mode_note(b) -> str:
    """What a break's run mode adds to its listing: ``train only`` (the target ran in both
    modes and only train hit it), ``in the backward`` (compiled autograd), or ""."""
    notes = []
    if getattr(b, "only_in_mode", None):
        notes.append(f"{b.only_in_mode} only")
    if getattr(b, "phase", "forward") == "backward":
        notes.append("in the backward (compiled autograd)")
    return "; ".join(notes)


def run_setting(r) -> str:
    """How a report's targets ran: their modes, "nested graph breaks on" when Dynamo's option
    was on (off is every torch's default so far), and fullgraph=True where they compiled so."""
    return (",".join(r.run_modes) + (" · nested graph breaks on" if r.nested_graph_breaks else "")
            + (" · fullgraph=True" if any(t.fullgraph for t in r.targets) else ""))


def bench_setting(b) -> str:
    """A bench row's device and compile mode, and the training step's optimizer in train mode."""
    text = f"{b.device}/{b.mode}"
    return text + (f", train step ({b.optimizer})" if getattr(b, "run_mode", "eval") == "train" else "")


def short_path(loc: str) -> str:
    """An installed package's file by its import path (``transformers/models/...``), for views
    that keep one thing a line; the full path stays in the details and machine formats."""
    for mark in ("site-packages/", "dist-packages/"):
        if mark in loc:
            return loc.rsplit(mark, 1)[1]
    return loc


def skipped_sentence(frame, root: str, short: bool = False) -> str:
    """A skipped frame as one sentence: ``TinyTransformer.forward ran entirely in eager (loop
    at model.py:62)``; a resume function ran in eager from its resume line on."""
    at = location(frame.file, frame.loop_line or frame.line, root)
    at = short_path(at) if short else at
    where = f"loop at {at}" if frame.loop_line else f"defined at {at}"
    ran = f"ran in eager from line {frame.resume_line} on" if frame.resume_line else "ran entirely in eager"
    if getattr(frame, "limit", False):
        ran = "runs in eager once it reached the recompile limit"
    return f"{frame.function} {ran} ({where})"


# said under a bench table that holds a median flagged unstable (BenchRow.unstable)
UNSTABLE_NOTE = ("unstable: the timings' IQR is a large part of their median (a busy machine, or noise), "
                 "so the figure and the ratios built on it are not measurements to act on; rerun on an idle "
                 "machine or with more --runs (on CPU, OMP_NUM_THREADS=1 when the machine cannot be kept free: "
                 "OpenMP's threads wait for each other behind a busy process)")


def fix_sentence(f) -> str:
    """A fix record (``mend fix``) in a line: its verdict, what applies it, and why."""
    from graphmend.core.model import PARTIAL, VERIFIED

    if f.status == VERIFIED:
        return f"Fix verified (mend fix --write applies it): {f.reason}"
    if f.status == PARTIAL:
        return (f"Fix partially verified (a plain mend fix --write does not apply it): {f.reason}"
                + (f"; the proof lacks: {'; '.join(f.partial)}" if f.partial else ""))
    return f"Fix {f.status}: {f.reason}"


def issue_parts(i, root: str, issues: list, detail: bool = True, fixes: list = ()) -> list[str]:
    """An issue as the lines of a machine format's message: the static words, Dynamo's
    (with its explanation and hints when ``detail``), the fix, the frame it made Dynamo skip
    or the skip that hid it, its targets and fan-out, and the verdicts of the fixes
    ``mend fix`` proposed for it (``fixes``: the report's)."""
    parts, said = [i.message], i.said
    if said.reason and said.reason != i.message:
        parts.append(f"{i.said_by}: {said.reason}"
                     + (f" ({said.explanation})" if said.explanation and not detail and not i.recompiles else ""))
    if detail:
        parts += ([said.explanation] if said.explanation else []) + [f"Hint: {h}" for h in said.hints]
    if i.fix_hint:
        parts.append(f"Fix: {i.fix_hint}")
    parts += [f"{'It' if f.limit else 'This break'} made Dynamo skip a frame: {skipped_sentence(f, root)}."
              for f in i.skipped]
    if i.hidden_by is not None and i.hidden_by < len(issues):
        cause = issues[i.hidden_by]
        parts.append(f"Never traced: its frame ran in eager because of {cause.rule} at "
                     f"{location(cause.file, cause.line, root)}.")
    if i.targets:
        parts.append("Target" + ("s" if len(i.targets) > 1 else "") + ": " + ", ".join(i.targets)
                     + (f" ({mode_note(i)})" if mode_note(i) else ""))
    if i.fan_out > 1:
        parts.append(f"Fan-out: {i.fan_out} {'recompiles' if i.recompiles else 'breaks'} from this one line.")
    parts += [fix_sentence(fixes[k]) for k in getattr(i, "fixes", ()) if k < len(fixes)]
    return parts


def cost_text(c) -> str:
    """A cost gate check (``CostCheck``) in words: the mode, the two medians, the verdict."""
    from graphmend.core.model import FAILS, SLOWER, UNTOLD

    where = f"{c.mode} mode, {c.device}{', train step' if c.run_mode == 'train' else ''}"
    if c.verdict == UNTOLD:
        return f"{where}: could not tell ({c.why})"
    if c.verdict == FAILS:
        return f"{where}: the mended program FAILS where the original runs ({c.why})"
    if c.original_ms is None and c.mended_ms is not None:  # the original failed, the mended ran
        return f"{where}: the mended program runs (median {c.mended_ms:.3f} ms) where the original fails ({c.why})"
    graphs = (f", graphs {c.graphs_original} -> {c.graphs_mended}"
              if c.graphs_original is not None and c.graphs_mended is not None else "")
    return (f"{where}: mended {c.ratio:.2f}x the original (median {c.mended_ms:.3f} ms against "
            f"{c.original_ms:.3f} ms{graphs}): {'SLOWER' if c.verdict == SLOWER else 'not slower'}")
