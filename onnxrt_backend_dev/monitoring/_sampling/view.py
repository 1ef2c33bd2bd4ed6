"""The views people read, built from a :class:`~.model.SampledProfile`.

- The call tree of each thread, library code folded as pyinstrument does: consecutive
  frames of the standard library and installed packages become one row named by the
  first library function the user's code called, saying what it hides; importlib's
  frames are never shown, a module the user's code imports is a row ``import pandas``
  (what it runs folded into it when it is a library's); asyncio's
  loop shows the tasks' coroutines (marked ``task``) and one ``idle (event loop)`` row.
- :func:`visible_rows`: the rows worth drawing, no ``0.0 %`` rows, at most one
  ``N more`` row per parent and none under 0.1 %.
- :func:`hot_lines`: for each of the user's hottest functions, the lines taking the time;
  :func:`function_figures`: every function's figures.
- :func:`timeline_boxes`: what ran when, per thread, as boxes of a flame chart.

No recursion: trees are built and walked with explicit stacks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from .._format import cut_source
from .._stacks.frames import SampledFrame, library_prefixes
from .model import (
    CPU,
    HIGHEST,
    NATIVE,
    NCOLUMNS,
    NET,
    POOL,
    PYTHON,
    QUEUED,
    SAMPLES,
    SYSTEM,
    TO_PEAK,
    WALL,
    SampledProfile,
    Stack,
    ThreadProfile,
    column,
)

# The one default fold of every tree (the sampled profile, cProfile's call tree, run's tree
# and its allocation icicle): rows under 0.5 % of the total go into one 'N more' row.
FOLD_SHARE = 0.005
MIN_MORE_SHARE = 0.001  # an 'N more' row under 0.1 % is not drawn
# A row is waiting when most of its time is its own and that time got at most 20 % of the
# CPU share the thread's busiest rows got (so a loaded machine, where every row gets
# little CPU, does not make computing rows look idle), or under 2 % CPU at all.
WAITING_CPU = 0.2
IDLE_CPU = 0.02
_MARKERS = ("site-packages/", "dist-packages/")


def library_relative(file: str) -> str | None:
    """A library file's path from its root (``pandas/io/parsers/readers.py``), None for
    user files.

    :param file: the code's file
    :return: the relative path or None
    """
    path = file.replace("\\", "/")
    for marker in _MARKERS:
        i = path.rfind(marker)
        if i >= 0:
            return path[i + len(marker) :]
    for prefix in library_prefixes():
        if path.startswith(prefix):
            return path[len(prefix) :]
    if path.startswith("<frozen "):
        return path[len("<frozen ") :].rstrip(">").replace(".", "/") + ".py"
    return None


def package_of(file: str) -> str:
    """The top-level package or module of a library file (``pandas``, ``threading``).

    :param file: the code's file
    :return: its name, ``python`` when it cannot tell
    """
    rel = library_relative(file)
    if not rel:
        return "python"
    head = rel.split("/", 1)[0]
    return head[:-3] if head.endswith(".py") else head


def module_name(file: str) -> str:
    """The module a file holds (``pandas`` for ``.../pandas/__init__.py``).

    :param file: the code's file
    :return: a dotted name, the file's base name for user files
    """
    rel = library_relative(file)
    if rel is None:
        rel = os.path.basename(file.replace("\\", "/"))
    if rel.endswith("/__init__.py"):
        rel = rel[: -len("/__init__.py")]
    elif rel.endswith(".py"):
        rel = rel[:-3]
    return rel.replace("/", ".")


def short_file(file: str) -> str:
    """A file as shown: a library's from its root, a user's relative to the current
    folder when under it.

    :param file: the code's file
    """
    rel = library_relative(file)
    if rel is not None:
        return rel
    try:
        here = os.getcwd()
    except OSError:
        return file
    if os.path.isabs(file) and file.startswith(here + os.sep):
        return file[len(here) + 1 :]
    return file


def _is_importlib(frame: SampledFrame) -> bool:
    f = frame.file.replace("\\", "/")
    return f.startswith("<frozen importlib") or ("/importlib/" in f and frame.is_library)


def _synthetic(file: str) -> bool:
    """Code compiled from a string (``<string>``), with no source to show."""
    return file.startswith("<") and not file.startswith(("<ipython-input", "<stdin>"))


def _is_loop_step(frame: SampledFrame) -> bool:
    return frame.name.endswith("_run_once") and frame.file.endswith("base_events.py")


def _is_handle_run(frame: SampledFrame) -> bool:
    return frame.name == "Handle._run" and frame.file.replace("\\", "/").endswith(
        "asyncio/events.py"
    )


class Row:
    """A row of a call tree.

    :param label: what the row is called (a function, ``import pandas``...)
    :param file: the file (empty for synthetic rows)
    :param line: the function's first line
    :param kind: ``user``, ``library``, ``import``, ``task``, ``idle``, ``thread``, ``more``
    """

    __slots__ = (
        "children", "cpu", "file", "hidden", "highest", "kind", "label", "line", "lines",
        "more", "native", "net", "packages", "pool", "python", "queued", "samples",
        "self_cpu", "self_wall", "system", "to_peak", "waiting", "wall",
    )  # fmt: skip

    def __init__(
        self, label: str, file: str, line: int, kind: str, wall: float = 0.0, cpu: float = 0.0
    ) -> None:
        self.label, self.file, self.line, self.kind = label, file, line, kind
        self.wall, self.cpu = wall, cpu
        self.self_wall = self.self_cpu = 0.0
        self.python = self.native = self.system = 0.0  # CPU seconds, where split
        self.queued = 0.0  # seconds runnable but waiting for a CPU (a busy machine)
        self.pool = 0.0  # CPU seconds of the threads Python does not know meanwhile
        # Memory (a run): growth while it ran, growth up to the peak, highest RSS seen.
        self.net = self.to_peak = self.highest = 0.0
        self.samples = 0
        self.hidden = 0  # frames folded into this row (the most any stack had)
        self.packages: set[str] = set()
        self.lines: dict[int, float] = {}  # own time per line
        self.children: dict[tuple[str, str, int, str], Row] = {}
        self.more = 0  # for a 'more' row: how many rows it stands for
        self.waiting = False  # set by mark_waiting

    def own_cpu_share(self) -> float:
        """The CPU share of the row's own time (0 without own time)."""
        return self.self_cpu / self.self_wall if self.self_wall > 0 else 0.0

    def hidden_text(self) -> str:
        """``24 frames hidden (pandas, concurrent, threading)``, empty if none."""
        if not self.hidden:
            return ""
        pkgs = sorted(self.packages)
        names = ", ".join(pkgs[:4]) + (", ..." if len(pkgs) > 4 else "")
        plural = "s" if self.hidden > 1 else ""
        return f"{self.hidden} frame{plural} hidden ({names})" if names else ""


