"""Which arms a target gets, and where the mended arm's patches come from.

A corpus target ``mend_target_<name>`` gets a ``reference`` arm when the same file holds
``mend_target_<name>_reference`` (the hand-fixed version). The ``mended`` arm runs the
verified fixes of ``mend fix`` through the import overlay; when ``mend fix`` fails or
verifies nothing, the arm is skipped and its row says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from graphmend.core.config import Config
from graphmend.core.discovery import TargetSpec, discover
from graphmend.core.model import FileError

ARMS = ("eager", "original", "mended", "reference")
REFERENCE_SUFFIX = "_reference"


@dataclass
class BenchItem:
    spec: TargetSpec
    reference: Optional[str] = None  # the hand-fixed target's function name, same file


def parse_arms(text: str) -> list[str]:
    """``"eager,original"`` -> ordered, de-duplicated arm names; ValueError names a bad one."""
    arms = [a.strip().lower() for a in text.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad:
        raise ValueError(f"--arms: unknown arm(s) {', '.join(bad)}; choose from {', '.join(ARMS)}")
    if not arms:
        raise ValueError(f"--arms: give at least one of {', '.join(ARMS)}")
    return [a for a in ARMS if a in arms]


def resolve(refs: Sequence[str], config: Config) -> tuple[list[BenchItem], list[FileError]]:
    """``refs`` are files/folders, or ``path/file.py::mend_target_x`` for one target."""
    items: list[BenchItem] = []
    errors: list[FileError] = []
    seen: set[tuple[Optional[str], str]] = set()
    for ref in refs:
        path, sep, function = ref.rpartition("::") if "::" in ref else (ref, "", "")
        if not Path(path).exists():
            errors.append(FileError(file=path, target=ref or None, message=f"no such file or folder: {path}"))
            continue
        found = discover([path], config)
        errors.extend(found.errors)
        specs = found.targets
        by_key = {(s.file, s.function): s for s in specs}
        if function:
            chosen = [s for s in specs if s.function == function]
            if not chosen:
                errors.append(FileError(file=path, target=ref,
                                        message=f"no target {function} in {path} (targets are top-level mend_target* functions)"))
                continue
        else:
            # a reference beside its target is an arm of that target, not a target of its own
            chosen = [s for s in specs if not (s.function.endswith(REFERENCE_SUFFIX)
                                               and (s.file, s.function[: -len(REFERENCE_SUFFIX)]) in by_key)]
        for s in chosen:
            if (s.file, s.function) in seen:
                continue
            seen.add((s.file, s.function))
            ref_fn = s.function + REFERENCE_SUFFIX
            items.append(BenchItem(spec=s, reference=ref_fn if (s.file, ref_fn) in by_key else None))
    return items, errors


# -- the mended arm's patches ------------------------------------------------------------

class PatchSource:
    """The verified patches of ``mend fix`` (abs path -> patched source), computed once per
    target: the fix pipeline verifies that target alone (a file of eight transformers models
    would otherwise verify all eight for each), and its mended arm runs the fixes verified
    for it through the import overlay."""

    def __init__(self, config: Config, timeout: Optional[float], unsafe: bool = False) -> None:
        self.config, self.timeout, self.unsafe = config, timeout, unsafe
        self._by_target: dict[tuple[str, str], tuple[Optional[dict[str, str]], str]] = {}

    def patches_for(self, item: BenchItem) -> tuple[Optional[dict[str, str]], str]:
        """(patches, "") or (None, why the mended arm is skipped for this target)."""
        file = item.spec.file
        if not file:
            return None, f"mended arm unavailable: {item.spec.name} is given as a module, mend fix works on files"
        key = (file, item.spec.function)
        if key not in self._by_target:
            self._by_target[key] = self._run(file, item.spec.function)
        patches, why = self._by_target[key]
        if why:
            return None, why
        if not patches:
            return None, f"mended arm skipped: mend fix verified no fix for {item.spec.name} (mended = original)"
        return patches, ""

    def _run(self, file: str, function: str) -> tuple[Optional[dict[str, str]], str]:
        from graphmend.fixing import FixOptions, verified_patches  # the fix stage: only the mended arm needs it

        try:
            options = FixOptions(timeout=self.timeout, only=(function,), unsafe=self.unsafe)
            patches = verified_patches([file], self.config, options)
        except Exception as exc:  # the fix pipeline failing costs only the mended arm
            return None, f"mended arm unavailable: mend fix failed on {file}: {type(exc).__name__}: {exc}"
        return {str(k): str(v) for k, v in dict(patches or {}).items()}, ""
