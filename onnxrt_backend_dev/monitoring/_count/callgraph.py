"""Each Python function's instructions, from callgrind's output and the interpreter's
perf map (and its allocated bytes, from DHAT's: :func:`read_dhat`).

With ``-X perf`` (Python >= 3.12) every Python call enters the interpreter through a
trampoline of its own, listed in ``/tmp/perf-PID.map`` (``address size
py::qualname:file``). callgrind runs with every *named* function skipped
(:func:`.valgrind.skip_patterns`): their instructions count for the nearest function
kept, the trampoline of the innermost Python function (or valgrind's unnamed stubs,
whose cost is given back to their caller here). What is left is the Python call graph.
What no Python function ran is the pseudo-function ``<interpreter>``: the functions add
up to the whole run. Both files are read as untrusted.
"""

from __future__ import annotations

import ast
import bisect
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .._errors import CounterError

# The pseudo-function of the instructions no Python function ran.
INTERPRETER = ("~", 0, "<interpreter>")
# The allocators whose calls are counted per Python function (kept by callgrind, not
# skipped): the C library's and Python's (pymalloc takes its arenas from the former).
ALLOCATORS = (
    "malloc", "calloc", "realloc", "PyObject_Malloc", "PyObject_Calloc", "PyObject_Realloc",
    "PyMem_Malloc", "PyMem_Calloc", "PyMem_Realloc",
)  # fmt: skip
# A source file larger than this is not parsed for its functions' first lines.
_MAX_SOURCE = 4 * 2**20
# A perf map with more lines than this is not a perf map.
_MAX_MAP_LINES = 2_000_000
_STRIPPED = (
    "the interpreter has no symbols (a stripped build): callgrind cannot tell its C "
    "functions from the Python trampolines, so the whole run is counted, not each function"
)


@dataclass
class _Graph:
    """callgrind's figures by node name: self cost, calls between nodes."""

    self_cost: dict[str, int] = field(default_factory=dict)
    # (caller, callee) -> [calls, inclusive instructions]
    calls: dict[tuple[str, str], list[int]] = field(default_factory=dict)


def _numbers(line: bytes) -> list[int] | None:
    words = line.split()
    if not words or not all(w.isdigit() for w in words):
        return None
    return [int(w) for w in words]


def _lines(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from f


def parse_callgrind(path: str) -> _Graph:
    """The nodes and calls of a callgrind output written with ``--compress-strings=no``
    and ``--dump-line=no`` (one position per cost line).

    :param path: the file
    :return: the graph
    """
    graph = _Graph()
    fn = cfn = ""
    pending: int | None = None
    for raw in _lines(path):
        head = raw[:4]
        if head.startswith(b"fn="):
            fn, pending = raw[3:].strip().decode("utf-8", "replace"), None
        elif head == b"cfn=":
            cfn = raw[4:].strip().decode("utf-8", "replace")
        elif head.startswith(b"call"):
            numbers = _numbers(raw[6:]) if raw.startswith(b"calls=") else None
            pending = numbers[0] if numbers else None
        elif raw[:1].isdigit() and fn:
            numbers = _numbers(raw)
            if numbers is None or len(numbers) < 2:
                continue
            if pending is not None:
                edge = graph.calls.setdefault((fn, cfn), [0, 0])
                edge[0] += pending
                edge[1] += numbers[1]
                pending = None
            else:
                graph.self_cost[fn] = graph.self_cost.get(fn, 0) + numbers[1]
    return graph


class PerfMap:
    """The interpreter's perf map: which trampoline is which Python function.

    :param path: ``/tmp/perf-PID.map``
    """

    def __init__(self, path: str) -> None:
        spans: list[tuple[int, int, str]] = []
        try:
            for i, raw in enumerate(_lines(path)):
                if i >= _MAX_MAP_LINES:
                    break
                parts = raw.decode("utf-8", "replace").rstrip("\n").split(" ", 2)
                if len(parts) == 3 and parts[2].startswith("py::"):
                    try:
                        spans.append((int(parts[0], 16), int(parts[1], 16), parts[2][4:]))
                    except ValueError:
                        continue
        except OSError as e:
            raise CounterError(
                f"the interpreter wrote no perf map ({e}): per-function counts need -X perf",
                usage=False,
            ) from None
        spans.sort()
        self._starts = [s[0] for s in spans]
        self._spans = spans

    def function(self, node: str) -> tuple[str, str] | None:
        """``(file, qualname)`` of a callgrind node, None when it is no trampoline.

        :param node: ``0x000000000547c7bc`` (a recursion's ``'2`` suffix ignored)
        """
        base = node.split("'", 1)[0]
        if not base.startswith("0x"):
            return None
        try:
            address = int(base, 16)
        except ValueError:
            return None
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0:
            return None
        start, size, name = self._spans[i]
        if not start <= address < start + size:
            return None
        qualname, _, file = name.partition(":")
        return file, qualname


def first_lines(file: str, cwd: str | None = None) -> dict[str, int]:
    """The first line of each function, class body and module of a source file, by
    qualified name (``A.b.<locals>.<genexpr>``), the first one where a name repeats.

    :param file: the file, as the interpreter named it
    :param cwd: the folder a relative name is relative to
    :return: qualname -> line, empty when the file cannot be read or parsed
    """
    path = os.path.join(cwd or os.getcwd(), file)
    try:
        if os.path.getsize(path) > _MAX_SOURCE:
            return {}
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError, MemoryError, RecursionError):
        return {}
    found = {"<module>": 1}
    todo: list[tuple[ast.AST, str]] = [(tree, "")]
    while todo:
        node, prefix = todo.pop()
        for child in ast.iter_child_nodes(node):
            inner = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                found.setdefault(name, child.lineno)
                inner = name + ("." if isinstance(child, ast.ClassDef) else ".<locals>.")
            elif isinstance(child, ast.Lambda):
                found.setdefault(prefix + "<lambda>", child.lineno)
            elif isinstance(child, ast.GeneratorExp):
                found.setdefault(prefix + "<genexpr>", child.lineno)
            todo.append((child, inner))
    return found