def split_shares(
    wall: float, cpu: float, python: float, native: float, system: float
) -> tuple[float, float, float, float]:
    """Shares of a time in Python, native code, the kernel and waiting, adding up to 1.

    :param wall: the time
    :param cpu: the CPU time within it
    :param python: CPU seconds in bytecode
    :param native: CPU seconds in native code
    :param system: CPU seconds in the kernel
    :return: ``(python, native, system, waiting)``
    """
    if wall <= 0:
        return 0.0, 0.0, 0.0, 0.0
    split = python + native + system
    busy = min(cpu / wall, 1.0)
    if split <= 0:
        return 0.0, busy, 0.0, 1.0 - busy
    return busy * python / split, busy * native / split, busy * system / split, 1.0 - busy


class Step(NamedTuple):
    """A row of one stack, before it is merged into the tree."""

    label: str
    file: str
    line: int
    kind: str
    lineno: int  # the line running in the innermost frame of the step
    hidden: int
    packages: frozenset[str]


def fold_stack(frames: Stack, show_all: bool = False) -> list[Step]:
    """The rows of one stack, library runs folded (see the module's docstring).

    :param frames: outermost first
    :param show_all: keep every frame (importlib's are still left out)
    :return: the rows, outermost first
    """
    out: list[Step] = []
    fold = False  # the last row is a library row that further library frames join
    after_import = False  # the previous frame was importlib's machinery
    handle_run = False
    for i, f in enumerate(frames):
        if _is_importlib(f):
            after_import = True
            if fold:
                out[-1] = _hide(out[-1], f)
            continue
        # Code compiled from a string by a library (dataclasses, namedtuple) is its.
        lib = f.is_library or (fold and f.file.startswith("<"))
        if f.name == "<module>" and after_import and (not fold or not lib or show_all):
            # A module the user's code imports: a row named by the module; the library
            # frames under a library module fold into it, as under any library call.
            out.append(Step(f"import {module_name(f.file)}", f.file, f.first_line, "import",
                            f.line, 0, frozenset()))  # fmt: skip
            fold, after_import = lib and not show_all, False
            continue
        after_import = False
        if lib and _is_loop_step(f) and not show_all and _idle_after(frames, i + 1):
            out.append(Step("idle (event loop)", "", 0, "idle", 0, 0, frozenset()))
            return out
        if lib and not show_all:
            handle_run = handle_run or _is_handle_run(f)
            if fold:
                out[-1] = _hide(out[-1], f)
            else:
                out.append(Step(f.name, f.file, f.first_line, "library", f.line, 0, frozenset()))
                fold = True
            continue
        kind = "task" if (handle_run or (i and _is_handle_run(frames[i - 1]))) else "user"
        out.append(Step(f.name, f.file, f.first_line, kind, f.line, 0, frozenset()))
        fold = handle_run = False
    return out


