"""The folded call tree of a cProfile graph: the graph expanded into call paths and
handed to the sampled profile's model, so that the one fold of :mod:`.._sampling.view`
(library frames folded as pyinstrument does, a module the user's code imports a row
``import pandas``) builds the tree every view shows.

The paths are the call tree's (:func:`call_tree <.view_tree.call_tree>`); each path's
own time is the weight of one stack, column ``WALL`` of one thread ``MainThread``, so
the stacks sum to the tree's total. What cProfile records and a sampler never sees is
reshaped first:

- a built-in called by importlib's frames (``exec``, ``builtins.__import__``,
  ``marshal.loads``) is left out, its time on importlib's frame, so the module it runs
  reads ``import X``; elsewhere a built-in is a library frame without a file;
- cProfile cannot tell which module imported which, so under a function of the user's
  code the modules of the libraries its imports loaded are gathered into one
  ``import X`` row, ``X`` the package that took most of that time. A user's module stays
  its own row.

:func:`folded_view` maps the tree's options onto it; exact call counts are the
reference view's, as a note under the header says. Nothing recurses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .._sampling.model import CPROFILE, SampledProfile, ThreadProfile
from .._sampling.view import FOLD_SHARE, Row, module_name, package_of
from .._stacks.frames import SampledFrame, is_library_path
from .model import FilterNode, ProfileNode
from .sorting import sort_name
from .view_tree import call_tree, tree_options

#: Paths under this share of the total stay in their caller's own time: a tenth of the
#: fold share, between FLOOR_ALL and FLOOR_SHARE (a dense graph's paths multiply: 1e-5
#: costs 4-5 s on 5,000 functions of 11 callers each, 1e-4 0.5 s, for the same rows).
FLOOR_SHARE = 1e-4
FLOOR_ALL = 1e-5
#: Rows of the expanded tree kept at most (the rest stays in their callers' own time).
MAX_ROWS = 20_000
#: Frames kept per path, the outermost ones (a deeper path gives its time to the last).
MAX_DEPTH = 1024
#: Frames kept in all the paths; past it a new path keeps its outermost
#: :data:`SHORT_DEPTH` frames (the sampler's rule when its table is full).
MAX_CELLS = 1_000_000
SHORT_DEPTH = 16


def _is_importlib(node: ProfileNode) -> bool:
    """importlib's machinery: its frozen modules and the ``importlib`` package."""
    f = node.filename.replace("\\", "/")
    return f.startswith("<frozen importlib") or ("/importlib/" in f and node.library)


def _file(node: ProfileNode) -> str:
    """A node's file as the fold reads it: a library's file whose cleaned name no longer
    says so (``json/encoder.py`` cut to ``encoder.py``) put under ``site-packages/``."""
    if node.library and not is_library_path(node.filename):
        return "site-packages/" + node.filename.replace("\\", "/").lstrip("/")
    return node.filename


class _Path(NamedTuple):
    """One path of the expanded tree with own time, before it becomes a stack.

    :param frames: outermost first
    :param seconds: its own time
    :param region: the import region it is in (-1: none), see :func:`_paths`
    :param at: where the region's ``import`` frame goes in ``frames``
    """

    frames: tuple[SampledFrame, ...]
    seconds: float
    region: int
    at: int


class _Walk:
    """The depth-first walk: the frames of the current path, per level its region."""

    def __init__(self, hide_stdlib: bool) -> None:
        self.hide_stdlib = hide_stdlib
        self.frames: dict[ProfileNode, SampledFrame | None] = {}
        # Per tree level: the frame kept (None: left out), the node, the region.
        self.chain: list[tuple[SampledFrame | None, ProfileNode | None, int]] = []
        self.cells = 0
        self.shortened = 0

    def frame(self, node: ProfileNode, caller: ProfileNode | None) -> SampledFrame | None:
        """The frame of a node on the path, None when it is left out."""
        if node.virtual or (self.hide_stdlib and self._library(node)):
            return None
        if node.filename == "~":
            if caller is not None and _is_importlib(caller):
                return None  # never in a sampled stack: the import reads as one
            return SampledFrame(node.func_name, "", 0, 0)
        found = self.frames.get(node)
        if found is None:
            found = self.frames[node] = SampledFrame(
                node.func_name, _file(node), node.line, node.line
            )
        return found

    def _library(self, node: ProfileNode) -> bool:
        """A library's frame, or code a library compiled from a string (a namedtuple's)."""
        if node.library:
            return True
        parent = self.chain[-1][1] if self.chain else None
        return node.filename == "<string>" and parent is not None and parent.library

    def caller(self) -> ProfileNode | None:
        """The innermost node kept on the path."""
        for frame, node, _ in reversed(self.chain):
            if frame is not None:
                return node
        return None

    def push(self, node: ProfileNode, depth: int, index: int) -> None:
        """Enters ``node`` at ``depth``, tree row ``index``: an importlib frame called by
        the user's code opens an import region (numbered by the row)."""
        del self.chain[depth:]
        caller = self.caller()
        frame = self.frame(node, caller)
        region = self.chain[-1][2] if self.chain else -1
        opens = frame is not None and caller is not None and _is_importlib(node)
        if opens and caller is not None and not caller.library and not _is_importlib(caller):
            region = index
        self.chain.append((frame, node, region))

    def path(self, seconds: float) -> _Path:
        """The current path as a bounded stack (:data:`MAX_CELLS`)."""
        frames: list[SampledFrame] = []
        region = self.chain[-1][2] if self.chain else -1
        at, leading = 0, True
        for frame, node, reg in self.chain:
            if frame is None:
                continue
            if leading and region >= 0 and reg == region and node is not None:
                if _is_importlib(node):
                    at = len(frames) + 1
                else:
                    leading = False
            frames.append(frame)
        if len(frames) > MAX_DEPTH:
            frames = frames[:MAX_DEPTH]
        if self.cells + len(frames) > MAX_CELLS:
            frames = frames[:SHORT_DEPTH]
            self.shortened += 1
        self.cells += len(frames)
        return _Path(tuple(frames), seconds, region, at)


