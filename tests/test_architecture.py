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


# --- the map (docs/architecture.rst) names every module ----------------------------------

DOC = ROOT / "docs" / "architecture.rst"
_SECTION = re.compile(r"^ {6}(_\w+)/")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.(?:py|c))?")


def _layout(text: str) -> list[str]:
    """The lines of the code block under the ``The layout`` heading."""
    lines = text.splitlines()
    start = lines.index("The layout")
    block = lines.index(".. code-block:: text", start) + 1
    out: list[str] = []
    for line in lines[block:]:
        if line and not line.startswith(" "):
            break
        out.append(line)
    return out


def _sections(layout: list[str]) -> tuple[set[str], dict[str, set[str]]]:
    """The words of the top-level lines, and per subpackage the words of its entry."""
    top: set[str] = set()
    sections: dict[str, set[str]] = {}
    current: str | None = None
    for line in layout:
        match = _SECTION.match(line)
        if match:
            current = match.group(1)
            sections[current] = set(_WORD.findall(line[match.end() :]))
        elif line.startswith(" " * 7) and current is not None and line[6] == " ":
            sections[current] |= set(_WORD.findall(line))
        else:
            current = None
            top |= set(_WORD.findall(line))
    return top, sections


def _unnamed(text: str) -> list[str]:
    top, sections = _sections(_layout(text))
    missing = [p.name for p in sorted(PACKAGE.glob("*.py")) if p.name not in top]
    for sub in sorted({p.parent for p in PACKAGE.glob("*/*.py")}):
        words = sections.get(sub.name)
        if words is None:
            missing.append(f"{sub.name}/")
            continue
        for path in sorted(sub.rglob("*")):
            if path.suffix == ".c":
                name = path.name
            elif path.suffix != ".py" or (path.parent == sub and path.name == "__init__.py"):
                continue
            else:  # a module, or a nested package by its folder's name
                name = path.parent.name if path.name == "__init__.py" else path.stem
            if name not in words:
                missing.append(str(path.relative_to(PACKAGE)))
    return missing


def test_the_architecture_page_names_every_module_under_its_subpackage() -> None:
    # GIVEN the layout of docs/architecture.rst and the package's files
    text = DOC.read_text(encoding="utf-8")
    # THEN every top-level module, every subpackage and every module of a subpackage
    # (nested packages too, and the C sources) is named on the map
    assert _unnamed(text) == []
    # AND each is a regular package (a folder without __init__.py is left out of a wheel)
    assert [p.name for p in PACKAGE.glob("*/") if p.name != "__pycache__"
            and not (p / "__init__.py").exists()] == []  # fmt: skip
    # AND the check is not vacuous: a page without the _observe entry misses it
    cut = "\n".join(line for line in text.splitlines() if "_observe/" not in line)
    assert "_observe/" in _unnamed(cut)
