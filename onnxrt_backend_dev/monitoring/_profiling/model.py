"""The model of a profile: :class:`ProfileNode`, one function of the call graph, with
its callers and callees and the figures cProfile recorded for each call edge.

First stage of the pipeline (``builder`` -> ``filters`` -> ``view_*`` -> ``render_*``,
listed in ``formats``); it imports none of the others. The rendering methods of
:class:`ProfileNode` (the reference's API) reach :mod:`.reference` through the package's
``reference_rendering`` on first use: the dependency points from the renderers to the
model only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pstats import SortKey
from typing import Any

from .._stacks.frames import is_library_path

# An edge's figures as cProfile stores them for one caller: (nc1, nc2, tin, tall).
TimeElements = tuple[Any, ...]
FilterNode = Callable[..., bool]


# Basenames (or '~' for built-ins) whose small entries the default filter hides.
_SMALL_MODULES = frozenset(
    {
        "~",
        "subprocess.py",
        "posixpath.py",
        "os.py",
        "<frozen importlib._bootstrap>",
        "inspect.py",
        "version.py",
        "typing.py",
        "warnings.py",
        "errors.py",
        "numbers.py",
        "ast.py",
        "threading.py",
        "_collections_abc.py",
        "datetime.py",
        "abc.py",
        "argparse.py",
        "__future__.py",
        "functools.py",
        "six.py",
        "sre_parse.py",
        "contextlib.py",
        "_globals.py",
        "_ios.py",
        "types.py",
    }
)


class ProfileNode:
    """Graph structure to represent a profiling.

    :param filename: filename
    :param line: line number
    :param func_name: function name
    :param nc1: number of calls 1 (primitive calls)
    :param nc2: number of calls 2 (all calls)
    :param tin: time spent in the function
    :param tall: time spent in the function and in the sub functions
    :param library: a frame of the standard library or an installed package (for
        ``hide_stdlib``), guessed from ``filename`` if None
    """

    __slots__ = ("called_by", "calls_to", "calls_to_elements", "filename", "func_name",
                 "library", "line", "nc1", "nc2", "tall", "tin", "virtual")  # fmt: skip

    def __init__(
        self,
        filename: str,
        line: int,
        func_name: str,
        nc1: int,
        nc2: int,
        tin: float,
        tall: float,
        library: bool | None = None,
    ) -> None:
        self.filename, self.line, self.func_name = filename, line, func_name
        self.nc1, self.nc2, self.tin, self.tall = nc1, nc2, tin, tall
        self.called_by: list[ProfileNode] = []
        self.calls_to: list[ProfileNode] = []
        self.calls_to_elements: list[TimeElements] = []
        self.library = is_library_path(filename) if library is None else library
        # A virtual node gathers several entry points; it is never rendered.
        self.virtual = False

    def add_called_by(self, pnode: ProfileNode) -> None:
        """This function is called by these lines.

        :param pnode: the caller
        """
        self.called_by.append(pnode)

    def add_calls_to(self, pnode: ProfileNode, time_elements: TimeElements) -> None:
        """This function calls this node.

        :param pnode: the callee
        :param time_elements: the figures of this call ``(nc1, nc2, tin, tall)``
        """
        self.calls_to.append(pnode)
        self.calls_to_elements.append(time_elements)

    @property
    def key(self) -> str:
        """Returns ``file:line:func``."""
        return f"{self.filename}:{self.line}:{self.func_name}"

    def get_root(self) -> ProfileNode:
        """Returns the root of the graph: going up through the first unexplored caller
        until a function without callers; in a cycle without entry point, the most
        consuming function met on the way.

        :return: a node
        """
        node = self
        seen = {id(node): node}
        while node.called_by:
            nxt = next((c for c in node.called_by if id(c) not in seen), None)
            if nxt is None:
                return max(seen.values(), key=lambda n: n.tall)
            seen[id(nxt)] = nxt
            node = nxt
        return node

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.filename!r}, {self.line!r}, "
            f"{self.func_name!r}, {self.nc1!r}, {self.nc2!r}, {self.tin!r}, {self.tall!r})"
            f"  # {len(self.called_by)}-{len(self.calls_to)}"
        )

    def __iter__(self) -> Iterator[ProfileNode]:
        """Returns all nodes reachable from this one (breadth first), this one first."""
        return iter(reachable_nodes(self))

    @staticmethod
    def filter_node_(node: ProfileNode, info: dict[str, Any] | None = None) -> bool:
        """Filters out node to be displayed by default.

        :param node: node
        :param info: if the node is called by a function, this dictionary can be used
            to overwrite the attributes held by the node
        :return: boolean (True to keep, False to forget)
        """
        if not _may_hide(node, _in_small_module(node)):
            return True
        if info is None:
            return not (node.nc1 <= 10 and node.nc2 <= 10 and node.tall <= 1e-4)
        return not (info["nc1"] <= 10 and info["nc2"] <= 10 and info["tall"] <= 1e-4)

    def as_dict(
        self, filter_node: FilterNode | None = None, sort_key: Any = SortKey.LINE, **options: Any
    ) -> list[dict[str, Any]]:
        """Renders the results of a profiling interpreted with function
        :func:`profile2graph <onnxrt_backend_dev.monitoring.profiling.profile2graph>`.
        It can then be loaded with a dataframe.

        :param filter_node: display only the nodes for which this function returns True,
            if None, the default function removes built-in function with small impact
        :param sort_key: sort sub nodes by...
        :param options: filters, see :class:`ViewOptions` (``hide_stdlib``,
            ``min_share``, ``max_depth``, ``focus``)
        :return: rows with keys ``fct, where, nc1, nc2, tin, tall, indent, ncalls``
            (``more='+'`` for a function referenced under several callers, ``share`` of
            the total time)
        """
        return _reference().as_dict(self, filter_node, sort_key, **options)

    def to_text(
        self,
        filter_node: FilterNode | None = None,
        sort_key: Any = SortKey.LINE,
        fct_width: int = 60,
        show_share: bool = False,
        max_indent: int = 30,
        **options: Any,
    ) -> str:
        """Prints the profiling to text.

        One line per row, as the reference: the name padded to ``fct_width`` minus the
        indent, ``-- nc1 nc2 -- tin tall -- file:line:func (func)``, ``+++`` for a
        function printed as a root elsewhere, then ``-- share%`` with ``show_share``.

        :param filter_node: display only the nodes for which this function returns True,
            if None, the default function removes built-in function with small impact
        :param sort_key: sort sub nodes by...
        :param fct_width: width of the function name column (0 to 1000)
        :param show_share: append each row's share of the total time (opt-in)
        :param max_indent: indentation levels drawn before folding
        :param options: filters, see :class:`ViewOptions`
        :return: text
        """
        return _reference().to_text(
            self, filter_node, sort_key, fct_width, show_share, max_indent, **options
        )

    def to_json(
        self,
        filter_node: FilterNode | None = None,
        sort_key: Any = SortKey.LINE,
        as_str: bool = True,
        **kwargs: Any,
    ) -> str | dict[str, Any]:
        """Renders the results of a profiling interpreted with function
        :func:`profile2graph <onnxrt_backend_dev.monitoring.profiling.profile2graph>`
        as JSON: ``{"profile": {name: {"details": {...}, "calls": {...}}}}``, nesting
        deeper than ``max_indent`` (keyword, default 30) levels folded.

        :param filter_node: display only the nodes for which this function returns True,
            if None, the default function removes built-in function with small impact
        :param sort_key: sort sub nodes by...
        :param as_str: converts the json into a string
        :param kwargs: filters (see :class:`ViewOptions`), ``max_indent``, the rest
            goes to :func:`json.dumps`
        :return: rows
        """
        return _reference().to_json(self, filter_node, sort_key, as_str, **kwargs)


def _reference() -> Any:
    """The reference's renderings (:mod:`.reference`), from the package on first use:
    importing the model imports no renderer."""
    from . import reference_rendering

    return reference_rendering()


def virtual_node(name: str, starts: list[ProfileNode]) -> ProfileNode:
    """A node calling ``starts`` (never rendered), the graph left as it is.

    :param name: its function name (``<all>``)
    :param starts: the nodes it calls, with their own figures
    :return: the node
    """
    node = ProfileNode("", 0, name, 1, 1, 0.0, sum(n.tall for n in starts), library=False)
    node.virtual = True
    node.calls_to = list(starts)
    node.calls_to_elements = [(n.nc1, n.nc2, n.tin, n.tall) for n in starts]
    return node


def reachable_nodes(start: ProfileNode) -> list[ProfileNode]:
    """All nodes reachable from ``start`` (breadth first), ``start`` first (nodes hash by
    identity: a set holds them directly, no ``id()`` call per edge).

    :param start: the node to start from
    :return: the nodes
    """
    order = [start]
    done = {start}
    add, push = done.add, order.append
    for node in order:  # the list grows while it is read: a queue without indices
        for child in node.calls_to:
            if child not in done:
                add(child)
                push(child)
    return order


def _may_hide(node: ProfileNode, in_small_module: bool) -> bool:
    """Whether the default filter may hide ``node`` if its figures are small: not a
    built-in calling back into Python (``exec``, ``map``), which would hide its subtree."""
    return in_small_module and not node.calls_to


def _in_small_module(node: ProfileNode) -> bool:
    return node.filename == "~" or os.path.basename(node.filename) in _SMALL_MODULES
