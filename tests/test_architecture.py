"""The layout's rules, checked on the source: no import cycle (lazy imports inside
functions included), no module reaching into another subpackage's private names,
public faces that stay thin, and a map (``docs/architecture.rst``) naming every
module."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGE = ROOT / "onnxrt_backend_dev" / "monitoring"
PREFIX = "onnxrt_backend_dev.monitoring"
FACES = ("benchmark.py", "memory_peak.py", "profiling.py")
MAX_FACE_LINES = 250


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PREFIX, *parts])


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(importer: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` reads from."""
    if node.level == 0:
        return node.module or ""
    package = importer if path.name == "__init__.py" else importer.rsplit(".", 1)[0]
    for _ in range(node.level - 1):
        package = package.rsplit(".", 1)[0]
    return f"{package}.{node.module}" if node.module else package


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, less the bodies of ``if TYPE_CHECKING:`` (imports for the type checker
    only, never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if _is_type_checking(node):
            assert isinstance(node, ast.If)
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, str]]:
    """``(module imported, name imported or '')`` for every import of the file, at any depth
    (a lazy import inside a function is still an edge of the graph), except those made for
    the type checker only."""
    for node in _run_time_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ""
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                # ``from . import model`` imports the module ``model``, not a name.
                yield (sub, "") if sub in modules else (base, alias.name)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m, _ in _imports(name, path, modules) if m in modules and m != name}
    return graph


def _owner(module: str) -> str:
    """The subpackage a module belongs to (``_memory``), or the module itself when it sits
    directly in ``monitoring``."""
    rest = module[len(PREFIX) + 1 :] if module != PREFIX else ""
    return rest.split(".", 1)[0]


def _is_package_init(module: str, modules: dict[str, Path]) -> bool:
    return modules[module].name == "__init__.py"


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules ``start`` imports, directly or not (explicit stack, no recursion)."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or not."""
    reach = {node: _reach(graph, node) for node in graph}
    found = []
    for node in sorted(graph):
        if node in reach[node]:
            group = sorted(m for m in reach[node] if node in reach[m])
            if group not in found:
                found.append(group)
    return found


def test_no_import_cycle_lazy_imports_included() -> None:
    graph = _graph()
    # A package's __init__ re-exporting its modules is not a cycle of the machinery.
    modules = _modules()
    for name in graph:
        if not _is_package_init(name, modules):
            continue
        for other in graph:
            graph[other].discard(name) if other.startswith(name + ".") else None
    assert _cycles(graph) == []


