"""The call paths view: the graph expanded into the paths of a flame graph, and its
renderers (the library's ``to_collapsed`` and ``to_speedscope``, :mod:`..profiling`
exports them): collapsed stacks (``a;b;c N``: the input of flamegraph.pl and most flame
graph tools) or a speedscope document (each path with own time a sample weighing that
time in seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._stacks import export as stacks_export
from .._stacks.frames import SampledFrame
from .._validate import check_number
from .filters import FilterStage, ViewOptions, focus_starts, outermost
from .model import ProfileNode, reachable_nodes
from .run import as_root


class PathItem(NamedTuple):
    """One call path of the expanded tree (flame graph cell)."""

    node: ProfileNode
    parent: int  # index of the parent item, -1 for a top-level item
    depth: int
    total: float
    self_time: float


@dataclass(frozen=True)
class PathLimits:
    """Bounds of the call path expansion, so that any profile gives a bounded output.

    :param max_items: number of call paths kept
    :param max_cells: sum of the depths of the kept paths (the size of stack samples)
    :param min_fraction: paths below this fraction of the total are folded into their
        caller's own time
    """

    max_items: int = 50_000
    max_cells: int = 500_000
    min_fraction: float = 1e-6


def path_samples(
    start: ProfileNode, options: dict[str, Any]
) -> Iterator[tuple[list[SampledFrame], float]]:
    """The graph expanded into call paths, depth first and iteratively, each path with
    own time as the stack exporters take it.

    A callee's time under a path is its edge time scaled by the share of its caller's
    time the path holds (cProfile keeps one level of callers), never more than its
    caller's. A function already on the path is not entered again: its time stays in
    the caller's own time, as does anything the limits or filters cut, so the own times
    sum to the total of the top-level paths.

    :param start: the node to start from (a virtual root expands its entries)
    :param options: filters (:class:`ViewOptions <.filters.ViewOptions>`: ``hide_stdlib``
        folds library frames into their caller) and ``limits`` (:class:`PathLimits`)
    :return: per path, its frames from the top and its own time in seconds
    """
    view = dict(options)
    limits = view.pop("limits", None) or PathLimits()
    filters = ViewOptions(**view)
    reachable = reachable_nodes(start)
    focused = focus_starts(filters, reachable)
    if focused is not None:
        tops = outermost(focused)  # a match called by another is in its paths already
    elif start.virtual:
        tops = list(start.calls_to)
    else:
        tops = [start]
    stage = FilterStage(filters, reachable, sum(n.tall for n in tops), None, limits.min_fraction)
    expander = _PathExpander(stage, limits)
    for top in tops:
        expander.expand(top)
    if stage.hide_stdlib:
        expander.fold_library()
    items = expander.items  # parents before children
    stacks: list[list[SampledFrame]] = []
    for item in items:
        line = item.node.line
        frame = SampledFrame(item.node.func_name, item.node.filename, line, line)
        stacks.append([*(stacks[item.parent] if item.parent >= 0 else []), frame])
    return ((stack, item.self_time) for item, stack in zip(items, stacks, strict=True))


class _PathExpander:
    def __init__(self, stage: FilterStage, limits: PathLimits) -> None:
        self.stage = stage
        self.limits = limits
        self.items: list[PathItem] = []
        # Items and stack cells promised to the paths pushed but not yet expanded.
        self.reserved_items = 0
        self.reserved_cells = 0

    def _reserve(self, depth: int) -> bool:
        lim = self.limits
        if self.reserved_items >= lim.max_items or self.reserved_cells + depth > lim.max_cells:
            return False
        self.reserved_items += 1
        self.reserved_cells += depth
        return True

    def _kept_children(
        self, node: ProfileNode, depth: int, total: float, on_path: set[int]
    ) -> list[tuple[ProfileNode, float]]:
        """The callees kept below ``node`` on a path taking ``total``, hottest first."""
        if not self.stage.depth_ok(depth + 1) or node.tall <= 0 or total <= 0:
            return []
        scale = total / node.tall
        kids = [
            (c, el[3] * scale)
            for c, el in zip(node.calls_to, node.calls_to_elements, strict=True)
            if id(c) not in on_path and el[3] > 0
        ]
        s = sum(t for _, t in kids)
        if s > total:  # recursion counts time twice in cProfile's edges
            kids = [(c, t * total / s) for c, t in kids]
        kids.sort(key=lambda p: -p[1])
        kept = []
        below = self.stage.below
        for child, t in kids:
            if below(t) or not self._reserve(depth + 2):
                break  # sorted by time: the rest is smaller
            kept.append((child, t))
        return kept

    def expand(self, top: ProfileNode) -> None:
        if not self._reserve(1):
            return
        # (node, parent index, depth, total); a None node closes the path of a parent.
        stack: list[tuple[ProfileNode | None, int, int, float]] = [(top, -1, 0, top.tall)]
        on_path: set[int] = set()
        path_nodes: list[ProfileNode] = []
        while stack:
            node, parent, depth, total = stack.pop()
            if node is None:
                on_path.discard(id(path_nodes.pop()))
                continue
            index = len(self.items)
            on_path.add(id(node))
            path_nodes.append(node)
            stack.append((None, -1, 0, 0.0))
            kept = self._kept_children(node, depth, total, on_path)
            own = total - sum(t for _, t in kept)
            self.items.append(PathItem(node, parent, depth, total, max(own, 0.0)))
            for child, t in reversed(kept):
                stack.append((child, index, depth + 1, t))

    def fold_library(self) -> None:
        """Removes library frames from the paths; their own time goes to the nearest
        kept caller (or stays, for a top-level library frame)."""
        new_index: list[int] = []
        kept: list[PathItem] = []
        for item in self.items:
            parent = new_index[item.parent] if item.parent >= 0 else -1
            if self.stage.hidden(item.node) and parent >= 0:
                new_index.append(parent)
                p = kept[parent]
                kept[parent] = p._replace(self_time=p.self_time + item.self_time)
                continue
            depth = kept[parent].depth + 1 if parent >= 0 else 0
            new_index.append(len(kept))
            kept.append(item._replace(parent=parent, depth=depth))
        self.items = kept


def to_collapsed(graph: Any, unit: float = 1e-6, **options: Any) -> str:
    """Exports a profile as collapsed stacks (``a;b;c N``, N in ``unit`` seconds): one
    line per call path with own time (paths rounding to 0 are left out).

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param unit: seconds per count (microseconds by default)
    :param options: filters (see :class:`ViewOptions`) and ``limits``
        (:class:`PathLimits`)
    :return: text, one line per stack
    """
    root = as_root(graph)
    check_number("unit", unit, above=0)  # also refuses NaN and infinity (counts of 0)
    return stacks_export.to_collapsed(path_samples(root, options), unit)


def to_speedscope(
    graph: Any, name: str = "profile", as_str: bool = True, **options: Any
) -> str | dict[str, Any]:
    """Exports a profile as a speedscope document (weights in seconds): each call path
    with own time a sample weighing that time.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param name: name of the profile
    :param as_str: return JSON text or the dictionary
    :param options: filters (see :class:`ViewOptions`) and ``limits``
        (:class:`PathLimits`)
    :return: JSON text or dictionary
    """
    samples = path_samples(as_root(graph), options)
    return stacks_export.to_speedscope(samples, name, "seconds", as_str)