def _hide(step: Step, frame: SampledFrame) -> Step:
    return step._replace(hidden=step.hidden + 1, packages=step.packages | {_package(frame)})


def _package(frame: SampledFrame) -> str:
    """The package a frame is counted in when hidden: its file's, or for a built-in as
    cProfile names it (no file: ``<built-in method numpy.arange>``, ``<method 'sort' of
    'numpy.ndarray' objects>``) the module in its name (``builtins`` for a type's), the
    C half of a standard module counted as the module (``_json`` as ``json``)."""
    if frame.file or not frame.name.startswith(("<built-in method ", "<method ")):
        return package_of(frame.file)
    if frame.name.startswith("<method "):
        owner = frame.name.rsplit(" of ", 1)[-1].removesuffix(" objects>").strip("'")
    else:
        owner = frame.name[len("<built-in method ") :].rstrip(">")
    return owner.split(".", 1)[0].lstrip("_") or "builtins" if "." in owner else "builtins"


def _idle_after(frames: Stack, start: int) -> bool:
    """The loop's step waits in the selector: every frame after it is a library's and
    one is in ``selectors.py``."""
    rest = frames[start:]
    return all(f.is_library for f in rest) and any(f.file.endswith("selectors.py") for f in rest)


def build_tree(profile: SampledProfile, thread: ThreadProfile, show_all: bool = False) -> Row:
    """The call tree of one thread: every column of its rows added up (the highest RSS:
    the most) along the folded stacks.

    :param profile: the profile
    :param thread: one of its threads
    :param show_all: no folding of library frames
    :return: the root row (kind ``thread``)
    """
    root = Row(f"{thread.kind} {thread.name}", "", 0, thread.kind)
    cache: dict[Stack, list[Step]] = {}
    for frames, totals in profile.thread_stacks(thread):
        steps = cache.get(frames)
        if steps is None:
            steps = cache[frames] = fold_stack(frames, show_all)
        node = root
        _add_columns(node, totals)
        for step in steps:
            key = (step.label, step.file, step.line, step.kind)
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = Row(step.label, step.file, step.line, step.kind)
            _add_columns(child, totals)
            child.hidden = max(child.hidden, step.hidden)
            child.packages |= step.packages
            node = child
        node.self_wall += totals[WALL]
        node.self_cpu += totals[CPU]
        if steps:
            lineno = steps[-1].lineno
            node.lines[lineno] = node.lines.get(lineno, 0.0) + totals[WALL]
    return root


def _add_columns(row: Row, totals: list[float]) -> None:
    row.wall += totals[WALL]
    row.cpu += totals[CPU]
    row.samples += int(totals[SAMPLES])
    if len(totals) > PYTHON:
        row.python += column(totals, PYTHON)
        row.native += column(totals, NATIVE)
        row.system += column(totals, SYSTEM)
        row.queued += column(totals, QUEUED)
    if len(totals) > NET:
        row.net += column(totals, NET)
        row.to_peak += column(totals, TO_PEAK)
        row.highest = max(row.highest, column(totals, HIGHEST))
    if len(totals) > POOL:
        row.pool += totals[POOL]


