"""From validated profiles (:mod:`.load`) to the call graph of :class:`ProfileNode
<.model.ProfileNode>`, iteratively: profiles can be thousands of frames deep or cyclic."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._errors import BadValue
from .._gc import gc_paused
from .load import ValidatedStats
from .model import ProfileNode, TimeElements, is_library_path, virtual_node

# Entries written by the profilers themselves, not by the profiled code.
_PROFILER_ARTIFACTS = ("method 'disable' of '_lsprof.Profiler'",)
_PROFILER_KEYS = {("profile", 0, "profiler")}


def is_artifact(func: tuple[Any, ...]) -> bool:
    if func in _PROFILER_KEYS:
        return True
    name = str(func[2])
    # map, not a generator: this runs once per function of the profile
    return any(map(name.__contains__, _PROFILER_ARTIFACTS))


def _edge_elements(value: Any, callee: ProfileNode) -> TimeElements:
    """Figures of one call edge; the ``profile`` module stores only a call count, which
    is turned into a share of the callee's figures."""
    if isinstance(value, tuple):
        return value
    frac = value / callee.nc2 if callee.nc2 else 0.0
    return (value, value, callee.tin * frac, callee.tall * frac)


class _GraphBuilder:
    """Accumulates nodes and edges from raw stats dictionaries, merging collisions."""

    def __init__(self, clean_text: Callable[[str], str]) -> None:
        self.clean_text = clean_text
        self.nodes: dict[str, ProfileNode] = {}
        self.by_func: dict[Any, ProfileNode] = {}
        self.merged = False
        self.artifacts: set[Any] = set()
        self.files: dict[Any, tuple[str, bool]] = {}
        self.placeholders: set[int] = set()

    def file_info(self, file: Any) -> tuple[str, bool]:
        """The cleaned file name and whether it is library code, once per file."""
        info = self.files.get(file)
        if info is None:
            raw = str(file).replace("\\", "/")
            info = self.files[file] = (self.clean_text(raw), is_library_path(raw))
        return info

    def node_for(self, func: tuple[Any, ...], value: Sequence[Any] | None) -> ProfileNode:
        node = self.by_func.get(func)
        if node is not None:
            return node
        filename, library = self.file_info(func[0])
        line, name = int(func[1]), str(func[2])
        nc1, nc2, tin, tall = value[:4] if value is not None else (0, 0, 0.0, 0.0)
        key = f"{filename}:{line}:{name}"
        node = self.nodes.get(key)
        if node is None:
            node = ProfileNode(filename, line, name, nc1, nc2, tin, tall, library)
            self.nodes[key] = node
        else:
            # Two functions (or one in two profiles) share a key after clean_text: merge.
            self._merge(node, (nc1, nc2, tin, tall))
        self.by_func[func] = node
        return node

    def add_stats(self, stats: dict[Any, Any]) -> None:
        for func, value in stats.items():
            if len(value) < 4 or is_artifact(func):
                self.artifacts.add(func)
            elif func not in self.by_func:
                self.node_for(func, value)
            else:  # the same function in another profile
                self._merge(self.by_func[func], value)

    def _merge(self, node: ProfileNode, figures: Sequence[Any]) -> None:
        """Adds the figures of another function of the same key to ``node``."""
        self.merged = True
        node.nc1 += figures[0]
        node.nc2 += figures[1]
        node.tin += figures[2]
        node.tall += figures[3]

    def add_edges(self, stats: dict[Any, Any]) -> None:
        by_func, artifacts = self.by_func, self.artifacts
        node_of = by_func.__getitem__
        for func, value in stats.items():
            if len(value) < 5 or not value[4] or func in artifacts:
                continue
            callee = by_func[func]
            callers = value[4]
            try:
                nodes = list(map(node_of, callers))
            except KeyError:
                self._add_edges_slowly(callee, callers)
                continue
            callee.called_by.extend(nodes)
            # nodes was built from the keys of callers: same length, no check needed.
            for caller, edge in zip(nodes, callers.values(), strict=False):
                if type(edge) is not tuple:
                    edge = _edge_elements(edge, callee)
                caller.calls_to.append(callee)
                caller.calls_to_elements.append(edge)

    def _add_edges_slowly(self, callee: ProfileNode, callers: dict[Any, Any]) -> None:
        """Edges from callers without an entry of their own: profiler artifacts are
        skipped, other callers get a node (some tools write such files)."""
        for caller_func, edge in callers.items():
            caller = self.by_func.get(caller_func)
            if caller is None:
                if caller_func in self.artifacts or is_artifact(caller_func):
                    continue
                caller = self.node_for(caller_func, None)
                self.placeholders.add(id(caller))
            el = _edge_elements(edge, callee)
            if id(caller) in self.placeholders:
                # Known only as a caller: its figures are those of the calls it made.
                caller.nc1 += el[0]
                caller.nc2 += el[1]
                caller.tall += el[3]
            callee.called_by.append(caller)
            caller.calls_to.append(callee)
            caller.calls_to_elements.append(el)

    def dedupe_edges(self) -> None:
        """Merges the edges that collisions duplicated (same caller and callee)."""
        for node in self.nodes.values():
            merged: dict[ProfileNode, list[Any]] = {}  # nodes hash by identity
            for child, el in zip(node.calls_to, node.calls_to_elements, strict=True):
                acc = merged.get(child)
                if acc is None:
                    merged[child] = list(el)
                else:
                    for i in range(min(len(acc), len(el))):
                        acc[i] += el[i]
            node.calls_to = list(merged)
            node.calls_to_elements = [tuple(el) for el in merged.values()]
            node.called_by = list(dict.fromkeys(node.called_by))


