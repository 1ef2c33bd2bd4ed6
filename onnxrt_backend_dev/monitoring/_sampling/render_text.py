"""The sampled profile as text: a header, one call tree per thread, the hot lines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._format import format_duration, one_line
from .model import CPROFILE, CPU, WALL, SampledProfile
from .view import FOLD_SHARE, Row, hot_lines, short_file, split_shares, trees, visible_rows

_GUIDES = {"unicode": ("├─ ", "└─ ", "│  ", "   "), "ascii": ("|- ", "`- ", "|  ", "   ")}


def header(profile: SampledProfile) -> str:
    """One line: what ran, wall and CPU time, how it was sampled.

    :param profile: the profile
    :return: the line, without a line break
    """
    if profile.timer == CPROFILE:
        of = f" of {profile.program}" if profile.program else ""
        total = format_duration(profile.duration)
        return f"Call tree{of}: {total} in total (cProfile: every call timed, overhead included)"
    what = f"{profile.program}: " if profile.program else ""
    head = (
        f"{what}wall {format_duration(profile.duration)}, CPU {format_duration(profile.cpu_time)}"
        f", {profile.samples} samples every {format_duration(profile.interval)} "
    )
    if profile.timer != "observer":
        return f"{head}({profile.timer} timer)"
    rate = profile.samples / profile.duration if profile.duration > 0 else 0.0
    return f"{head}(observer: {rate:.0f} a second)"


def row_text(row: Row, total: float, unit: tuple[str, float] = ("s", 1.0)) -> str:
    """A row's figures and name: ``0.812 s  64.2 %  read_csv  pandas/...:800  [...]``.

    :param row: the row
    :param total: the thread's time, for the share
    :param unit: the unit of the times and its factor from seconds
    """
    share = 100.0 * row.wall / total if total > 0 else 0.0
    head = f"{row.wall * unit[1]:.3f} {unit[0]} {share:5.1f} %  "
    if row.kind == "more":
        return f"{head}{row.label}"
    where = f"  {short_file(row.file)}:{row.line}" if row.file else ""
    tags = []
    if row.kind == "task":
        tags.append("task")
    if row.waiting and row.kind != "idle":
        tags.append("waiting")
    hidden = row.hidden_text()
    if hidden:
        tags.append(hidden)
    if row.pool >= 0.01 * total > 0:  # the pool's CPU while it ran (see native_thread_lines)
        tags.append(f"pool CPU {format_duration(row.pool)}")
    tail = "".join(f"  [{t}]" for t in tags)
    return f"{head}{row.label}{where}{tail}"


def split_text(row: Row) -> str:
    """`` (Python 12 %, native 80 %, system 3 %, waiting 5 %)`` where the CPU time is
    split, '' otherwise.

    :param row: a row (the thread's root)
    """
    if row.python + row.native + row.system <= 0:
        return ""
    py, nat, sy, wait = split_shares(row.wall, row.cpu, row.python, row.native, row.system)
    queued = ""
    if row.wall > 0 and row.queued >= 0.05 * row.wall:  # a busy machine: say how busy
        queued = f", of which {100 * row.queued / row.wall:.0f} % for a CPU (a busy machine)"
    return (f" (Python {100 * py:.0f} %, native {100 * nat:.0f} %, system {100 * sy:.0f} %,"
            f" waiting {100 * wait:.0f} %{queued})")  # fmt: skip


def tree_lines(
    root: Row,
    fold_share: float,
    max_depth: int | None,
    guides: str,
    max_indent: int | None = None,
    order: Callable[[Row], Any] | None = None,
    unit: tuple[str, float] = ("s", 1.0),
) -> list[str]:
    """The lines of one thread's tree.

    :param root: the thread's root row
    :param fold_share: see :func:`~.view.visible_rows`
    :param max_depth: deeper rows are not drawn (0: the top level only)
    :param guides: ``unicode`` or ``ascii``
    :param max_indent: levels drawn (None: all); deeper rows are drawn at that level
        with their level in brackets, and a last line says so
    :param order: see :func:`~.view.visible_rows`
    :param unit: see :func:`row_text`
    """
    mid, end, bar, blank = _GUIDES[guides]
    total = root.wall
    lines = []
    prefix: list[str] = []  # the guide of each open level
    # max_depth counts from the first row drawn (0: the top level, as in the cProfile
    # views); the thread's root row above it is the header line.
    deepest = None if max_depth is None else max_depth + 1
    deep = 0
    for depth, row, last in visible_rows(root, fold_share, deepest, order):
        if depth == 0:
            cpu = f", CPU {format_duration(root.cpu)}" if root.cpu > 0 else ""
            if root.pool > 0:
                cpu += f", pool CPU {format_duration(root.pool)}"
            lines.append(f"{root.label}: {format_duration(root.wall)}{cpu}{split_text(root)}")
            continue
        del prefix[depth - 1 :]
        branch = end if last else mid
        if max_indent is not None and depth - 1 > max_indent:
            deep += 1  # drawn at max_indent, its level said
            branch = "".join(prefix[:max_indent]) + branch + f"[{depth - 1}] "
        else:
            branch = "".join(prefix) + branch
        lines.append(branch + row_text(row, total, unit))
        prefix.append(blank if last else bar)
    if deep:
        lines.append(f"[{deep} rows deeper than {max_indent} levels are drawn at level "
                     f"{max_indent} with their depth in brackets]")  # fmt: skip
    return lines


def to_text(
    profile: SampledProfile,
    fold_share: float = FOLD_SHARE,
    show_all: bool = False,
    max_depth: int | None = None,
    guides: str = "unicode",
    hot: bool = True,
    max_indent: int | None = None,
    order: Callable[[Row], Any] | None = None,
    rank: str = "wall",
) -> str:
    """The profile as text.

    :param profile: the profile
    :param fold_share: rows under this share of their thread go into one ``N more`` row
    :param show_all: do not fold library frames
    :param max_depth: deeper rows are not drawn (0: the top level only)
    :param guides: ``unicode`` or ``ascii`` tree guides
    :param hot: add the hot lines
    :param max_indent: see :func:`tree_lines`
    :param order: see :func:`~.view.visible_rows`
    :param rank: ``wall`` or ``cpu``: what ranks the rows and the hot lines (on a busy
        machine the wall time is mostly waiting for a CPU)
    :return: the text, ending with a line break
    """
    by_cpu = rank == "cpu" and profile.timer != CPROFILE
    lines = [header(profile) + (" (rows ranked by CPU time)" if by_cpu else "")]
    lines.extend(f"note: {n}" for n in profile.notes)
    roots = trees(profile, show_all)
    lines.extend(busy_note(roots, by_cpu))
    if by_cpu and order is None:
        order = _by_cpu
    cprofile = profile.timer == CPROFILE
    if not roots:
        lines.append("no call recorded" if cprofile else "no sample taken")
    # cProfile times short runs exactly: their rows read in ms or µs, not as 0.000 s.
    unit = time_unit(profile.duration) if cprofile else ("s", 1.0)
    for root in roots:
        lines.extend(tree_lines(root, fold_share, max_depth, guides, max_indent, order, unit))
    lines.extend(native_thread_lines(profile))
    if hot:
        lines.extend(hot_line_lines(profile, CPU if by_cpu else WALL))
    return "\n".join(map(one_line, lines)) + "\n"  # names from the program: one row each


def _by_cpu(row: Row) -> float:
    return -row.cpu


def busy_note(roots: list[Row], by_cpu: bool) -> list[str]:
    """A line when most of the wall time was spent waiting for a CPU (a busy machine: the
    rows ranked by wall time then rank what waited longest, not what ran).

    :param roots: the threads' trees
    :param by_cpu: the rows are already ranked by CPU time
    :return: the line, or none
    """
    wall = sum(r.wall for r in roots)
    queued = sum(r.queued for r in roots)
    if wall <= 0 or queued < 0.5 * wall:
        return []
    said = "rows ranked by CPU time" if by_cpu else "--clock cpu ranks the rows by CPU time"
    return [f"note: {100 * queued / wall:.0f} % of the wall time was spent waiting for a CPU "
            f"(a busy machine): {said}"]  # fmt: skip


def time_unit(total: float) -> tuple[str, float]:
    """The unit the rows of a tree read in with three decimals, chosen from its total.

    :param total: seconds
    :return: the unit's name and its factor from seconds
    """
    if total >= 1.0:
        return "s", 1.0
    if total >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def native_thread_lines(profile: SampledProfile) -> list[str]:
    """The threads Python does not know, by pool (kernel name), with their CPU time; the
    thread headers, rows (``pool CPU``) and hot lines say where the program was meanwhile.

    :param profile: the profile
    :return: the lines (none when there are none)
    """
    busy = [(n, c, s) for n, c, s in profile.native_threads if s > 0]
    if not busy:
        return []
    out = ["threads Python does not know (started by native code: a BLAS or ONNX Runtime "
           "pool), CPU time:"]  # fmt: skip
    for name, count, seconds in sorted(busy, key=lambda t: -t[2]):
        many = f" ({count} threads)" if count > 1 else ""
        out.append(f"  {format_duration(seconds)}  {name}{many}")
    return out


def hot_line_lines(profile: SampledProfile, by: int = WALL) -> list[str]:
    """The hot lines: each of the user's hottest functions and its lines, with the split
    of their time (Python, native, system, waiting) where the collector measures it, and
    the CPU of the threads Python does not know meanwhile (``pool``, % of the line's
    time: 280 is 2.8 cores busy) where there was any.

    :param profile: the profile
    :param by: ranked by ``WALL`` or by ``CPU`` time
    """
    found = hot_lines(profile, by=by)
    if not found:
        return []
    split = profile.split_known
    what = "CPU time" if by == CPU else "time"
    head = f"hot lines ({what} with the line running or calling"
    pool = any(h.pool for fn in found for h in fn.lines)
    cols_head = "; % of it in Python | native code | system | waiting" if split else ""
    out = [f"{head}{cols_head}{' | pool CPU' if pool else ''}):"]
    for fn in found:
        share = 100.0 * fn.share
        out.append(f"  {fn.name}  {short_file(fn.file)}:{fn.first_line}  {share:.1f} %")
        for h in fn.lines:
            cols = ""
            if split:
                py, nat, sy, wait = (round(100 * x) for x in h.split)
                cols = f"py {py:3d} | nat {nat:3d} | sys {sy:3d} | wait {wait:3d}  "
            if pool:
                cols = f"{cols[:-2]} | pool {round(100 * h.pool):3d}  "
            out.append(f"    {h.line:>5}  {100.0 * h.share:5.1f} %  {cols}{h.source}")
    return out
