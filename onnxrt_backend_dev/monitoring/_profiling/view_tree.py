"""The call tree view: one tree rooted at the program's entry point, as pyinstrument and
snakeviz show it, each caller -> callee edge a child with that edge's figures.

cProfile keeps one level of callers, so below a function reached by several paths an
edge's time is scaled by the share of the function's time the path holds, and children
never exceed their parent. A function already on the path (recursion) is not expanded
again: its calls count on its caller's row. When the path comes back into it through
other functions (``A > B > C > A``), cProfile cannot say which callees run under the
inner call: the re-entry is a row of its own (``reentry``) whose children are the
callees new to the path, so that the hot path goes on as pyinstrument's does. It is
shown only for a function some of whose calls were recursive and that leads to a Python
callee above the fold holding :data:`REENTRY_SHARE` of its time, and it never opens
another one. Children are sorted hottest first; those below a share of the total fold
into one ``N more`` row per parent. The filters are :mod:`.filters`'s (with
``hide_stdlib``, library frames give their place to the code they call). Nothing
recurses: an explicit stack drives the expansion.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pstats import SortKey
from typing import Any, NamedTuple

from .._errors import BadType, BadValue
from .._sampling.view import FOLD_SHARE
from .._validate import check_callable
from .filters import FilterStage, ViewOptions, focus_starts, outermost
from .model import FilterNode, ProfileNode, reachable_nodes, virtual_node
from .run import as_root
from .sorting import sort_name

#: The share of its parent's time an entry point holds at least (see entry_point).
ENTRY_SHARE = 0.95
#: Rows kept at most (the rest of the tree is folded into ``N more`` rows).
MAX_ROWS = 100_000
#: The share of a re-entry's time a Python callee new to the path must hold for the
#: re-entry to be shown (a finalizer the collector runs under a recursive call: not).
REENTRY_SHARE = 0.01


class TreeItem(NamedTuple):
    """One row of the call tree (``node`` None: a folded row, ``folded`` siblings)."""

    node: ProfileNode | None
    parent: int  # index of the parent row, -1 for the root
    depth: int
    calls: Any  # the edge's call count (the function's own for the root)
    time: float  # time with callees on this path (seconds)
    share: float  # of the root's time
    recursive: Any  # calls to functions already on the path, folded into this row
    folded: int  # number of rows a folded row stands for
    last: bool  # last child of its parent
    reentry: bool = False  # a function on the path entered again (see the module)


@dataclass
class CallTree:
    """The rows of the call tree in depth-first order, parents before children.

    :param items: rows
    :param total: the root's time, which shares are relative to
    :param fold_share: the share under which rows were folded
    :param capped: the ``max_rows`` the tree reached, 0 if it did not
    :param order: the order of the children: ``cumulative``, ``time`` or ``line``
    """

    items: list[TreeItem]
    total: float
    fold_share: float
    capped: int = 0
    order: str = "cumulative"

    @property
    def root(self) -> TreeItem:
        """The first row."""
        return self.items[0]


# One queued child: (node, calls, time, own time, re-entry) -- own time sorts by ``time``.
_Kid = tuple[ProfileNode, Any, float, float, bool]


def entry_point(root: ProfileNode) -> ProfileNode:
    """The program's entry point below ``root``: down from a virtual root or a built-in
    (``exec`` running a script's ``<module>``) to the callee holding at least
    :data:`ENTRY_SHARE` of its time.

    :param root: the root given by the builder
    :return: the node the tree starts from
    """
    node, seen = root, {root}
    while node.virtual or node.filename == "~":
        best, best_time = None, -1.0
        for child, el in zip(node.calls_to, node.calls_to_elements, strict=True):
            if el[3] > best_time:
                best, best_time = child, el[3]
        if best is None or best in seen:
            break
        if len(node.calls_to) > 1 and not best_time >= ENTRY_SHARE * node.tall:
            break
        node = best
        seen.add(node)
    return node


def _start(root: ProfileNode, reachable: list[ProfileNode], options: ViewOptions) -> ProfileNode:
    focused = focus_starts(options, reachable)
    if focused is None:
        return entry_point(root)
    focused = outermost(focused)  # a match called by another is in its subtree already
    return focused[0] if len(focused) == 1 else virtual_node(f"<{options.focus}>", focused)


# The time flowing down hidden frames stops under this share of the path's time, and
# after so many frames passed on (a dense library graph costs no more than this).
_FLOW_FLOOR = 1e-6
_FLOW_STEPS = 50_000


def _add_kid(
    kids: dict[ProfileNode, list[Any]],
    child: ProfileNode,
    calls: Any,
    time: float,
    own: float,
    reentry: bool,
) -> None:
    """Adds a child's figures, summed with those of the same child met another way."""
    kid = kids.get(child)
    if kid is None:
        kids[child] = [calls, time, own, reentry]
    else:
        kid[0] += calls
        kid[1] += time
        kid[2] += own


# The order of the kept children by sort name; none keeps them hottest first.
_SORT_KEYS: dict[str, Callable[[_Kid], Any]] = {
    "line": lambda k: (k[0].filename, k[0].line),
    "time": lambda k: -k[3],
}


class _Expander:
    def __init__(
        self,
        stage: FilterStage,
        fold_time: float,
        max_rows: int,
        key: Callable[[_Kid], Any] | None,
    ) -> None:
        self.stage = stage
        self.fold_time = fold_time
        self.max_rows = max_rows
        self.key = key
        self.filter_node = None if stage.no_filter else stage.accept
        self.rows = 1  # the root
        self.base = 0
        self.capped = 0

    def _leads_on(self, node: ProfileNode, time: float, on_path: set[ProfileNode]) -> bool:
        """Whether a re-entry of ``node`` taking ``time`` would be shown (see the
        module's docstring)."""
        if not node.nc2 > node.nc1:
            # All its calls were primitive: it never ran twice at once, so the path
            # cannot come back into it (cProfile's cumulative edges say otherwise).
            return False
        scale = time / node.tall if node.tall > 0 else 0.0
        fold = max(self.fold_time, REENTRY_SHARE * time)
        for child, el in zip(node.calls_to, node.calls_to_elements, strict=True):
            # Built-ins left aside: their time is told by the row of the caller.
            if child not in on_path and child.filename != "~":
                t = min(el[3] * scale, time)
                if t > 0 and t >= fold:
                    return True
        return False

    def _edges(
        self, node: ProfileNode, time: float, on_path: set[ProfileNode], reentry: bool
    ) -> tuple[list[_Kid], Any]:
        """The callees of ``node`` on a path where it takes ``time``, and the calls to
        functions already on the path. Below a hidden frame (``hide_stdlib``) or a
        virtual root, the code it calls through hidden frames (:meth:`_through_hidden`)."""
        kids: dict[ProfileNode, list[Any]] = {}
        recursive: Any = 0
        # Library frames above any user code (below a virtual root of several entries,
        # or the interpreter's exec and runpy) are not called from the user's code: the
        # code below them takes their place, as everywhere below a library row.
        if self.stage.hidden(node) or (node.virtual and self.stage.hide_stdlib):
            self._through_hidden(node, time, on_path, kids)
        else:
            scale = time / node.tall if node.tall > 0 else 0.0
            for child, el in zip(node.calls_to, node.calls_to_elements, strict=True):
                t = min(el[3] * scale, time)
                # Direct recursion, or a re-entry that shows nothing new: folded.
                if child in on_path and (
                    reentry or child is node or not self._leads_on(child, t, on_path)
                ):
                    recursive += el[0]
                else:
                    _add_kid(kids, child, el[0], t, min(el[2] * scale, t), child in on_path)
        return [(c, k[0], k[1], k[2], k[3]) for c, k in kids.items()], recursive

    def _through_hidden(
        self,
        start: ProfileNode,
        time: float,
        on_path: set[ProfileNode],
        kids: dict[ProfileNode, list[Any]],
    ) -> None:
        """Adds to ``kids`` the code a hidden frame ``start`` (taking ``time``) calls,
        directly or through other hidden frames.

        The time flows down the hidden frames, each passing its callees their share of
        what it received from *every* path (an event loop's ``Context.run`` is reached by
        many), never more than its own time, so cycles end. Edges back to the path are
        left out: cProfile merges every call of ``exec`` into one frame, whose edges to
        the program's ``<module>`` say nothing of this path.
        """
        floor = time * _FLOW_FLOOR
        counted: set[tuple[ProfileNode, ProfileNode]] = set()  # an edge's calls, once
        received = {start: time}
        pending = {start: time}
        # The largest pending flow first: the bulk of the time reaches the code below
        # before the step bound cuts the trickles circling through import cycles (asyncio's
        # coroutines went missing otherwise). A node queued twice is taken once.
        queue = [(-time, 0, start)]
        order = 1
        steps = 0
        while queue and steps < _FLOW_STEPS:
            parent = heapq.heappop(queue)[2]
            flow = pending.pop(parent, 0.0)
            if flow <= floor:
                continue
            steps += 1
            scale = flow / parent.tall if parent.tall > 0 else 0.0
            for child, el in zip(parent.calls_to, parent.calls_to_elements, strict=True):
                if child in on_path:
                    continue
                t = min(el[3] * scale, flow)
                if not self.stage.hidden(child):
                    calls = 0 if (parent, child) in counted else el[0]
                    counted.add((parent, child))
                    _add_kid(kids, child, calls, t, min(el[2] * scale, t), False)
                    continue
                t = min(t, child.tall - received.get(child, 0.0))
                if t > floor:
                    received[child] = received.get(child, 0.0) + t
                    pending[child] = pending.get(child, 0.0) + t
                    heapq.heappush(queue, (-pending[child], order, child))
                    order += 1

    def children(
        self,
        node: ProfileNode,
        depth: int,
        time: float,
        on_path: set[ProfileNode],
        reentry: bool = False,
    ) -> tuple[list[_Kid], int, float, Any]:
        """Kept children (sorted), the number and time of the folded ones, and the
        recursive calls."""
        kids, recursive = self._edges(node, time, on_path, reentry)
        # Below a virtual root (several entry points), the entries are level 0.
        if not kids or not self.stage.depth_ok(depth + 1 - self.base):
            return [], 0, 0.0, recursive
        if self.filter_node is not None:
            accept = self.filter_node
            kids = [k for k in kids if accept(k[0], depth + 1, (k[1], k[1], k[3], k[2]), False)]
        total = sum(k[2] for k in kids)
        if total > time > 0:  # recursion counts time twice in cProfile's edges
            f = time / total
            kids = [(c, n, t * f, s * f, r) for c, n, t, s, r in kids]
        kids.sort(key=lambda k: -k[2])  # hottest first, to fold the coolest
        # Folding on: rows under the share and rows without time; off: every row.
        fold = self.fold_time
        keep = [k for k in kids if k[2] >= fold and k[2] > 0] if fold > 0 else kids
        room = max(self.max_rows - self.rows, 0)
        if len(keep) > room:
            keep = keep[:room]
            self.capped = self.max_rows
        self.rows += len(keep)
        folded = len(kids) - len(keep)
        folded_time = sum(k[2] for k in kids[len(keep) :]) if folded else 0.0
        if folded:
            self.rows += 1
        if self.key is not None:
            keep.sort(key=self.key)
        return keep, folded, folded_time, recursive


def tree_options(
    options: dict[str, Any], fold_share: float, filter_node: Any, max_rows: int, takes: str
) -> ViewOptions:
    """The filters of a call tree, its own options checked.

    :param options: the keywords left once the tree's own options are taken
    :param fold_share: must be in [0, 1]
    :param filter_node: must be callable or None
    :param max_rows: must be at least 1
    :param takes: the tree's own options, named when a keyword is unknown
    :return: the filters
    """
    unknown = sorted(set(options) - set(ViewOptions.FIELDS))
    if unknown:
        raise BadType(
            f"unexpected option(s) {unknown} for the call tree, which takes {takes} and the "
            f"filters {list(ViewOptions.FIELDS)}"
        )
    check_callable("filter_node", filter_node, optional=True)
    if not 0.0 <= fold_share <= 1.0:
        raise BadValue(f"fold_share must be in [0, 1], got {fold_share!r}")
    if max_rows < 1:
        raise BadValue(f"max_rows must be >= 1, got {max_rows!r}")
    return ViewOptions(**options)


def call_tree(
    graph: Any,
    fold_share: float = FOLD_SHARE,
    filter_node: FilterNode | None = None,
    sort_key: Any = SortKey.CUMULATIVE,
    max_rows: int = MAX_ROWS,
    **options: Any,
) -> CallTree:
    """The call tree rooted at the program's entry point, as rows before the fold of
    :func:`to_tree_text`: one row per caller -> callee edge on each path.

    :param graph: a :class:`ProfileNode` (the root of its graph, or any node) or what
        :func:`profile2graph` accepts
    :param fold_share: children below this share of the root's time are folded into
        one ``N more`` row per parent (0 shows them all)
    :param filter_node: leaves out the nodes for which it returns False (None keeps all)
    :param sort_key: order of children: ``cumulative`` (hottest first), ``time`` (own
        time) or ``line``
    :param max_rows: rows kept at most, the rest folded
    :param options: filters, see :class:`ViewOptions` (``min_share`` folds as
        ``fold_share`` does)
    :return: the tree: ``items`` in depth-first order, ``total``
    """
    root = as_root(graph)
    takes = "fold_share, filter_node, sort_key, max_rows"
    view = tree_options(options, fold_share, filter_node, max_rows, takes)
    order = sort_name(sort_key)
    reachable = reachable_nodes(root)
    top = _start(root, reachable, view)
    total = top.tall
    stage = FilterStage(view, reachable, total, filter_node)
    fold_time = max(fold_share * total, stage.min_time)
    expander = _Expander(stage, fold_time, max_rows, _SORT_KEYS.get(order))
    expander.base = 1 if top.virtual else 0
    inv = 1.0 / total if total > 0 else 0.0
    items: list[TreeItem] = []
    # A node to expand: (node, parent, depth, calls, time, last, re-entry); a TreeItem:
    # a folded row, emitted after its siblings' subtrees; None: closes a node's path.
    stack: list[tuple[ProfileNode, int, int, Any, float, bool, bool] | TreeItem | None] = [
        (top, -1, 0, top.nc2, total, True, False)
    ]
    on_path: set[ProfileNode] = set()
    path: list[ProfileNode] = []
    while stack:
        entry = stack.pop()
        if entry is None:
            on_path.discard(path.pop())
            continue
        if isinstance(entry, TreeItem):
            items.append(entry)
            continue
        node, parent, depth, calls, time, last, reentry = entry
        index = len(items)
        if not reentry:
            on_path.add(node)
            path.append(node)
            stack.append(None)
        kids, folded, folded_time, recursive = expander.children(
            node, depth, time, on_path, reentry
        )
        items.append(
            TreeItem(node, parent, depth, calls, time, time * inv, recursive, 0, last, reentry)
        )
        if folded:
            more = folded_time * inv
            stack.append(TreeItem(None, index, depth + 1, 0, folded_time, more, 0, folded, True))
        for i in range(len(kids) - 1, -1, -1):
            child, n, t, _, again = kids[i]
            stack.append((child, index, depth + 1, n, t, i == len(kids) - 1 and not folded, again))
    return CallTree(items, total, fold_share, expander.capped, order)


def hot_path_leaves(
    tree: CallTree, count: int = 5, builtins: bool = False
) -> list[tuple[list[str], int]]:
    """The top root-to-leaf paths of the call tree, by time: the first follows the
    hottest child at each step, the next ones branch off the previous ones as deep as
    possible. Built-ins are left out unless asked for, a function repeated in a row is
    written once, and paths that read the same are given once.

    :param tree: a call tree
    :param count: paths returned at most
    :param builtins: keep the built-ins (``~`` frames)
    :return: ``(names, index of the path's last row in tree.items)`` for each path (that
        row's ``time`` and its parents give the path's figures)
    """
    if count < 1:
        raise BadValue(f"count must be >= 1, got {count!r}")
    items = tree.items
    kids: list[list[int]] = [[] for _ in items]
    for i, it in enumerate(items):
        if it.parent >= 0 and it.node is not None:
            kids[it.parent].append(i)
    paths: list[tuple[list[str], int]] = []
    seen: set[tuple[str, ...]] = set()
    # Depth first, hottest child first whatever order the tree was sorted in.
    stack = [0]
    while stack and len(paths) < count:
        i = stack.pop()
        if kids[i]:
            stack.extend(sorted(kids[i], key=lambda k: items[k].time))
            continue
        names = _path_names(items, i, builtins)
        if tuple(names) not in seen:
            seen.add(tuple(names))
            paths.append((names, i))
    return paths


def _path_names(items: Sequence[TreeItem], index: int, builtins: bool) -> list[str]:
    chain: list[ProfileNode] = []
    while index >= 0:
        node = items[index].node
        if node is not None and not node.virtual and (builtins or node.filename != "~"):
            chain.append(node)
        index = items[index].parent
    chain.reverse()
    names: list[str] = []
    for node in chain:
        if not names or names[-1] != node.func_name:
            names.append(node.func_name)
    return names
