"""From :class:`pstats.Stats` to a call graph, and from the graph to a tree of rows.

Everything here is pure and iterative: profile data can be thousands of frames deep
(a 3,000-deep chain, a 100,000-deep self recursion) or cyclic, so no function recurses
over it. The graph model is :class:`ProfileNode`; renderers (``render_*.py``) only read
the rows and paths computed here.
"""

from __future__ import annotations

import gc
import os
import sysconfig
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import add, itemgetter
from pstats import SortKey, Stats
from typing import Any, NamedTuple

# An edge's figures as cProfile stores them for one caller: (nc1, nc2, tin, tall).
TimeElements = tuple[Any, ...]
FilterNode = Callable[..., bool]

# Entries written by the profilers themselves, not by the profiled code.
_PROFILER_ARTIFACTS = ("method 'disable' of '_lsprof.Profiler'",)
_PROFILER_KEYS = {("profile", 0, "profiler")}

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


def _library_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    prefixes = {paths.get("stdlib", ""), paths.get("platstdlib", "")}
    return tuple(sorted(p.replace("\\", "/") + "/" for p in prefixes if p))


_LIBRARY_PREFIXES = _library_prefixes()
_LIBRARY_MARKERS = ("site-packages/", "dist-packages/", "<frozen ", "lib/python3")


def is_library_path(filename: str) -> bool:
    """Tells if a frame's file belongs to the standard library, an installed package or
    the interpreter itself (built-ins, frozen modules).

    :param filename: the file as stored in the profile
    :return: True for library frames
    """
    name = filename.replace("\\", "/")
    if name in ("~", "", "<built-in>") or name.startswith("<frozen"):
        return True
    if name.startswith(_LIBRARY_PREFIXES):
        return True
    return any(m in name for m in _LIBRARY_MARKERS)


# The one table of sort keys: from callees (or top-level nodes) and their figures
# ``(nc1, nc2, tin, tall)``, the list of keys to sort them by (ascending).
_SortFunction = Callable[[Sequence["ProfileNode"], Sequence[TimeElements]], list[Any]]


def _line_keys(nodes: Sequence[ProfileNode], els: Sequence[TimeElements]) -> list[Any]:
    return [(n.filename, n.line) for n in nodes]


def _line_rank_keys(nodes: Sequence[ProfileNode]) -> _SortFunction | None:
    """The keys of :func:`_line_keys` as one integer per node, in the same order with the
    same ties (file rank, then line): integers compare much faster than tuples of a
    string and an integer, and they are computed once per node, not once per edge.

    :param nodes: every node the keys will be asked for
    :return: the sort function, None if a line is not a non-negative int or the file
        names do not sort (the tuples are used then)
    """
    # Each attribute read once per node, the rest runs in C over the two lists.
    lines = [n.line for n in nodes]
    if not set(map(type, lines)) <= {int} or min(lines, default=0) < 0:
        return None
    files = [n.filename for n in nodes]
    try:
        ordered = sorted(set(files))
    except TypeError:
        return None
    width = max(lines, default=0) + 1
    rank = {f: i * width for i, f in enumerate(ordered)}
    keys = dict(zip(nodes, map(add, map(rank.__getitem__, files), lines), strict=True))
    get = keys.__getitem__
    return lambda callees, els: list(map(get, callees))


_SORT_KEYS: dict[str, _SortFunction] = {
    SortKey.LINE.value: _line_keys,
    SortKey.CUMULATIVE.value: lambda nodes, els: [-e[3] for e in els],
    SortKey.TIME.value: lambda nodes, els: [-e[2] for e in els],
}
_SORT_ALIASES = {"cumtime": "cumulative", "tottime": "time"}


def sort_function(sort_key: Any) -> _SortFunction:
    """Returns the key function for a sort key.

    :param sort_key: :class:`pstats.SortKey` ``LINE``, ``CUMULATIVE`` or ``TIME`` (or
        their names, ``cumtime`` and ``tottime`` accepted)
    :return: a function from callees and their figures to the list of sort keys
    :raises NotImplementedError: for any other sort key
    """
    name = sort_key.value if isinstance(sort_key, SortKey) else str(sort_key)
    name = _SORT_ALIASES.get(name, name)
    if name not in _SORT_KEYS:
        raise NotImplementedError(
            f"Unable to sort subcalls with this key {sort_key!r}, "
            f"sort_key must be one of {sorted(_SORT_KEYS)}."
        )
    return _SORT_KEYS[name]


