"""The reference view: the call graph as the reference's forest of rows, which
``to_text``, ``as_dict``, ``to_json`` and the reference HTML page render."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter
from pstats import SortKey
from typing import Any

from .filters import FilterStage, ViewOptions, default_filter, focus_starts
from .model import FilterNode, ProfileNode, TimeElements, reachable_nodes
from .sorting import _line_keys, _line_rank_keys, sort_function

# A row of the walk: (node, depth, (nc1, nc2, tin, tall), ref).
RawRow = tuple["ProfileNode", int, TimeElements, bool]
# Consecutive rows of one depth and one kind: (depth, nodes, figures, ref).
Segment = tuple[int, Sequence["ProfileNode"], Sequence[TimeElements], bool]
# A frame of the walk's stack: [callees, figures, in_refs, next index, depth].
_Frame = list[Any]


def _tree_roots(start: ProfileNode, reachable: list[ProfileNode]) -> list[ProfileNode]:
    """Nodes printed at the top level, in ``reachable`` order: the start, every
    function called from zero or several places and, below a virtual start (never
    printed), each of its entry points (the one chosen to enter a cycle has a single
    caller, inside the cycle, and would vanish otherwise).

    A function with a single caller is expanded under it: going down from these nodes
    through single-caller callees reaches every node, so one test per node suffices.

    :param start: the node the rows start from (``reachable[0]``)
    :param reachable: the nodes reachable from ``start``, see :func:`reachable_nodes`
    :return: the top-level nodes
    """
    entries = set(start.calls_to) if start.virtual else set()
    return [n for n in reachable if len(n.called_by) != 1 or n is start or n in entries]


def _total_time(reachable: list[ProfileNode]) -> float:
    """The total time shares are relative to: the sum of the own times, or the largest
    time with callees if larger (yappi's own times leave some time out)."""
    own = sum([n.tin for n in reachable if n.tin > 0 and not n.virtual])
    return max(own, max([n.tall for n in reachable if not n.virtual], default=0.0))


def _next_false(flags: list[bool], start: int, end: int) -> int:
    """The index of the first False of ``flags`` from ``start``, ``end`` if none."""
    try:
        return flags.index(False, start, end)
    except ValueError:
        return end


class TreeRows:
    """The rows of the tree view of a graph, produced lazily by a depth-first walk with an
    explicit stack.

    Every function called from zero or several places is printed once at the top level
    and referenced (``ref``) under each caller; a function with a single caller is
    expanded under it. With ``focus``, the expansion starts from the matching functions
    and each function is expanded the first time it is met, referenced afterwards.

    :param start: the node to start from
    :param filter_node: keeps a node if it returns True (None: the default filter)
    :param sort_key: order of the top-level rows and of the callees
    :param options: filters
    """

    def __init__(
        self,
        start: ProfileNode,
        filter_node: FilterNode | None = None,
        sort_key: Any = SortKey.LINE,
        options: ViewOptions | None = None,
    ) -> None:
        options = options or ViewOptions()
        self.filter_node = filter_node = default_filter(filter_node)
        reachable = reachable_nodes(start)
        self.sortf = sort_function(sort_key)
        # The line keys read the nodes only, never the figures of the calls.
        self.by_line = self.sortf is _line_keys
        if self.by_line:
            self.sortf = _line_rank_keys(reachable) or _line_keys
        self.total = _total_time(reachable)
        self.stage = FilterStage(options, reachable, self.total, filter_node)
        # Default mode: a callee is a reference if it is printed at the top level
        # (``refs``). Focus mode: if it was met before (``seen``).
        self.refs: set[ProfileNode] = set()
        self.seen: set[ProfileNode] = set()
        top = focus_starts(options, reachable)
        if top is None:
            top = _tree_roots(start, reachable)
            self.refs = set(top)
        self.top = self.sorted_top(top)
        # The largest call count of the graph bounds those of the rows.
        counts = [n.nc1 for n in reachable] + [n.nc2 for n in reachable]
        self.max_count = max(map(abs, map(int, counts)), default=0)

    def sorted_top(self, top: list[ProfileNode]) -> list[ProfileNode]:
        """Sorts top-level nodes as callees are sorted, their own figures standing for
        those of a call (a stable sort)."""
        figures = [] if self.by_line else [(n.nc1, n.nc2, n.tin, n.tall) for n in top]
        keys = self.sortf(top, figures)
        return [top[i] for i in sorted(range(len(top)), key=keys.__getitem__)]

    def is_ref(self, child: ProfileNode) -> bool:
        """Tells if ``child`` is only referenced where it is met now."""
        if self.stage.focus_mode:
            return child in self.seen
        return child in self.refs

    def children(self, node: ProfileNode, depth: int) -> _Frame:
        """The sorted callees of ``node`` the filters keep (their rows at ``depth``), as
        a frame of the walk's stack: ``[nodes, figures, in_refs, 0, depth]``."""
        nodes: Sequence[ProfileNode] = node.calls_to
        els: Sequence[TimeElements] = node.calls_to_elements
        if len(nodes) != len(els):
            list(zip(nodes, els, strict=True))  # raises the ValueError naming the sides
        if len(nodes) > 1:
            keys = self.sortf(nodes, els)
            # One stable sort of indices, then both lists reordered in C.
            pick = itemgetter(*sorted(range(len(keys)), key=keys.__getitem__))
            nodes, els = pick(nodes), pick(els)
        stage = self.stage
        if not stage.no_filter:
            accept, is_ref = stage.accept, self.is_ref
            kept = [i for i, c in enumerate(nodes) if accept(c, depth, els[i], is_ref(c))]
            nodes, els = [nodes[i] for i in kept], [els[i] for i in kept]
        if stage.limited:
            keep = stage.keep
            kept = [i for i, el in enumerate(els) if keep(depth, el[3])]
            nodes, els = [nodes[i] for i in kept], [els[i] for i in kept]
        refs = self.refs
        if stage.hide_stdlib:
            # A hidden function printed at the top level is skipped where it is called.
            kept = [i for i, c in enumerate(nodes) if not (c.library and c in refs)]
            nodes, els = [nodes[i] for i in kept], [els[i] for i in kept]
        return [nodes, els, list(map(refs.__contains__, nodes)), 0, depth]

    def _head(self, start: ProfileNode) -> tuple[RawRow | None, int] | None:
        """The row of a top-level node and the depth of its callees, None to skip it."""
        if start in self.seen:
            return None  # focus: already expanded under another focused function
        if start.virtual:
            return None  # its callees are entry points, top-level rows themselves
        # A function the user focused on is shown even if the default filter would hide
        # it (a small leaf): the view would be empty.
        filter_node = self.filter_node
        if not (
            self.stage.focus_mode and filter_node is ProfileNode.filter_node_
        ) and not filter_node(start):
            return None
        if self.stage.limited and not self.stage.keep(0, start.tall):
            return None  # min_share hides a top-level row as any other (with its subtree)
        self.seen.add(start)
        if self.stage.hidden(start):
            return None, 0
        return (start, 0, (start.nc1, start.nc2, start.tin, start.tall), False), 1

    def segments(self) -> Iterator[Segment]:
        """Yields the rows, depth first, as segments ``(depth, nodes, figures, ref)``:
        consecutive rows of one depth and kind (a run of references is one segment, which
        renderers format with C loops).

        A node is expanded once (a hand-made graph's called_by may disagree with its
        calls_to); a node ``hide_stdlib`` hides gives its place to its callees.
        """
        seen, children = self.seen, self.children
        hide = self.stage.hide_stdlib
        for start in self.top:
            head = self._head(start)
            if head is None:
                continue
            if head[0] is not None:
                yield 0, (start,), (head[0][2],), False
            stack = [children(start, head[1])]
            while stack:
                frame = stack[-1]
                nodes, els, in_refs, pos, depth = frame
                end = len(nodes)
                while pos < end:
                    if in_refs[pos]:
                        stop = _next_false(in_refs, pos, end)
                        yield depth, nodes[pos:stop], els[pos:stop], True
                        pos = stop
                        continue
                    node = nodes[pos]
                    pos += 1
                    if node in seen:  # met before: a reference, or nothing if hidden
                        if not (hide and node.library):
                            yield depth, (node,), (els[pos - 1],), True
                        continue
                    seen.add(node)
                    frame[3] = pos
                    if hide and node.library:
                        stack.append(children(node, depth))
                    else:
                        yield depth, (node,), (els[pos - 1],), False
                        stack.append(children(node, depth + 1))
                    break
                else:
                    stack.pop()

    def raw(self) -> Iterator[RawRow]:
        """Yields :meth:`segments` one row ``(node, depth, figures, ref)`` at a time."""
        for depth, nodes, els, ref in self.segments():
            for node, el in zip(nodes, els, strict=True):
                yield (node, depth, el, ref)

    def segments_again(self) -> Iterator[Segment]:
        """The segments once more, from the same view: the marks of the walk cleared."""
        self.seen = set()
        return self.segments()