def mark_waiting(root: Row, cpu_known: bool = True) -> None:
    """Marks the rows of a tree that wait (see :data:`WAITING_CPU`).

    :param root: the tree
    :param cpu_known: whether CPU times were measured (nothing is marked otherwise)
    """
    rows, todo = [], [root]
    while todo:
        row = todo.pop()
        rows.append(row)
        todo.extend(row.children.values())
    if not cpu_known or root.wall <= 0:
        return
    busy = [r.own_cpu_share() for r in rows if r.self_wall >= 0.02 * root.wall]
    baseline = max(busy, default=0.0)
    for r in rows:
        share = r.own_cpu_share()
        r.waiting = (
            r.self_wall > 0
            and r.self_wall >= 0.5 * r.wall
            and (share <= WAITING_CPU * baseline or share <= IDLE_CPU)
        )


def trees(profile: SampledProfile, show_all: bool = False) -> list[Row]:
    """One tree per thread, the main thread first (threads never sampled left out).

    :param profile: the profile
    :param show_all: no folding
    """
    roots = [build_tree(profile, t, show_all) for t in profile.threads if t.totals]
    for root in roots:
        mark_waiting(root, profile.cpu_known)
    return roots


def visible_rows(
    root: Row,
    fold_share: float = FOLD_SHARE,
    max_depth: int | None = None,
    order: Callable[[Row], Any] | None = None,
    min_more: float = MIN_MORE_SHARE,
    fold_top: bool = True,
    span: float = 0.0,
    total: float = 0.0,
) -> Iterator[tuple[int, Row, bool]]:
    """The rows to draw, depth first, the hottest child first: ``(depth, row, last)``
    with ``last`` True for a parent's last child shown. Children under ``fold_share``
    of the total time go into one ``N more`` row, left out when under ``min_more``.

    :param root: a tree
    :param fold_share: the share under which rows are folded (0 shows them all)
    :param max_depth: rows deeper than this are not drawn
    :param order: the key the children shown are sorted by (None: hottest first); the
        ``N more`` row stays last
    :param min_more: the share under which an ``N more`` row is left out
    :param fold_top: whether the root's own children fold too
    :param span: the memory's span (0: time only): a row growing the memory (net or up
        to the peak) by this share of it is kept too, equal times rank by growth up to
        the peak and an ``N more`` row adds up the memory columns
    :param total: the time the shares are of (0: the root's)
    """
    total = total or root.wall or 1.0
    stack: list[tuple[int, Row, bool]] = [(0, root, True)]
    while stack:
        depth, row, last = stack.pop()
        yield depth, row, last
        if row.kind == "more" or (max_depth is not None and depth >= max_depth):
            continue
        kids = sorted(row.children.values(), key=lambda r: (-r.wall, -r.to_peak if span else 0))
        floor = fold_share * total if fold_top or depth else 0.0
        shown = [k for k in kids if _shown(k, floor, fold_share * span)]
        rest = [k for k in kids if not _shown(k, floor, fold_share * span)]
        if order is not None:
            shown.sort(key=order)
        more = _more(rest, span) if rest else None
        if more is not None and _shown(more, min_more * total, min_more * span):
            shown.append(more)
        for i in range(len(shown) - 1, -1, -1):
            stack.append((depth + 1, shown[i], i == len(shown) - 1))


def _shown(row: Row, floor: float, growth: float) -> bool:
    """Whether a row takes ``floor`` seconds or more, or grows the memory by ``growth``."""
    if row.wall >= floor and row.wall > 0:
        return True
    return growth > 0 and (abs(row.to_peak) >= growth or abs(row.net) >= growth)


def _more(rest: list[Row], span: float) -> Row:
    """The ``N more`` row of rows folded, their memory added up too with a ``span``."""
    more = Row(f"{len(rest)} more", "", 0, "more", sum(k.wall for k in rest))
    more.cpu, more.more = sum(k.cpu for k in rest), len(rest)
    if span:
        more.self_wall, more.net = more.wall, sum(k.net for k in rest)
        more.to_peak = sum(k.to_peak for k in rest)
        more.highest = max(0.0, *(k.highest for k in rest))
    return more