class ProfileNode:
    """Graph structure to represent a profiling.

    :param filename: filename
    :param line: line number
    :param func_name: function name
    :param nc1: number of calls 1 (primitive calls)
    :param nc2: number of calls 2 (all calls)
    :param tin: time spent in the function
    :param tall: time spent in the function and in the sub functions
    :param library: True if the frame belongs to the standard library or an installed
        package (used by ``hide_stdlib``), guessed from ``filename`` if None
    """

    __slots__ = (
        "called_by",
        "calls_to",
        "calls_to_elements",
        "filename",
        "func_name",
        "library",
        "line",
        "nc1",
        "nc2",
        "tall",
        "tin",
        "virtual",
    )

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
        self.filename = filename
        self.line = line
        self.func_name = func_name
        self.nc1 = nc1
        self.nc2 = nc2
        self.tin = tin
        self.tall = tall
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

    @staticmethod
    def _key(filename: str, line: int, fct: str) -> str:
        return f"{filename}:{line}:{fct}"

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
        done = {self}  # nodes hash by identity
        queue = [self]
        for node in queue:  # the list grows while it is read
            yield node
            for child in node.calls_to:
                if child not in done:
                    done.add(child)
                    queue.append(child)

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
        from .render_json import rows_as_dicts

        with gc_paused():
            return rows_as_dicts(tree_rows(self, filter_node, sort_key, ViewOptions(**options)))

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

        One line per row: the function name padded to ``fct_width`` minus the indent,
        ``-- nc1 nc2 -- tin tall -- file:line:func (func)``, ``+++`` when the function
        is referenced there but printed as a root elsewhere, as the reference; with
        ``show_share``, then ``-- share%`` of the total time. Rows deeper than
        ``max_indent`` levels are drawn at that level with their depth in brackets, and
        a last line says so.

        :param filter_node: display only the nodes for which this function returns True,
            if None, the default function removes built-in function with small impact
        :param sort_key: sort sub nodes by...
        :param fct_width: width of the function name column (0 to 1000)
        :param show_share: append each row's share of the total time (opt-in)
        :param max_indent: indentation levels drawn before folding
        :param options: filters, see :class:`ViewOptions`
        :return: text
        """
        from .render_text import render_text

        with gc_paused():
            rows = TreeRows(self, filter_node, sort_key, ViewOptions(**options))
            return render_text(
                rows.raw(),
                fct_width=fct_width,
                show_share=show_share,
                max_indent=max_indent,
                max_count=rows.max_count,
                total=rows.total,
                # a fresh walk (a walk marks what it expanded), in case the rows'
                # counts need narrower columns than the graph's largest count
                rows_again=lambda: TreeRows(
                    self, filter_node, sort_key, ViewOptions(**options)
                ).raw(),
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
        as JSON: ``{"profile": {name: {"details": {...}, "calls": {...}}}}``. Nesting
        deeper than ``max_indent`` (keyword, default 30) levels is folded so that any
        JSON parser reads it back.

        :param filter_node: display only the nodes for which this function returns True,
            if None, the default function removes built-in function with small impact
        :param sort_key: sort sub nodes by...
        :param as_str: converts the json into a string
        :param kwargs: filters (see :class:`ViewOptions`), ``max_indent``, the rest
            goes to :func:`json.dumps`
        :return: rows
        """
        from .render_json import render_json

        opts = {k: kwargs.pop(k) for k in ViewOptions.FIELDS if k in kwargs}
        max_indent = kwargs.pop("max_indent", 30)
        with gc_paused():
            rows = tree_rows(self, filter_node, sort_key, ViewOptions(**opts))
            return render_json(rows, as_str=as_str, max_indent=max_indent, **kwargs)