class SourceLines:
    """First lines by file, each file parsed once."""

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self.files: dict[str, dict[str, int]] = {}

    def key(self, file: str, qualname: str) -> tuple[str, int, str]:
        lines = self.files.get(file)
        if lines is None:
            real = not (file.startswith("<") and file.endswith(">"))
            lines = self.files[file] = first_lines(file, self.cwd) if real else {}
        return file, lines.get(qualname, 0), qualname


def python_nodes(graph: _Graph, perf: PerfMap, cwd: str | None = None) -> dict[str, Any]:
    """Each node's Python function (``(file, first line, qualname)``), None for the
    others.

    :param graph: the graph
    :param perf: the run's perf map
    :param cwd: the folder the program ran in
    :return: node -> key or None
    """
    lines = SourceLines(cwd)
    nodes = set(graph.self_cost) | {n for edge in graph.calls for n in edge}
    py: dict[str, Any] = {}
    for node in nodes:
        f = perf.function(node)
        py[node] = None if f is None else lines.key(*f)
    return py


def _own_costs(graph: _Graph, py: dict[str, Any]) -> dict[str, int]:
    """Each trampoline node's own instructions: its self cost, and what the unnamed code
    it called cost, less the Python functions that code called in turn."""
    into: dict[str, int] = {}
    py_inside: dict[str, int] = {}
    for (caller, callee), (n, inclusive) in graph.calls.items():
        into[callee] = into.get(callee, 0) + n
        if py.get(callee) is not None and py.get(caller) is None:
            py_inside[caller] = py_inside.get(caller, 0) + inclusive
    own = {node: cost for node, cost in graph.self_cost.items() if py.get(node) is not None}
    for (caller, callee), (n, inclusive) in graph.calls.items():
        if py.get(caller) is None or py.get(callee) is not None:
            continue
        inside = py_inside.get(callee, 0) * n / max(into.get(callee, 1), 1)
        own[caller] = own.get(caller, 0) + max(inclusive - round(inside), 0)
    return own


def allocations_of(graph: _Graph, py: dict[str, Any]) -> dict[Any, int]:
    """Each Python function's calls to the allocators (:data:`ALLOCATORS`): its own
    calls, and its share (by calls) of those of the unnamed code it called.

    :param graph: the graph
    :param py: each node's function key, None for a node that is no Python function
    :return: function key -> allocation calls
    """
    names = set(ALLOCATORS)
    via: dict[str, int] = {}
    for (caller, callee), (n, _) in graph.calls.items():
        if callee in names and py.get(caller) is None and caller not in names:
            via[caller] = via.get(caller, 0) + n
    into: dict[str, int] = {}
    for (caller, callee), (n, _) in graph.calls.items():
        if callee in via and py.get(caller) is not None:
            into[callee] = into.get(callee, 0) + n
    found: dict[Any, float] = {}
    for (caller, callee), (n, _) in graph.calls.items():
        key = py.get(caller)
        if key is None:
            continue
        if callee in names:
            found[key] = found.get(key, 0.0) + n
        elif callee in via:
            found[key] = found.get(key, 0.0) + via[callee] * n / into[callee]
    return {key: round(calls) for key, calls in found.items()}