def _paths(
    root: ProfileNode, hide_stdlib: bool, **options: Any
) -> tuple[list[_Path], float, int, int]:
    """The paths with own time of the expanded tree, the total, the paths shortened and
    the rows the expansion stopped at (0: it did not)."""
    tree = call_tree(root, **options)
    items = tree.items
    own = [it.time for it in items]
    for it in items:
        if it.parent >= 0 and it.node is not None:
            own[it.parent] -= it.time  # a folded row's time stays its parent's own
    walk = _Walk(hide_stdlib)
    paths = []
    for i, it in enumerate(items):
        if it.node is None:
            continue
        walk.push(it.node, it.depth, i)
        if own[i] > 0:
            paths.append(walk.path(own[i]))
    return paths, tree.total, walk.shortened, tree.capped


def _library_module(frames: tuple[SampledFrame, ...], start: int) -> SampledFrame | None:
    """The first library module's frame at or after ``start``."""
    for f in frames[start:]:
        if f.name == "<module>" and f.is_library:
            return f
    return None


def _import_frames(paths: list[_Path]) -> tuple[dict[int, SampledFrame], dict[int, int]]:
    """For each import region, the frame of its row (the package taking most of its time:
    its ``__init__`` if the region ran it, else its busiest module), and how many
    packages the region's modules were in."""
    by_package: dict[int, dict[str, float]] = {}
    by_module: dict[int, dict[SampledFrame, float]] = {}
    for p in paths:
        f = _library_module(p.frames, p.at) if p.region >= 0 else None
        if f is None:
            continue
        times = by_package.setdefault(p.region, {})
        pkg = package_of(f.file)
        times[pkg] = times.get(pkg, 0.0) + p.seconds
        mods = by_module.setdefault(p.region, {})
        mods[f] = mods.get(f, 0.0) + p.seconds
    chosen: dict[int, SampledFrame] = {}
    for region, times in by_package.items():
        pkg = max(times, key=lambda k: times[k])
        mods = by_module[region]
        ranked = sorted(
            (f for f in mods if package_of(f.file) == pkg),
            key=lambda f: (module_name(f.file) != pkg, -mods[f]),
        )
        chosen[region] = ranked[0]
    return chosen, {r: len(t) for r, t in by_package.items()}


def _with_import(p: _Path, frame: SampledFrame | None, show_all: bool) -> tuple[SampledFrame, ...]:
    """A path of an import region with the region's frame where the import starts
    (unless a user's module or that frame is there); with ``show_all``, the importlib
    frame before it is repeated after it, so the modules below read ``import X`` too."""
    if frame is None:
        return p.frames
    nxt = p.frames[p.at] if p.at < len(p.frames) else None
    if nxt is not None and (nxt == frame or not nxt.is_library):
        return p.frames
    mark = (p.frames[p.at - 1],) if show_all and nxt is not None and p.at > 0 else ()
    return (*p.frames[: p.at], frame, *mark, *p.frames[p.at :])


class FoldedView(NamedTuple):
    """The graph as the sampled model, and what it had to merge.

    :param profile: one thread ``MainThread``, the paths' own times as column ``WALL``
    :param merged_imports: import regions whose modules were in several packages
    :param shortened: paths shortened to bound the size (see :data:`MAX_CELLS`)
    :param capped: the rows the expansion stopped at (``max_rows``), 0 if it did not
    """

    profile: SampledProfile
    merged_imports: int
    shortened: int
    capped: int