def reachable_nodes(start: ProfileNode) -> list[ProfileNode]:
    """All nodes reachable from ``start`` (breadth first), ``start`` first.

    Nodes hash by identity (ProfileNode defines no ``__eq__``), so sets hold them
    directly: one hash of the address per edge, no ``id()`` call.

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


@dataclass(frozen=True)
class ViewOptions:
    """Filters applied when a graph is turned into rows or paths.

    :param hide_stdlib: skip frames of the standard library, installed packages and
        built-ins; their callees take their place
    :param min_share: hide rows below this share of the total time (0 to 1)
    :param max_depth: hide rows deeper than this (0 is the top level)
    :param focus: start only from the functions whose name or key contains this text
    """

    hide_stdlib: bool = False
    min_share: float = 0.0
    max_depth: int | None = None
    focus: str | None = None

    FIELDS = ("hide_stdlib", "min_share", "max_depth", "focus")

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_share <= 1.0:
            raise ValueError(f"min_share must be in [0, 1], got {self.min_share!r}")
        if self.max_depth is not None and self.max_depth < 0:
            raise ValueError(f"max_depth must be >= 0 or None, got {self.max_depth!r}")
        if self.focus is not None and not self.focus:
            raise ValueError(f"focus must be a non-empty string or None, got {self.focus!r}")

    def matches_focus(self, node: ProfileNode) -> bool:
        """Tells if ``node`` is a starting point of the focus."""
        return self.focus is not None and (self.focus == node.func_name or self.focus in node.key)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pauses the cyclic garbage collector while a graph or its rows are built: they
    create hundreds of thousands of objects that all survive, which only makes the
    collector scan them again and again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---------------------------------------------------------------- building the graph


def _stats_dicts(ps: Any, name: str = "ps") -> list[dict[Any, Any]]:
    """Returns the raw ``stats`` dictionaries of one or several profiles."""
    if isinstance(ps, (str, os.PathLike)):
        return [Stats(os.fspath(ps)).stats]  # type: ignore[attr-defined]
    if hasattr(ps, "stats") and isinstance(ps.stats, dict):
        return [ps.stats]
    if isinstance(ps, Sequence) and not isinstance(ps, (str, bytes)) and ps:
        out: list[dict[Any, Any]] = []
        for p in ps:
            out.extend(_stats_dicts(p, name))
        return out
    raise TypeError(
        f"{name} must be a pstats.Stats, a path to a profile file or a non-empty list of "
        f"them, got {type(ps).__name__}"
    )


def _is_artifact(func: tuple[Any, ...]) -> bool:
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
            self.merged = True
            node.nc1 += nc1
            node.nc2 += nc2
            node.tin += tin
            node.tall += tall
        self.by_func[func] = node
        return node

    def add_stats(self, stats: dict[Any, Any]) -> None:
        for func, value in stats.items():
            if len(value) < 4 or _is_artifact(func):
                self.artifacts.add(func)
            elif func not in self.by_func:
                self.node_for(func, value)
            else:
                # The same function in another profile: add its figures.
                node = self.by_func[func]
                self.merged = True
                node.nc1 += value[0]
                node.nc2 += value[1]
                node.tin += value[2]
                node.tall += value[3]

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
                if caller_func in self.artifacts or _is_artifact(caller_func):
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
            merged: dict[int, tuple[ProfileNode, list[Any]]] = {}
            for child, el in zip(node.calls_to, node.calls_to_elements, strict=True):
                if id(child) in merged:
                    acc = merged[id(child)][1]
                    for i in range(min(len(acc), len(el))):
                        acc[i] += el[i]
                else:
                    merged[id(child)] = (child, list(el))
            node.calls_to = [c for c, _ in merged.values()]
            node.calls_to_elements = [tuple(el) for _, el in merged.values()]
            callers: dict[int, ProfileNode] = {id(c): c for c in node.called_by}
            node.called_by = list(callers.values())


def build_graph(
    ps: Any, clean_text: Callable[[str], str] | None = None
) -> tuple[ProfileNode, dict[str, ProfileNode]]:
    """Converts one or several profiles into a graph.

    :param ps: a :class:`pstats.Stats`, a path to a profile file, or a list of them
        (merged into one graph)
    :param clean_text: function to clean file names
    :return: the root and the nodes by key; when several entry points exist, the root is
        a virtual node (not in the dictionary) calling each of them
    """
    dicts = _stats_dicts(ps)
    builder = _GraphBuilder(clean_text or (lambda x: x))
    with gc_paused():
        for stats in dicts:
            builder.add_stats(stats)
        for stats in dicts:
            builder.add_edges(stats)
        if builder.merged or len(dicts) > 1:
            builder.dedupe_edges()
    nodes = builder.nodes
    if not nodes:
        raise ValueError("ps must hold at least one profiled function, got an empty profile")
    return _pick_root(nodes), nodes


def _pick_root(nodes: dict[str, ProfileNode]) -> ProfileNode:
    """The node every other is reachable from, or a virtual one calling the entries."""
    entries = entry_points(list(nodes.values()))
    if len(entries) == 1:
        return entries[0]
    root = ProfileNode("", 0, "<all>", 1, 1, 0.0, sum(e.tall for e in entries), library=False)
    root.virtual = True
    for e in entries:
        root.calls_to.append(e)
        root.calls_to_elements.append((e.nc1, e.nc2, e.tin, e.tall))
    return root


def entry_points(nodes: list[ProfileNode]) -> list[ProfileNode]:
    """Functions without callers, then, for each part of the graph reachable from none
    of them (a cycle), its most consuming function.

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
    """Adds to ``reached`` the nodes reachable from ``starts`` (nodes hash by identity,
    no ``id()`` call per edge)."""
    stack = [s for s in starts if s not in reached]
    reached.update(stack)
    add, push = reached.add, stack.append
    while stack:
        for child in stack.pop().calls_to:
            if child not in reached:
                add(child)
                push(child)