def _aliases(name: str, path: Path, tree: ast.AST, modules: dict[str, Path]) -> dict[str, str]:
    """The local names bound to modules of the package (``from .. import memory_peak``)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(name, path, node)
            pairs = [(a.asname or a.name, f"{base}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            pairs = [(a.asname, a.name) for a in node.names if a.asname]
        else:
            continue
        aliases.update((local, module) for local, module in pairs if module in modules)
    return aliases


def _is_private(attr: str) -> bool:
    return attr.startswith("_") and not attr.startswith("__")


def _private_reaches() -> set[str]:
    """``importer -> module.name`` for each private name one subpackage takes from another,
    by import (``from ..x import _y``) or by attribute (``mod._y`` on an imported module)."""
    modules = _modules()
    found: set[str] = set()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        taken = [(m, n) for m, n in _imports(name, path, modules) if m in modules]
        aliases = _aliases(name, path, tree, modules)
        taken += [
            (aliases[node.value.id], node.attr)
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ]
        short = f"{_owner(name)}:{name.rsplit('.', 1)[-1]}"
        found.update(
            f"{short} -> {module}.{attr}"
            for module, attr in taken
            if _is_private(attr) and _owner(module) != _owner(name)
        )
    return found


def test_no_subpackage_takes_another_ones_private_names() -> None:
    assert sorted(_private_reaches()) == []


@pytest.mark.parametrize("face", FACES)
def test_public_faces_stay_thin(face: str) -> None:
    lines = (PACKAGE / face).read_text(encoding="utf-8").count("\n")
    assert lines < MAX_FACE_LINES, f"{face} has {lines} lines: move machinery into a subpackage"


def test_the_checks_see_the_package() -> None:
    # GIVEN the graph THEN it holds the faces and the subpackages' modules, and the checks
    # would see a real cycle or reach (they are not vacuous)
    graph = _graph()
    assert f"{PREFIX}.benchmark" in graph and len(graph) > 30
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert any(graph.values())
    tree = ast.parse(
        "if TYPE_CHECKING:\n    import a\nelse:\n    import b\ndef f():\n    import c\n"
    )
    names = {n.names[0].name for n in _run_time_nodes(tree) if isinstance(n, ast.Import)}
    assert names == {"b", "c"}


# --- layers: imports only point down ------------------------------------------------------

# The layers, lowest first (docs/architecture.rst draws them): a module imports from its
# own layer or one below, never above, lazily or not. ``""`` is the package's __init__.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("core", frozenset({"_errors", "_validate", "_format", "_optional", "_progress", "_gc",
                        "_html", "_untrusted", "_export"})),
    ("primitives", frozenset({"_stats", "_stacks", "_run"})),
    ("spine", frozenset({"_sampling"})),
    ("cprofile, timing, counting", frozenset({"_profiling", "_timing", "_count"})),
    ("observer", frozenset({"_observe"})),
    ("allocations", frozenset({"_alloc"})),
    ("memory", frozenset({"_memory"})),
    ("report", frozenset({"_report"})),
    ("results", frozenset({"_results"})),
    ("faces", frozenset({"benchmark", "memory_peak", "profiling", "report"})),
    ("commands", frozenset({"_cli", "_magics", "_pytest_plugin", "_pytest_session",
                            "__main__", ""})),
)  # fmt: skip


def _layer(owner: str) -> int:
    found = [i for i, (_, members) in enumerate(LAYERS) if owner in members]
    assert len(found) == 1, f"{owner!r} is on {len(found)} layers of LAYERS"
    return found[0]


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for each import from a lower layer to a higher one."""
    return sorted(
        f"{a[len(PREFIX) + 1 :]} -> {b[len(PREFIX) + 1 :]}"
        for a, deps in graph.items()
        for b in deps
        if _layer(_owner(a)) < _layer(_owner(b))
    )


