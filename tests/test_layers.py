"""The floors, held to the code's own imports (docs/internals.md, "Floors").

Every project .py file is parsed (never imported) and each of its imports read, the ones
inside functions (the lazy imports) as much as the ones at the top. From the bottom up:

* ground: ``graphmend.core`` and the package root ``graphmend`` (``Target``, ``__version__``,
  ``PROJECT_URL``, re-exported from core). core imports nothing else of the project; the root
  only core.
* ``rewrites`` (static rules, fixes) stands on the ground; ``tracer`` on the ground and
  rewrites (the rule records); ``reports`` on the ground and rewrites (rule metadata), never
  on a stage: renderers compute nothing.
* stages (every other ``graphmend`` module: collect, pipeline, correlate, fixing, verify,
  bench, check, baseline, corpus_table) on the ground, rewrites and tracer; never on the face
  and never on reports (stages never print, so they never render).
* the face (``graphmend.cli``, ``graphmend.pytest_plugin``, ``graphmend.__main__``) on top.
* outside the building: ``benchmarks`` and ``corpus`` use anything but the face and the
  tests; ``tests`` use anything.

No file imports itself through others (no cycle), and no stage does through other stages
(verify -> bench -> fix -> verify was one). The lazy-import rule is checked on the same
graph: what ``mend --help``, the static scan, a static ``mend check`` and the renderers load
at import time never imports torch (nor, for the scan, libcst).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("graphmend", "tracer", "rewrites", "reports", "benchmarks", "corpus", "tests")
# user code the tests analyse, some of it broken on purpose: not the project's
NOT_PROJECT = (ROOT / "tests" / "fixtures", ROOT / "tests" / "golden")
FACE = ("graphmend.cli", "graphmend.pytest_plugin", "graphmend.__main__")

ALLOWED = {
    "core": {"core"},
    "root": {"core"},
    "rewrites": {"core", "root", "rewrites"},
    "tracer": {"core", "root", "rewrites", "tracer"},
    "reports": {"core", "root", "rewrites", "reports"},
    "stage": {"core", "root", "rewrites", "tracer", "stage"},
    "face": {"core", "root", "rewrites", "tracer", "reports", "stage", "face"},
    "benchmarks": {"core", "root", "rewrites", "tracer", "reports", "stage", "benchmarks", "corpus"},
    "corpus": {"core", "root", "rewrites", "tracer", "reports", "stage", "corpus"},
    "tests": {"core", "root", "rewrites", "tracer", "reports", "stage", "face", "benchmarks", "corpus", "tests"},
}


@dataclass(frozen=True)
class Edge:
    source: str  # the importing module
    target: str  # the project module imported
    line: int
    lazy: bool  # inside a function
    typing_only: bool  # under ``if TYPE_CHECKING:`` (never executed)

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}" + (" (lazily)" if self.lazy else "")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=None)
def project_files() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not any(path.is_relative_to(p) for p in NOT_PROJECT):
                out[_module_name(path)] = path
    return out


def _project_module(name: str) -> Optional[str]:
    """The project module ``import name`` runs last: its longest prefix that is one."""
    modules = project_files()
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, path: Path) -> list[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    edges: list[Edge] = []

    def visit(node: ast.AST, lazy: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package[:len(package) - child.level + 1] + ([base] if base else []))
                # ``from pkg import sub`` imports the submodule when there is one
                names = [f"{base}.{a.name}" if _project_module(f"{base}.{a.name}") == f"{base}.{a.name}" else base
                         for a in child.names]
            else:
                visit(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)),
                      typing_only or (isinstance(child, ast.If) and _is_type_checking(child.test)))
                continue
            for name in dict.fromkeys(names):
                target = _project_module(name)
                if target is not None and target != module:
                    edges.append(Edge(module, target, child.lineno, lazy, typing_only))

    visit(tree, False, False)
    return edges


@lru_cache(maxsize=None)
def all_edges() -> tuple[Edge, ...]:
    return tuple(e for m, p in project_files().items() for e in _imports(m, p))


def floor(module: str) -> str:
    if module == "graphmend":
        return "root"
    if module == "graphmend.core" or module.startswith("graphmend.core."):
        return "core"
    if any(module == f or module.startswith(f + ".") for f in FACE):
        return "face"
    top = module.split(".")[0]
    return "stage" if top == "graphmend" else top


def against_the_order(edges) -> list[Edge]:
    return [e for e in edges if floor(e.target) not in ALLOWED[floor(e.source)]]


def _cycle(graph: dict[str, set[str]]) -> Optional[list[str]]:
    """One cycle of ``graph`` (as the nodes along it, first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> Optional[list[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return None


def _graph(edges, unit=lambda m: m) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for e in edges:
        a, b = unit(e.source), unit(e.target)
        if a != b:
            graph.setdefault(a, set()).add(b)
    return graph


def _stage_unit(module: str) -> Optional[str]:
    """A stage folder is one unit (graphmend.verify, graphmend.bench); a stage module its own."""
    if floor(module) != "stage":
        return None
    return ".".join(module.split(".")[:2])


# -- the floors ---------------------------------------------------------------------------

def test_every_floor_is_known():
    """A module the map cannot place would pass every rule unseen."""
    assert {floor(m) for m in project_files()} <= set(ALLOWED)
    assert "graphmend.core.model" in project_files() and "graphmend.cli.app" in project_files()
    # the tests, one folder per floor, are read too (their imports held to the "tests" row)
    assert {m.split(".")[1] for m in project_files() if m.startswith("tests.") and m.count(".") == 2} >= \
        {"core", "rewrites", "tracer", "reports", "stages", "cli"}


def test_no_import_runs_against_the_order():
    bad = against_the_order(all_edges())
    assert not bad, "imports against the floors:\n" + "\n".join(f"  {e} ({floor(e.source)} -> {floor(e.target)})"
                                                           for e in bad)


def test_the_ground_imports_nothing_above_it():
    above = [e for e in all_edges() if floor(e.source) in ("core", "root") and floor(e.target) != "core"]
    assert not above, [str(e) for e in above]


def test_no_stage_or_tool_reaches_the_face():
    up = [e for e in all_edges() if floor(e.target) == "face" and floor(e.source) not in ("face", "tests")]
    assert not up, [str(e) for e in up]


def test_the_layer_check_sees_what_it_must():
    """The rules bite: an import of the face from core, of a stage from reports, a cycle."""
    assert against_the_order([Edge("graphmend.core.model", "graphmend.cli.common", 1, True, False),
                              Edge("reports.text", "graphmend.correlate", 1, True, False),
                              Edge("graphmend.fixing", "graphmend.cli.common", 1, True, False),
                              Edge("graphmend.fixing", "reports", 1, True, False)])
    assert not against_the_order([Edge("tracer.worker", "graphmend.core.jobs", 1, False, False),
                                  Edge("reports.sarif", "graphmend", 1, False, False)])
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None
    # lazy imports are read: fixing's imports inside run_fix are among its edges
    lazy = {e.target for e in all_edges() if e.source == "graphmend.fixing" and e.lazy}
    assert "graphmend.verify.run" in lazy


def test_one_stage_collects():
    """analyze, fix and check start from graphmend.collect: no other stage runs the static
    scan or the capture itself."""
    runners = {e.source for e in all_edges()
               if e.target in ("rewrites.scan", "tracer.capture") and floor(e.source) == "stage"}
    assert runners == {"graphmend.collect"}


def _third_party_imports(module: str) -> set[str]:
    tree = ast.parse(project_files()[module].read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module)
    return out


def test_renderers_live_in_reports():
    """Stages never print, so they load no rich at all; the face prints what reports render
    and builds no table of its own (``rich.table`` is the renderers')."""
    printing = {m: sorted(n for n in _third_party_imports(m) if n.split(".")[0] in ("rich", "typer"))
                for m in project_files() if floor(m) == "stage"}
    assert not {m: n for m, n in printing.items() if n}
    tables = [m for m in project_files() if floor(m) == "face" and "rich.table" in _third_party_imports(m)]
    assert not tables


# -- cycles -------------------------------------------------------------------------------

def test_no_import_cycle_between_files():
    """Lazy imports count: a cycle that only runs inside functions still ties the two files
    together (neither can change alone). Imports under TYPE_CHECKING never run: left out."""
    cycle = _cycle(_graph(e for e in all_edges() if not e.typing_only))
    assert cycle is None, " -> ".join(cycle or ())


def test_no_import_cycle_between_stages():
    stage_edges = [e for e in all_edges() if not e.typing_only and _stage_unit(e.source) and _stage_unit(e.target)]
    cycle = _cycle(_graph(stage_edges, _stage_unit))
    assert cycle is None, " -> ".join(cycle or ())


# -- the lazy-import rule -----------------------------------------------------------------

def _import_time_closure(entry: str) -> set[str]:
    """The project modules importing ``entry`` runs, at module level (no function runs)."""
    seen, todo = set(), [entry]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += [e.target for e in all_edges() if e.source == m and not e.lazy and not e.typing_only]
        parts = m.split(".")  # importing a.b.c runs a/__init__ and a/b/__init__ first
        todo += [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in project_files()]
    return seen


def _module_level_imports_of(module: str, names: tuple[str, ...]) -> list[str]:
    tree = ast.parse(project_files()[module].read_text(encoding="utf-8"))
    out = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                continue
            found = [a.name for a in child.names] if isinstance(child, ast.Import) else \
                [child.module or ""] if isinstance(child, ast.ImportFrom) and not child.level else []
            out.extend(f"{module}:{child.lineno} {n}" for n in found if n.split(".")[0] in names)
            visit(child)

    visit(tree)
    return out


def test_the_static_path_imports_no_torch_at_import_time():
    """``mend --help`` (every command module is registered), the static scan, a static
    ``mend check`` and every renderer: no module they load at import time imports torch;
    the scan loads no libcst either (the fixes' parser is not the scan's)."""
    commands = [m for m in project_files() if m.startswith("graphmend.cli.")]
    entries = {"graphmend.cli.app": ("torch",), "rewrites.scan": ("torch", "libcst"),
               "graphmend.check": ("torch",), "graphmend.baseline": ("torch",), "reports": ("torch",)}
    entries.update({m: ("torch",) for m in commands})
    entries.update({m: ("torch",) for m in project_files() if m.startswith("reports.")})
    heavy = []
    for entry, names in entries.items():
        for m in sorted(_import_time_closure(entry)):
            heavy += [f"{entry} loads {hit}" for hit in _module_level_imports_of(m, names)]
    assert not heavy, heavy


def test_every_broad_except_says_what_it_swallows():
    """``except Exception:`` in the product names what it swallows, in a comment on its line
    or on the first line of its body: a catch-all nobody explains hides the next bug."""
    silent = []
    for folder in ("graphmend", "tracer", "rewrites", "reports"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            for i, line in enumerate(lines):
                if line.strip().startswith(("except Exception:", "except BaseException:")) \
                        and "#" not in line and "#" not in (lines[i + 1] if i + 1 < len(lines) else ""):
                    silent.append(f"{path.relative_to(ROOT)}:{i + 1}")
    assert not silent, "say what these swallow (or narrow them): " + ", ".join(silent)


def test_a_break_rule_is_decided_once_at_capture():
    """Dynamo's call site is the truth: a break's (and a recompile's) rule is set where the
    capture classifies it (tracer/classify.py, tracer/recorder.py) and nowhere after; an
    issue names the rule that explains a break instead of re-labelling it."""
    setters = []
    for folder in ("graphmend", "tracer", "rewrites", "reports"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
                for t in targets:
                    for leaf in (t.elts if isinstance(t, ast.Tuple) else [t]):
                        if isinstance(leaf, ast.Attribute) and leaf.attr == "rule":
                            setters.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno}")
    assert setters and all(s.startswith("tracer/") for s in setters), setters