# ---------------------------------------------------------------- graph -> rows


# What the walker yields: (node, depth, (nc1, nc2, tin, tall), ref).
RawRow = tuple["ProfileNode", int, TimeElements, bool]


class Row(NamedTuple):
    """One line of the tree view."""

    node: ProfileNode
    indent: int
    nc1: Any
    nc2: Any
    tin: float
    tall: float
    ref: bool  # referenced here, printed as a root elsewhere (``+++``)
    share: float


def _tree_roots(start: ProfileNode, reachable: list[ProfileNode]) -> list[ProfileNode]:
    """Nodes printed at the top level, in ``reachable`` order: the start, every
    function called from zero or several places and, below a virtual start (never
    printed), each of its entry points.

    A function with a single caller is expanded under it, never printed at the top
    level, and it is always met that way: every node of ``reachable`` was found through
    the callees of a node found before it, so going down from the top-level nodes
    through single-caller callees reaches them all, cycles of single callers included
    (one is reachable only through the start, or through the entry points of a virtual
    start: the function chosen to enter a cycle without callers from outside has a
    single caller, inside the cycle, and would vanish with the virtual start if it were
    not printed at the top level). Hence one test per node, no pass over the edges.

    :param start: the node the rows start from (``reachable[0]``)
    :param reachable: the nodes reachable from ``start``, see :func:`reachable_nodes`
    :return: the top-level nodes
    """
    entries = set(start.calls_to) if start.virtual else set()
    return [n for n in reachable if len(n.called_by) != 1 or n is start or n in entries]


def _total_time(reachable: list[ProfileNode]) -> float:
    """The total time shares are relative to: the sum of the own times, or the largest
    time with callees if larger (yappi's own times leave some time out)."""
    # Lists, not generators: summed in the same order, without a frame switch per node.
    own = sum([n.tin for n in reachable if n.tin > 0 and not n.virtual])
    return max(own, max([n.tall for n in reachable if not n.virtual], default=0.0))