def build_graph(
    profiles: Sequence[ValidatedStats], clean_text: Callable[[str], str] | None = None
) -> tuple[ProfileNode, dict[str, ProfileNode]]:
    """Converts one or several profiles into a graph.

    :param profiles: the profiles (:func:`.load.load_profiles`), merged into one graph
    :param clean_text: function to clean file names
    :return: the root and the nodes by key; when several entry points exist, the root is
        a virtual node (not in the dictionary) calling each of them
    """
    dicts = [p.stats for p in profiles]
    from .._validate import checked_text_function

    builder = _GraphBuilder(checked_text_function("clean_text", clean_text))
    with gc_paused():
        for stats in dicts:
            builder.add_stats(stats)
        for stats in dicts:
            builder.add_edges(stats)
        if builder.merged or len(dicts) > 1:
            builder.dedupe_edges()
    nodes = builder.nodes
    if not nodes:
        raise BadValue("ps must hold at least one profiled function, got an empty profile")
    entries = entry_points(list(nodes.values()))
    root = entries[0] if len(entries) == 1 else virtual_node("<all>", entries)
    return root, nodes


def entry_points(nodes: list[ProfileNode]) -> list[ProfileNode]:
    """Functions without callers, then the most consuming function of each part of the
    graph reachable from none of them (a cycle).

    :param nodes: all the nodes of a graph
    :return: starting points from which every node is reachable
    """
    entries = [n for n in nodes if not n.called_by]
    reached: set[ProfileNode] = set()
    _mark_reachable(entries, reached)
    if len(reached) < len(nodes):
        for n in sorted(nodes, key=lambda n: -n.tall):
            if n not in reached:
                entries.append(n)
                _mark_reachable([n], reached)
    return entries


def _mark_reachable(starts: Iterable[ProfileNode], reached: set[ProfileNode]) -> None:
    """Adds to ``reached`` the nodes reachable from ``starts``."""
    stack = [s for s in starts if s not in reached]
    reached.update(stack)
    add, push = reached.add, stack.append
    while stack:
        for child in stack.pop().calls_to:
            if child not in reached:
                add(child)
                push(child)