def stats_of(graph: _Graph, perf: PerfMap, total: int, cwd: str | None = None) -> dict[Any, Any]:
    """The graph as cProfile's statistics of the Python functions, in instructions.

    :param graph: from :func:`parse_callgrind`
    :param perf: the run's perf map
    :param total: the whole run's instructions
    :param cwd: the folder the program ran in (relative file names)
    :return: ``{(file, line, name): [cc, nc, own, inclusive, {caller: [cc, nc, own,
        inclusive]}]}``, with :data:`INTERPRETER` for what no function ran
    :raises CounterError: the interpreter has no symbols (nothing tells its C functions
        from the trampolines)
    """
    py = python_nodes(graph, perf, cwd)
    stats: dict[Any, Any] = {}
    for node, cost in _own_costs(graph, py).items():
        entry = stats.setdefault(py[node], [0, 0, 0, 0, {}])
        entry[2] += cost
    direct = 0
    for (caller, callee), (n, inclusive) in graph.calls.items():
        key = py.get(callee)
        if key is None or caller.split("'", 1)[0] == callee.split("'", 1)[0]:
            continue  # no Python function, or a recursion (counted once)
        entry = stats.setdefault(key, [0, 0, 0, 0, {}])
        entry[0] += n
        entry[1] += n
        entry[3] += inclusive
        source = py.get(caller) or INTERPRETER
        direct += source != INTERPRETER
        edge = entry[4].setdefault(source, [0, 0, 0, 0])
        edge[0] += n
        edge[1] += n
        edge[3] += inclusive
    if len(stats) >= 2 and not direct:
        raise CounterError(_STRIPPED, usage=False)
    for entry in stats.values():
        entry[3] = max(entry[3], entry[2])
        for edge in entry[4].values():  # an edge's own share, in proportion
            edge[2] = round(entry[2] * edge[3] / entry[3]) if entry[3] else 0
    attributed = sum(entry[2] for entry in stats.values())
    rest = max(total - attributed, 0)
    stats[INTERPRETER] = [1, 1, rest, total, {}]
    return stats


def read_callgrind(
    path: str, perf_map: str, total: int, cwd: str | None = None
) -> tuple[dict[Any, Any] | None, dict[Any, int], list[str]]:
    """A callgrind run's Python functions, when the interpreter allows it.

    :param path: callgrind's output
    :param perf_map: the interpreter's perf map
    :param total: the whole run's instructions
    :param cwd: the folder the program ran in
    :return: ``(functions, allocation calls, notes)``: None, nothing and why for a
        stripped interpreter or no map
    """
    graph = parse_callgrind(path)
    try:
        perf = PerfMap(perf_map)
        stats = stats_of(graph, perf, total, cwd)
    except CounterError as e:
        return None, {}, [str(e)]
    return stats, allocations_of(graph, python_nodes(graph, perf, cwd)), []


def read_total(path: str) -> int:
    """The instructions of a cachegrind or callgrind output file (its ``summary:``).

    :param path: the file
    :return: the count
    :raises CounterError: no summary in it
    """
    with open(path, "rb") as f:
        for raw in f:
            if raw.startswith((b"summary:", b"totals:")):
                words = raw.split()
                if len(words) >= 2 and words[1].isdigit():
                    return int(words[1])
    raise CounterError(f"valgrind's output {path!r} holds no count", usage=False)


# DHAT's options: heap blocks only, stacks deep enough to reach the trampoline above
# the C code that allocated (the evaluation loop, an object's constructor, the allocator).
DHAT_ARGS = ("--tool=dhat", "--mode=heap", "--num-callers=64")
# A larger file is refused rather than read (a program with millions of allocating stacks).
MAX_DHAT_FILE = 1 << 30


def read_dhat(path: str, perf_map: str, cwd: str | None = None) -> dict[Any, int]:
    """The bytes each Python function allocated in a DHAT run (``--count-bytes``).

    DHAT records every heap block with the stack that allocated it; the counted run sets
    ``PYTHONMALLOC=malloc`` so that every object is one ``malloc`` (DHAT does not see
    Python's arenas). The innermost perf trampoline on an allocating stack names the
    Python function whose code allocated (its *own* bytes; the rest goes to
    :data:`INTERPRETER`).

    :param path: DHAT's output (JSON)
    :param perf_map: the interpreter's perf map
    :param cwd: the folder the program ran in (relative file names)
    :return: ``(file, first line, qualname) -> bytes``, with :data:`INTERPRETER`
    :raises CounterError: the file is missing, too large or not DHAT's
    """
    try:
        if os.path.getsize(path) > MAX_DHAT_FILE:
            raise CounterError(
                f"DHAT's output {path!r} is over {MAX_DHAT_FILE >> 20} MiB", usage=False
            )
        with open(path, "rb") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise CounterError(f"DHAT's output {path!r} cannot be read: {e}", usage=False) from None
    pps, frames = (doc.get("pps"), doc.get("ftbl")) if isinstance(doc, dict) else (None, None)
    if not isinstance(pps, list) or not isinstance(frames, list):
        raise CounterError(f"{path!r} is not DHAT's output (no pps, ftbl)", usage=False)
    perf, lines = PerfMap(perf_map), SourceLines(cwd)
    keys: dict[int, Any] = {}  # frame index -> its function, None when no trampoline

    def key_of(i: Any) -> Any:
        if not isinstance(i, int):
            return None
        if i not in keys:
            text = frames[i] if 0 <= i < len(frames) else ""
            found = perf.function(str(text).split(":", 1)[0].strip()) if text else None
            keys[i] = None if found is None else lines.key(*found)
        return keys[i]

    own: dict[Any, int] = {}
    for pp in pps:
        size, stack = (pp.get("tb"), pp.get("fs")) if isinstance(pp, dict) else (None, None)
        if not isinstance(size, int) or size <= 0 or not isinstance(stack, list):
            continue
        # The innermost trampoline: the stack is listed from the allocator outwards.
        key = next((k for k in map(key_of, stack) if k is not None), INTERPRETER)
        own[key] = own.get(key, 0) + size
    return own