class _Walker:
    """Depth-first expansion of the graph into rows, with an explicit stack of
    iterators over sorted callees; references (leaves) never go on the stack."""

    def __init__(
        self,
        filter_node: FilterNode | None,
        sort_key: Any,
        options: ViewOptions,
        reachable: list[ProfileNode],
    ) -> None:
        self.filter_node = filter_node
        self.sortf = sort_function(sort_key)
        # The line keys read the nodes only, never the figures of the calls.
        self.by_line = self.sortf is _line_keys
        if self.by_line:
            self.sortf = _line_rank_keys(reachable) or _line_keys
        self.options = options
        self.total = _total_time(reachable)
        self.min_time = options.min_share * self.total
        self.limited = options.max_depth is not None or self.min_time > 0
        # Default mode: a callee is a reference if it is printed at the top level
        # (``refs``, set by TreeRows). Focus mode: if it was met before (``seen``).
        self.focus_mode = options.focus is not None
        self.refs: set[ProfileNode] = set()
        self.seen: set[ProfileNode] = set()
        # The default filter only ever drops nodes of a few modules: find them once.
        small = _small_module_nodes(reachable)
        self.small = small
        self.no_filter = filter_node is None or (
            filter_node is ProfileNode.filter_node_ and not small
        )

    def sorted_top(self, top: list[ProfileNode]) -> list[ProfileNode]:
        """Sorts top-level nodes as callees are sorted, their own figures standing for
        those of a call.

        :param top: the nodes
        :return: the sorted nodes (a stable sort)
        """
        # Sorted by line, no figure is read: no tuple built per node for nothing.
        figures = [] if self.by_line else [(n.nc1, n.nc2, n.tin, n.tall) for n in top]
        keys = self.sortf(top, figures)
        return [top[i] for i in sorted(range(len(top)), key=keys.__getitem__)]

    def keep(self, indent: int, tall: float) -> bool:
        o = self.options
        if o.max_depth is not None and indent > o.max_depth:
            return False
        return not (self.min_time > 0 and tall < self.min_time)

    def accept(self, child: ProfileNode, depth: int, el: TimeElements, ref: bool) -> bool:
        """Applies ``filter_node`` to a callee (with the edge's figures for a reference)."""
        if self.filter_node is None:
            return True
        if self.filter_node is ProfileNode.filter_node_ and child not in self.small:
            return True
        info = self._info(child, depth, el) if ref else None
        return bool(self.filter_node(child, info=info))

    def is_ref(self, child: ProfileNode) -> bool:
        """Tells if ``child`` is only referenced where it is met now."""
        if self.focus_mode:
            return child in self.seen
        return child in self.refs

    def callees(self, node: ProfileNode, depth: int) -> Iterator[tuple[ProfileNode, Any]]:
        """Sorted and filtered callees of ``node`` with the figures of their call."""
        nodes: Sequence[ProfileNode] = node.calls_to
        els: Sequence[TimeElements] = node.calls_to_elements
        if len(nodes) > 1:
            keys = self.sortf(nodes, els)
            # One stable sort of indices, then both lists reordered in C.
            pick = itemgetter(*sorted(range(len(keys)), key=keys.__getitem__))
            nodes, els = pick(nodes), pick(els)
        if self.no_filter:
            return zip(nodes, els, strict=True)
        return iter(
            [
                (child, el)
                for child, el in zip(nodes, els, strict=True)
                if self.accept(child, depth, el, self.is_ref(child))
            ]
        )

    def _head(
        self, start: ProfileNode, filter_node: FilterNode
    ) -> tuple[RawRow | None, int] | None:
        """The row of a top-level node and the depth of its callees, None to skip it."""
        if start in self.seen:
            return None  # focus: already expanded under another focused function
        if start.virtual:
            return None  # its callees are entry points, top-level rows themselves
        if not filter_node(start):
            return None
        if self.limited and not self.keep(0, start.tall):
            return None  # min_share hides a top-level row as any other (with its subtree)
        self.seen.add(start)
        if self.options.hide_stdlib and start.library:
            return None, 0
        return (start, 0, (start.nc1, start.nc2, start.tin, start.tall), False), 1

    def walk(self, starts: Iterable[ProfileNode], filter_node: FilterNode) -> Iterator[RawRow]:
        """Yields ``(node, depth, figures, ref)`` for each top-level node and everything
        expanded below it, depth first; references (leaves) never go on the stack."""
        if self.limited or self.focus_mode or self.options.hide_stdlib:
            return self._walk_filtered(starts, filter_node)
        return self._walk_plain(starts, filter_node)

    def _walk_plain(
        self, starts: Iterable[ProfileNode], filter_node: FilterNode
    ) -> Iterator[RawRow]:
        """:meth:`walk` without depth, share, focus or library filters: the usual case,
        so its loop does only what every row needs."""
        refs, seen, callees = self.refs, self.seen, self.callees
        for start in starts:
            head = self._head(start, filter_node)
            if head is None:
                continue
            if head[0] is not None:
                yield head[0]
            stack = [(callees(start, head[1]), head[1])]
            while stack:
                it, depth = stack[-1]
                for node, el in it:
                    # A node is expanded once: a hand-made graph may list a callee whose
                    # called_by disagrees (a -> b -> a below another caller of a).
                    ref = node in refs or _seen_before(seen, node)
                    yield (node, depth, el, ref)
                    if not ref:
                        stack.append((callees(node, depth + 1), depth + 1))
                        break
                else:
                    stack.pop()

    def _walk_filtered(
        self, starts: Iterable[ProfileNode], filter_node: FilterNode
    ) -> Iterator[RawRow]:
        """:meth:`walk` with any of the filters."""
        seen, refs, focus = self.seen, self.refs, self.focus_mode
        hide, limited = self.options.hide_stdlib, self.limited
        for start in starts:
            head = self._head(start, filter_node)
            if head is None:
                continue
            if head[0] is not None:
                yield head[0]
            stack = [(self.callees(start, head[1]), head[1])]
            while stack:
                it, depth = stack[-1]
                for node, el in it:
                    if limited and not self.keep(depth, el[3]):
                        continue
                    # Expanded once, as in _walk_plain (focus: the first time it is met).
                    ref = (not focus and node in refs) or _seen_before(seen, node)
                    if hide and node.library:
                        if not ref:  # hidden: its callees take its place
                            stack.append((self.callees(node, depth), depth))
                            break
                        continue
                    yield (node, depth, el, ref)
                    if not ref:
                        stack.append((self.callees(node, depth + 1), depth + 1))
                        break
                else:
                    stack.pop()

    @staticmethod
    def _info(node: ProfileNode, indent: int, el: TimeElements) -> dict[str, Any]:
        return {
            "fct": node.func_name,
            "where": node.key,
            "nc1": el[0],
            "nc2": el[1],
            "tin": el[2],
            "tall": el[3],
            "indent": indent,
            "ncalls": len(node.calls_to),
            "more": "+",
        }