def _both_ways(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The pairs of subpackages (or top modules) that import each other."""
    edges = {(_owner(a), _owner(b)) for a, deps in graph.items() for b in deps}
    return sorted((a, b) for a, b in edges if a < b and (b, a) in edges)


def test_every_import_points_down_the_layers_lazy_imports_included() -> None:
    # GIVEN the import graph (imports inside functions included) THEN no module imports
    # one of a higher layer, and every part of the package is on exactly one layer
    graph = _graph()
    assert {_owner(m) for m in graph} == set().union(*(m for _, m in LAYERS))
    assert _upward(graph) == []
    # AND the check is not vacuous: the spine importing a command would be caught
    spine = f"{PREFIX}._sampling.model"
    assert _upward({spine: {f"{PREFIX}._cli.dispatch"}}) == ["_sampling.model -> _cli.dispatch"]


def test_no_subpackage_imports_one_that_imports_it_back() -> None:
    assert _both_ways(_graph()) == []
    assert _both_ways({f"{PREFIX}._a.x": {f"{PREFIX}._b.y"}, f"{PREFIX}._b.z": {f"{PREFIX}._a.w"}
                       }) == [("_a", "_b")]  # fmt: skip


# The one module that walks frames into stacks (the sampler, the memory attribution and
# the report's ticks all call it), and the sampler's recorder, which skips its own frames.
FRAME_WALKERS = {"_sampling/frames.py", "_sampling/recorder.py"}


def test_one_place_walks_frames() -> None:
    walkers = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if ".f_back" in p.read_text(encoding="utf-8")
    }
    assert walkers <= FRAME_WALKERS, walkers - FRAME_WALKERS


# The modules that start a process, and those that set a signal handler: the lists
# docs/architecture.rst gives (a new one is a decision to write down there).
STARTERS = {"_run/supervise.py", "_run/janitor.py", "_memory/spy.py", "_observe/verify.py",
            "_results/environment.py", "_results/runner.py", "_count/valgrind.py"}  # fmt: skip
HANDLERS = {"_run/signals.py", "_sampling/timer.py", "_memory/spy.py",
            "_report/child.py", "__main__.py"}  # fmt: skip
_STARTS = re.compile(r"subprocess\.(?:Popen|run|call|check_output|check_call)\(|os\.fork\(|"
                     r"os\.posix_spawn|os\.exec[lv]")  # fmt: skip


def _calling(pattern: re.Pattern[str]) -> set[str]:
    return {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
            if pattern.search(p.read_text(encoding="utf-8"))}  # fmt: skip


def test_processes_start_and_signals_are_handled_in_the_places_the_map_names() -> None:
    assert _calling(_STARTS) == STARTERS
    assert _calling(re.compile(r"signal\.signal\(")) == HANDLERS
    assert _STARTS.search("x = subprocess.Popen(argv)") and not _STARTS.search("Popen[bytes]")


# --- the map (docs/architecture.rst): one described entry per module ---------------------

DOC = ROOT / "docs" / "architecture.rst"
_HEADING = re.compile(r"^``(?:onnxrt_backend_dev/monitoring/|(_\w+)/)``: \S")
_ENTRY = re.compile(r"^\* ``([\w./]+)``: (\S.*)$")


def _entries(text: str) -> list[tuple[str, str]]:
    """``(path under monitoring/, description)`` of each entry of the layout: a line
    ``* ``file``: what it holds`` under a subpackage's heading line."""
    lines = text.splitlines()
    start = lines.index("The layout")
    end = next(i for i in range(start + 2, len(lines)) if set(lines[i]) == {"-"}) - 1
    found: list[tuple[str, str]] = []
    folder: str | None = None
    for line in lines[start:end]:
        heading = _HEADING.match(line)
        if heading:
            folder = heading.group(1) or ""
            continue
        entry = _ENTRY.match(line)
        if entry and folder is not None:
            path = f"{folder}/{entry.group(1)}" if folder else entry.group(1)
            found.append((path, entry.group(2)))
    return found


def _files() -> set[str]:
    """Every module of the package (and C source, stub), as a path under monitoring/,
    less the subpackages' ``__init__.py``."""
    out = set()
    for path in PACKAGE.rglob("*"):
        rel = path.relative_to(PACKAGE)
        if path.suffix not in (".py", ".c", ".pyi") or "__pycache__" in rel.parts:
            continue
        if len(rel.parts) > 1 and path.name == "__init__.py":
            continue
        out.add(str(rel))
    return out


def _map_errors(text: str) -> list[str]:
    entries = _entries(text)
    paths = [p for p, _ in entries]
    files = _files()
    errors = [f"no entry: {p}" for p in sorted(files - set(paths))]
    errors += [f"no such module: {p}" for p in sorted(set(paths) - files)]
    errors += [f"twice: {p}" for p in sorted({p for p in paths if paths.count(p) > 1})]
    errors += [f"no description: {p}" for p, what in entries if len(what.split()) < 2]
    return errors


def test_the_architecture_page_has_one_described_entry_per_module() -> None:
    # GIVEN the layout of docs/architecture.rst and the package's files
    text = DOC.read_text(encoding="utf-8")
    # THEN each module has one entry, naming its file, with what it holds, under its
    # subpackage, and no entry names a module that is not there
    assert _map_errors(text) == []
    # AND each subpackage is a regular package (a folder without __init__.py is left out
    # of a wheel)
    assert [p.name for p in PACKAGE.glob("*/") if p.name != "__pycache__"
            and not (p / "__init__.py").exists()] == []  # fmt: skip
    # AND the check is not vacuous: an entry removed is missed even where prose names it
    cut = "\n".join(line for line in text.splitlines() if line != _line_of(text, "launch.py"))
    assert "_observe.launch" in cut and _map_errors(cut) == ["no entry: _observe/launch.py"]
    moved = text.replace("* ``welch.py``:", "* ``welsh.py``:")
    assert "no such module: _stats/welsh.py" in _map_errors(moved)


def _line_of(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"* ``{name}``:"))


_CITED = re.compile(r"``(_[a-z]\w*(?:\.\w+)+)``")


def test_every_name_the_architecture_page_cites_exists() -> None:
    # GIVEN every dotted name the page cites (``_observe.session.choose``)
    import importlib

    missing = []
    for name in sorted(set(_CITED.findall(DOC.read_text(encoding="utf-8")))):
        parts = name.split(".")
        if parts[-1] in ("py", "c", "pyi"):  # a file, checked by the layout's test
            continue
        # THEN the longest importable prefix is a module and the rest its attributes
        for cut in range(len(parts), 0, -1):
            try:
                obj: object = importlib.import_module(".".join([PREFIX, *parts[:cut]]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr, None)
            break
        else:
            obj = None
        if obj is None:
            missing.append(name)
    assert missing == []