class HotLine(NamedTuple):
    """A line of a user function and the time it ran or called for; where the collector
    splits CPU time, the shares of that time in Python, native code, the kernel and
    waiting (see :func:`split_shares`)."""

    line: int
    seconds: float
    share: float
    source: str
    split: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    # The CPU of the threads Python does not know while the line ran, over its time (2.8:
    # 2.8 cores busy on average).
    pool: float = 0.0


class HotFunction(NamedTuple):
    """One of the user's hottest functions and its hottest lines."""

    name: str
    file: str
    first_line: int
    seconds: float
    share: float
    lines: list[HotLine]


def line_figures(profile: SampledProfile) -> dict[tuple[str, str, int, int], list[float]]:
    """Every user line's figures, all threads added up: a stack counts for its innermost
    user frame (the line running, or calling the library code that runs).

    :param profile: the profile
    :return: ``(function, file, first line, line)`` -> its columns (those of the model's
        rows, see :data:`.model.WALL`; the highest RSS: the most)
    """
    per: dict[tuple[str, str, int, int], list[float]] = {}
    for thread in profile.threads:
        for frames, totals in profile.thread_stacks(thread):
            j = innermost_user(frames)
            if j < 0:
                continue
            f = frames[j]
            _add(per.setdefault((f.name, f.file, f.first_line, f.line), [0.0] * NCOLUMNS), totals)
    return per


def function_figures(
    profile: SampledProfile, inner: Callable[[Stack], int] | None = None
) -> dict[tuple[str, str, int], tuple[list[float], list[float]]]:
    """Every function's figures, all threads added up: the columns of the stacks it is on
    (once each: a recursion counts once) and those of the stacks it is the innermost user
    function of.

    :param profile: the profile
    :param inner: the index of a stack's innermost user frame (None: :func:`innermost_user`,
        the innermost frame when none is the user's)
    :return: ``(function, file, first line)`` -> ``(on the stack, innermost)``, each the
        model's columns (the highest RSS: the most)
    """
    per: dict[tuple[str, str, int], tuple[list[float], list[float]]] = {}
    for thread in profile.threads:
        for frames, totals in profile.thread_stacks(thread):
            if not frames:
                continue
            for key in dict.fromkeys((f.name, f.file, f.first_line) for f in frames):
                _add(per.setdefault(key, ([0.0] * NCOLUMNS, [0.0] * NCOLUMNS))[0], totals)
            f = frames[inner(frames) if inner else innermost_user(frames, last=True)]
            _add(per[f.name, f.file, f.first_line][1], totals)
    return per


def _add(cols: list[float], totals: Sequence[float]) -> None:
    """Adds a stack's columns to a row's (the highest RSS: the most)."""
    for i, value in enumerate(totals):
        cols[i] = max(cols[i], value) if i == HIGHEST else cols[i] + value


_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def innermost_user(frames: Sequence[SampledFrame], last: bool = False) -> int:
    """The index of a stack's innermost user frame, -1 when there is none: library frames
    are passed over, and so is code compiled from a string (``<string>``) that a library
    frame ran (a namedtuple's, numpy's; a notebook cell's is the user's) and a
    comprehension, which counts as the function holding it (3.12 inlines them, PEP 709).

    :param frames: outermost first
    :param last: when none is the user's, the innermost frame's index instead of -1
    """
    for j in range(len(frames) - 1, -1, -1):
        f = frames[j]
        if f.is_library:
            continue
        if f.file.startswith("<") and (_synthetic(f.file) or (j and frames[j - 1].is_library)):
            continue
        if f.name.endswith(_COMPREHENSIONS) and j and frames[j - 1].file == f.file:
            continue
        return j
    return len(frames) - 1 if last else -1