def _seen_before(seen: set[ProfileNode], node: ProfileNode) -> bool:
    """Tells if ``node`` is in ``seen``, adding it."""
    if node in seen:
        return True
    seen.add(node)
    return False


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


def _may_hide(node: ProfileNode, in_small_module: bool) -> bool:
    """Whether the default filter may hide ``node`` (if its figures are small too).

    A built-in that calls back into Python (exec, map, sorted with a key) is the way to
    its callees: hiding it would hide the whole subtree.
    """
    return in_small_module and not node.calls_to


def _in_small_module(node: ProfileNode) -> bool:
    return node.filename == "~" or os.path.basename(node.filename) in _SMALL_MODULES


class TreeRows:
    """The rows of the tree view of a graph, produced lazily (a renderer that streams
    them keeps no more than one row alive).

    Every function called from zero or several places is printed once at the top level
    and referenced (``ref``) under each caller; a function with a single caller is
    expanded under it. With ``focus``, the expansion starts from the matching functions
    and each function is expanded the first time it is met, referenced afterwards.
    Either way the number of rows is at most nodes + edges, and nothing recurses.

    :param start: the node to start from
    :param filter_node: keeps a node if it returns True; None uses
        :meth:`ProfileNode.filter_node_`
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
        if filter_node is None:
            filter_node = ProfileNode.filter_node_
        self.filter_node = filter_node
        reachable = reachable_nodes(start)
        walker = _Walker(filter_node, sort_key, options, reachable)
        if options.focus is not None:
            top = [n for n in reachable if options.matches_focus(n) and not n.virtual]
        else:
            top = _tree_roots(start, reachable)
            walker.refs = set(top)
        self.top = walker.sorted_top(top)
        self.walker = walker
        #: total time: the sum of the own times of the functions
        self.total = walker.total
        #: the largest call count of the graph, which bounds those of the rows
        counts = [n.nc1 for n in reachable] + [n.nc2 for n in reachable]
        self.max_count = max(map(abs, map(int, counts)), default=0)

    def raw(self) -> Iterator[RawRow]:
        """Yields ``(node, depth, (nc1, nc2, tin, tall), ref)``, the cheapest form."""
        return self.walker.walk(self.top, self.filter_node)

    def __iter__(self) -> Iterator[Row]:
        inv_total = 1.0 / self.total if self.total > 0 else 0.0
        new = tuple.__new__
        for node, depth, el, ref in self.raw():
            yield new(Row, (node, depth, el[0], el[1], el[2], el[3], ref, el[3] * inv_total))


def tree_rows(
    start: ProfileNode,
    filter_node: FilterNode | None = None,
    sort_key: Any = SortKey.LINE,
    options: ViewOptions | None = None,
) -> list[Row]:
    """Expands the graph reachable from ``start`` into rows, iteratively
    (see :class:`TreeRows`).

    :param start: the node to start from
    :param filter_node: keeps a node if it returns True; None uses
        :meth:`ProfileNode.filter_node_`
    :param sort_key: order of the top-level rows and of the callees
    :param options: filters
    :return: the rows
    """
    return list(TreeRows(start, filter_node, sort_key, options))


# ---------------------------------------------------------------- graph -> call paths


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


def expand_paths(
    start: ProfileNode,
    options: ViewOptions | None = None,
    limits: PathLimits | None = None,
) -> list[PathItem]:
    """Expands the graph into call paths, depth first and iteratively, for flame graphs.

    cProfile keeps one level of callers only, so a callee's time under a path is its
    edge time scaled by the share of its caller's time that the path holds; callees
    never exceed their caller. A function already on the path (recursion, cycles) is
    not entered again: its time stays in the caller's own time, as does anything cut
    by the limits or the filters. The own times of all items therefore sum to the
    total of the top-level items.

    :param start: the node to start from (a virtual root expands its entries)
    :param options: filters (``hide_stdlib`` folds library frames into their caller,
        ``min_share``, ``max_depth``, ``focus``)
    :param limits: bounds
    :return: items in depth-first order, parents before children
    """
    options = options or ViewOptions()
    limits = limits or PathLimits()
    reachable = list(start)
    if options.focus is not None:
        tops = [n for n in reachable if options.matches_focus(n) and not n.virtual]
    elif start.virtual:
        tops = list(start.calls_to)
    else:
        tops = [start]
    expander = _PathExpander(options, limits, sum(n.tall for n in tops))
    for top in tops:
        expander.expand(top)
    if options.hide_stdlib:
        expander.fold_library()
    return expander.items


class _PathExpander:
    def __init__(self, options: ViewOptions, limits: PathLimits, total: float) -> None:
        self.options = options
        self.limits = limits
        self.min_time = max(options.min_share, limits.min_fraction) * total
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

    def _children(
        self, node: ProfileNode, total: float, on_path: set[int]
    ) -> list[tuple[ProfileNode, float]]:
        if node.tall <= 0 or total <= 0:
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
        return kids

    def _kept_children(
        self, node: ProfileNode, depth: int, total: float, on_path: set[int]
    ) -> list[tuple[ProfileNode, float]]:
        o = self.options
        if o.max_depth is not None and depth >= o.max_depth:
            return []
        kept = []
        for child, t in self._children(node, total, on_path):
            if t < self.min_time or not self._reserve(depth + 2):
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
            if item.node.library and parent >= 0:
                new_index.append(parent)
                p = kept[parent]
                kept[parent] = p._replace(self_time=p.self_time + item.self_time)
                continue
            depth = kept[parent].depth + 1 if parent >= 0 else 0
            new_index.append(len(kept))
            kept.append(item._replace(parent=parent, depth=depth))
        self.items = kept