def folded_profile(
    root: ProfileNode,
    program: str = "",
    notes: list[str] | None = None,
    hide_stdlib: bool = False,
    show_all: bool = False,
    focus: str | None = None,
    filter_node: FilterNode | None = None,
    max_rows: int = MAX_ROWS,
    floor_share: float = FLOOR_SHARE,
) -> FoldedView:
    """The graph as a sampled profile whose fold gives the folded call tree.

    :param root: the root of the graph
    :param program: the program's name, for the header
    :param notes: what the reader must know, shown under the header
    :param hide_stdlib: library frames left out of the paths, their callees in place
    :param show_all: the tree will be drawn without folding
    :param focus: paths start at the functions whose name contains this text
    :param filter_node: leaves out the nodes for which it returns False
    :param max_rows: rows of the expanded tree kept at most
    :param floor_share: paths under this share of the total stay in their caller's time
    :return: the profile and its counts
    """
    paths, total, shortened, capped = _paths(
        root,
        hide_stdlib,
        fold_share=floor_share,
        filter_node=filter_node,
        max_rows=max_rows,
        focus=focus,
    )
    chosen, packages = _import_frames(paths)
    weights: dict[tuple[SampledFrame, ...], float] = {}
    for p in paths:
        frames = p.frames if p.region < 0 else _with_import(p, chosen.get(p.region), show_all)
        weights[frames] = weights.get(frames, 0.0) + p.seconds
    stacks = list(weights)
    totals = {i: [weights[s], 0.0, 0.0] for i, s in enumerate(stacks)}
    thread = ThreadProfile(0, "MainThread", True, totals)
    profile = SampledProfile(
        stacks, [thread], 0.0, CPROFILE, total, 0.0, 0, list(notes or []), program,
        cpu_known=False,
    )  # fmt: skip
    merged = sum(1 for n in packages.values() if n > 1)
    return FoldedView(profile, merged, shortened, capped)


#: The note under the header: where the exact counts are.
COUNTS_NOTE = "exact call counts: the reference view (ProfileNode.to_text, --view reference), JSON"
#: The note when one import row gathers the modules of several packages.
IMPORTS_NOTE = (
    "cProfile does not say which module imported which: 'import X' gathers them, "
    "X the busiest package"
)
_ORDERS: dict[str, Callable[[Row], Any] | None] = {
    "cumulative": None,
    "time": lambda r: -r.self_wall,
    "line": lambda r: (r.file, r.line),
}
_ORDER_WORDS = {"time": "by own time", "line": "in line order"}
_OWN = ("fold_share", "sort_key", "filter_node", "max_rows", "show_all")


def folded_view(
    root: ProfileNode,
    program: str | None = None,
    fold_share: float = FOLD_SHARE,
    sort_key: Any = "cumulative",
    filter_node: FilterNode | None = None,
    max_rows: int = MAX_ROWS,
    show_all: bool = False,
    **filters: Any,
) -> tuple[FoldedView, dict[str, Any]]:
    """The folded view of a graph and the renderers' keywords, the options checked.

    :param root: the root of the graph
    :param program: the program's name for the header
    :param fold_share: rows under this share of the total go into ``N more`` (0: none)
    :param sort_key: ``cumulative`` (hottest first), ``time`` (own time) or ``line``
    :param filter_node: leaves out the nodes for which it returns False
    :param max_rows: rows of the expanded tree kept at most
    :param show_all: no folding of library frames
    :param filters: ``hide_stdlib``, ``min_share``, ``max_depth``, ``focus``
    :return: the view and ``fold_share``, ``show_all``, ``max_depth``, ``order``
    """
    takes = f"{list(_OWN)}, max_indent, guides"
    view = tree_options(filters, fold_share, filter_node, max_rows, takes)
    order_name = sort_name(sort_key)
    fold = max(fold_share, view.min_share)
    floor = max(FLOOR_ALL, min(FLOOR_SHARE, fold / 10))
    folded = folded_profile(
        root, program or "", [COUNTS_NOTE], view.hide_stdlib, show_all, view.focus,
        filter_node, max_rows, floor,
    )  # fmt: skip
    notes = folded.profile.notes
    if order_name != "cumulative":
        notes.append(f"children {_ORDER_WORDS[order_name]}")
    if folded.merged_imports:
        notes.append(IMPORTS_NOTE)
    if folded.capped:
        notes.append(f"the call paths past {folded.capped:,} rows are in their callers' time")
    if folded.shortened:
        notes.append(
            f"{folded.shortened:,} call paths were cut to their outermost {SHORT_DEPTH} "
            f"frames (the paths hold {MAX_CELLS:,} frames at most)"
        )
    options = {
        "fold_share": fold,
        "show_all": show_all,
        "max_depth": view.max_depth,
        "order": _ORDERS[order_name],
    }
    return folded, options


__all__ = ["FoldedView", "folded_profile", "folded_view"]
