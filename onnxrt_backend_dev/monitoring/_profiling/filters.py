"""The one filter stage of every view (the default filter, ``hide_stdlib``,
``min_share``, ``max_depth``, ``focus``), so that the views cannot drift apart."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from .._validate import check_callable
from .choices import check_filters
from .model import FilterNode, ProfileNode, TimeElements, _in_small_module, _may_hide


@dataclass(frozen=True)
class ViewOptions:
    """Filters applied when a graph is turned into rows, paths or the call tree.

    :param hide_stdlib: skip frames of the standard library, installed packages and
        built-ins; their callees take their place
    :param min_share: hide rows below this share of the total time (0 to 1)
    :param max_depth: hide rows deeper than this (0 is the top level)
    :param focus: start only from the functions whose name contains this text (or whose
        ``file:line:name`` key it is; never a file alone, which would start from every
        ``<module>`` of the file)
    """

    hide_stdlib: bool = False
    min_share: float = 0.0
    max_depth: int | None = None
    focus: str | None = None

    FIELDS = ("hide_stdlib", "min_share", "max_depth", "focus")

    def __post_init__(self) -> None:
        check_filters(self.min_share, self.max_depth, self.focus)


def _small_module_nodes(nodes: list[ProfileNode]) -> set[ProfileNode]:
    """The nodes of the modules the default filter looks at, one test per file."""
    by_file: dict[str, bool] = {}
    small = set()
    for n in nodes:
        is_small = by_file.get(n.filename)
        if is_small is None:
            is_small = by_file[n.filename] = _in_small_module(n)
        if _may_hide(n, is_small):
            small.add(n)
    return small


class FilterStage:
    """The filters of one view, asked the same questions by every view.

    :param options: the user's filters
    :param reachable: the nodes of the graph the view reads (the default filter looks
        for the few nodes it may hide once)
    :param total: the time ``min_share`` is a share of
    :param filter_node: keeps a node if it returns True (with the call's figures in
        ``info`` for a reference), None keeps every node
    :param min_fraction: a floor under ``min_share`` (call paths drop negligible paths)
    """

    def __init__(
        self,
        options: ViewOptions,
        reachable: list[ProfileNode],
        total: float,
        filter_node: FilterNode | None = None,
        min_fraction: float = 0.0,
    ) -> None:
        self.filter_node = filter_node
        self.min_time = max(options.min_share, min_fraction) * total
        self.max_depth = options.max_depth
        self.limited = options.max_depth is not None or self.min_time > 0
        self.hide_stdlib = options.hide_stdlib
        self.focus_mode = options.focus is not None
        # The default filter only ever drops nodes of a few modules: find them once.
        self.small = (
            _small_module_nodes(reachable)
            if filter_node is ProfileNode.filter_node_
            else set[ProfileNode]()
        )
        self.no_filter = filter_node is None or (
            filter_node is ProfileNode.filter_node_ and not self.small
        )

    def depth_ok(self, depth: int) -> bool:
        """Tells if a row at ``depth`` is within ``max_depth``."""
        return self.max_depth is None or depth <= self.max_depth

    def below(self, tall: float) -> bool:
        """Tells if a time is below ``min_share`` (or the floor)."""
        return self.min_time > 0 and tall < self.min_time

    def keep(self, depth: int, tall: float) -> bool:
        """Tells if a row at ``depth`` taking ``tall`` passes ``max_depth`` and
        ``min_share``."""
        return self.depth_ok(depth) and not self.below(tall)

    def hidden(self, node: ProfileNode) -> bool:
        """Tells if ``hide_stdlib`` hides ``node`` (its callees take its place)."""
        return self.hide_stdlib and node.library

    def accept(self, child: ProfileNode, depth: int, el: TimeElements, ref: bool) -> bool:
        """Applies ``filter_node`` to a callee (with the edge's figures for a reference)."""
        if self.filter_node is None:
            return True
        if self.filter_node is ProfileNode.filter_node_ and child not in self.small:
            return True
        info = {**call_dict(child, depth, el), "more": "+"} if ref else None
        return bool(self.filter_node(child, info=info))


def call_dict(node: ProfileNode, indent: int, el: TimeElements) -> dict[str, Any]:
    """The figures of a call as the reference's rows and ``filter_node`` read them.

    :param node: the callee
    :param indent: the depth of its row
    :param el: the call's figures ``(nc1, nc2, tin, tall)``
    :return: ``fct, where, nc1, nc2, tin, tall, indent, ncalls``
    """
    return {
        "fct": node.func_name,
        "where": node.key,
        "nc1": el[0],
        "nc2": el[1],
        "tin": el[2],
        "tall": el[3],
        "indent": indent,
        "ncalls": len(node.calls_to),
    }


def focus_starts(options: ViewOptions, reachable: list[ProfileNode]) -> list[ProfileNode] | None:
    """The functions a view starts from with ``focus``, in ``reachable`` order.

    :param options: the filters
    :param reachable: the nodes of the graph
    :return: the nodes, None without ``focus``
    """
    focus = options.focus
    if focus is None:
        return None
    return [n for n in reachable if (focus in n.func_name or focus == n.key) and not n.virtual]


def outermost(matches: list[ProfileNode]) -> list[ProfileNode]:
    """The matches of ``focus`` that no other match calls, directly or not (else the time
    of ``loads`` counts twice when ``load`` calls it); if every match is called by
    another (a cycle), the one with the most time.

    :param matches: the functions ``focus`` matched
    :return: those to start from, in the same order
    """
    if len(matches) < 2:
        return matches
    wanted = set(matches)
    owner: dict[ProfileNode, ProfileNode] = {m: m for m in matches}
    covered: set[ProfileNode] = set()
    queue = deque(matches)
    while queue:
        node = queue.popleft()
        origin = owner[node]
        for child in node.calls_to:
            if child in wanted and child is not origin:
                covered.add(child)
            if child not in owner:
                owner[child] = origin
                queue.append(child)
    kept = [m for m in matches if m not in covered]
    return kept or [max(matches, key=lambda m: m.tall)]


def default_filter(filter_node: FilterNode | None) -> FilterNode:
    """The node filter of the views: ``filter_node`` or the reference's default one.

    :raises BadType: ``filter_node`` is neither None nor callable
    """
    check_callable("filter_node", filter_node, optional=True)
    return ProfileNode.filter_node_ if filter_node is None else filter_node


__all__ = ["FilterStage", "ViewOptions", "default_filter", "focus_starts", "outermost"]