def hot_lines(
    profile: SampledProfile,
    functions: int = 5,
    lines: int = 8,
    min_share: float = 0.01,
    by: int = WALL,
) -> list[HotFunction]:
    """For each of the user's hottest functions (all threads), the lines taking the
    time (see :func:`line_figures`), as shares of the time the user's lines ran.

    :param profile: the profile
    :param functions: functions kept at most
    :param lines: lines kept per function at most
    :param min_share: lines and functions under this share of the total left out
    :param by: the column ranked and shown: ``WALL`` (the default) or ``CPU`` (a busy
        machine: the wall time of every line there is mostly waiting for a CPU)
    :return: the hottest first
    """
    if not profile.lines_known:  # frames at their function's first line: no line to name
        return []
    per: dict[tuple[str, str, int], dict[int, list[float]]] = {}
    figures = line_figures(profile)
    for (name, file, first, line), cols in figures.items():
        per.setdefault((name, file, first), {})[line] = cols
    # Shares of the time the user's code ran: a thread running library code only (a
    # notebook's history thread, idle all along) is no line's and dilutes none.
    total = sum(cols[by] for cols in figures.values())
    if total <= 0:
        return []
    out = []
    ranked = sorted(per.items(), key=lambda kv: -sum(v[by] for v in kv[1].values()))
    for (name, file, first), by_line in ranked[:functions]:
        seconds = sum(v[by] for v in by_line.values())
        if seconds < min_share * total:
            break
        top = sorted(by_line.items(), key=lambda kv: -kv[1][by])[:lines]
        hot = [
            HotLine(n, v[by], v[by] / total, source_line(file, n),
                    split_shares(v[WALL], v[CPU], v[PYTHON], v[NATIVE], v[SYSTEM]),
                    v[POOL] / v[WALL] if v[WALL] > 0 else 0.0)
            for n, v in top
            if v[by] >= min_share * total
        ]  # fmt: skip
        out.append(HotFunction(name, file, first, seconds, seconds / total, hot))
    return out


def source_line(file: str, line: int, width: int = 200) -> str:
    """A line of source as shown: stripped, cut at a word's end to ``width`` characters
    with an ellipsis, never mid-token.

    :param file: the file
    :param line: the line
    :param width: characters at most
    :return: the text, '' when unreadable
    """
    import linecache  # here: a JSON or HTML output reads no source line

    if "\x00" in file:  # no path holds one (a crafted co_filename, a torn read): stat refuses it
        return ""
    return cut_source(linecache.getline(file, line), width)  # the one cut, at a token's end


class Box(NamedTuple):
    """A box of the timeline: a row of the folded stack running over a time span."""

    start: float
    duration: float
    depth: int
    label: str
    kind: str


def timeline_boxes(
    profile: SampledProfile, thread: ThreadProfile, min_share: float = 0.002, max_boxes: int = 4000
) -> list[Box]:
    """What ran when in one thread: consecutive samples whose folded stacks share a row
    (the same rows from the root down to it) make one box at that row's depth.

    :param profile: the profile
    :param thread: the thread
    :param min_share: boxes shorter than this share of the run left out
    :param max_boxes: boxes kept at most (the longest)
    :return: boxes in time order, depth by depth
    """
    skip = profile.skip_outer if thread.is_main else 0
    folded: dict[int, list[Step]] = {}
    open_: list[tuple[tuple[str, str, int, str], float, float]] = []  # key, start, end
    boxes: list[Box] = []

    def close(depth: int) -> None:
        while len(open_) > depth:
            key, start, end = open_.pop()
            boxes.append(Box(start, end - start, len(open_), key[0], key[3]))

    for start, duration, sid in thread.timeline:
        steps = folded.get(sid)
        if steps is None:
            steps = folded[sid] = fold_stack(profile.stacks[sid][skip:])
        d = 0
        while d < len(steps) and d < len(open_):
            s = steps[d]
            if open_[d][0] != (s.label, s.file, s.line, s.kind) or open_[d][2] < start - 1e-9:
                break
            d += 1
        close(d)
        for s in steps[d:]:
            open_.append(((s.label, s.file, s.line, s.kind), start, start))
        end = start + duration
        open_[:] = [(k, b, end) for k, b, _ in open_]
    close(0)
    span = profile.duration or 1.0
    boxes = [b for b in boxes if b.duration >= min_share * span]
    if len(boxes) > max_boxes:
        boxes = sorted(boxes, key=lambda b: -b.duration)[:max_boxes]
    boxes.sort(key=lambda b: (b.depth, b.start))
    return boxes
