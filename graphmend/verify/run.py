"""The parent side of verification: two fresh workers per attempt (original, patched)."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Optional

from graphmend.jobs import Job, run_job
from graphmend.model import TargetResult, from_dict

WORKER = "graphmend.verify.worker"


@dataclass
class Verdict:
    error: Optional[str] = None
    mismatches: list[str] = field(default_factory=list)
    new_breaks: list[str] = field(default_factory=list)
    remaining_keys: list[tuple] = field(default_factory=list)
    key_lines: dict = field(default_factory=dict)  # before-key -> its original lines
    breaks_after: int = 0
    unexercised: list[str] = field(default_factory=list)
    remaining_reasons: list[str] = field(default_factory=list)
    after: Optional[TargetResult] = None
    # the breaks left, in ORIGINAL coordinates (before-breaks still there) plus new ones
    remaining_breaks: list = field(default_factory=list)


def verify_target(spec: Any, patches: dict[str, str], conditions: dict[str, list], before: TargetResult,
                  texts: dict[str, str], timeout: float, seed: int = 0, probe_dtype: Optional[str] = None) -> Verdict:
    """Differential run + re-trace of ``spec`` with ``patches`` applied through the overlay;
    with ``probe_dtype``, both sides are traced once more in that dtype and the patched one
    must trace wherever the original does."""
    from graphmend.fixing import break_key, break_keys

    spec_d = dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else dict(spec)
    v = Verdict()
    with tempfile.TemporaryDirectory(prefix="mend-verify-") as tmp:
        state = os.path.join(tmp, "state.pt")
        orig = run_job(Job(WORKER, {"spec": spec_d, "mode": "original", "conditions": conditions,
                                    "state": state, "seed": seed, "probe_dtype": probe_dtype}, label=spec_d["name"], timeout=timeout))
        if orig.error or (orig.result or {}).get("error"):
            v.error = f"original run: {orig.error or orig.result.get('error')}"
            return v
        v.unexercised = [_short(u) for u in orig.result.get("unexercised", [])]
        pat = run_job(Job(WORKER, {"spec": spec_d, "mode": "patched", "patches": patches, "state": state,
                                   "seed": seed, "retrace": True, "probe_dtype": probe_dtype}, label=spec_d["name"], timeout=timeout))
    if pat.error or (pat.result or {}).get("error"):
        v.error = f"patched run: {pat.error or pat.result.get('error')}"
        return v
    v.mismatches = list(pat.result.get("mismatches", []))
    if probe_dtype and not orig.result.get("probe") and pat.result.get("probe"):
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
    before_keys = break_keys(before.breaks, dict(texts))
    after_texts = dict(texts)
    after_texts.update({os.path.realpath(p): t for p, t in patches.items()})
    after_keys = break_keys(after.breaks, after_texts)
    v.breaks_after = len(after.breaks)
    for k, b in after_keys.items():
        if k not in before_keys:
            v.new_breaks.append(f"{b.rule} at {os.path.basename(b.file or '?')}:{b.line}: {b.reason}")
    for k, b in before_keys.items():
        v.key_lines.setdefault(k, []).append(b.line)
        if k in after_keys:
            v.remaining_keys.append(k)
            v.remaining_breaks.append(b)
    v.remaining_breaks += [b for k, b in after_keys.items() if k not in before_keys]
    # breaks that were there before keep the line of the file on disk (an added import
    # shifts the patched text); new ones can only be named in the patched text
    v.remaining_reasons = []
    for b in after.breaks:
        key = break_key(b, after_texts)
        line = before_keys[key].line if key in before_keys else b.line
        v.remaining_reasons.append(f"{b.rule} {os.path.basename(b.file or '')}:{line}: {b.reason}")
    return v


def _short(entry: str) -> str:
    """``/abs/dir/file.py:12:8 never taken`` -> ``file.py:12:8 never taken``."""
    path, _, rest = entry.partition(".py:")
    return f"{os.path.basename(path)}.py:{rest}" if rest else entry
