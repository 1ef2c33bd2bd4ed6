"""The sampled profile as text: a header, one call tree per thread, the hot lines."""

from __future__ import annotations

from .._format import format_duration, one_line
from .model import SampledProfile
from .view import FOLD_SHARE, Row, hot_lines, short_file, trees, visible_rows

_GUIDES = {"unicode": ("├─ ", "└─ ", "│  ", "   "), "ascii": ("|- ", "`- ", "|  ", "   ")}


def header(profile: SampledProfile) -> str:
    """One line: what ran, wall and CPU time, how it was sampled.

    :param profile: the profile
    :return: the line, without a line break
    """
    what = f"{profile.program}: " if profile.program else ""
    return (
        f"{what}wall {format_duration(profile.duration)}, CPU {format_duration(profile.cpu_time)}"
        f", {profile.samples} samples every {format_duration(profile.interval)} "
        f"({profile.timer} timer)"
    )


def row_text(row: Row, total: float) -> str:
    """A row's figures and name: ``0.812 s  64.2 %  read_csv  pandas/...:800  [...]``.

    :param row: the row
    :param total: the thread's time, for the share
    :return: the text
    """
    share = 100.0 * row.wall / total if total > 0 else 0.0
    head = f"{row.wall:.3f} s {share:5.1f} %  "
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
    tail = "".join(f"  [{t}]" for t in tags)
    return f"{head}{row.label}{where}{tail}"


def tree_lines(root: Row, fold_share: float, max_depth: int | None, guides: str) -> list[str]:
    """The lines of one thread's tree.

    :param root: the thread's root row
    :param fold_share: see :func:`~.view.visible_rows`
    :param max_depth: deeper rows are not drawn (0: the top level only)
    :param guides: ``unicode`` or ``ascii``
    :return: the lines
    """
    mid, end, bar, blank = _GUIDES[guides]
    total = root.wall
    lines = []
    prefix: list[str] = []  # the guide of each open level
    # max_depth counts from the first row drawn (0: the top level, as in the cProfile
    # views); the thread's root row above it is the header line.
    deepest = None if max_depth is None else max_depth + 1
    for depth, row, last in visible_rows(root, fold_share, deepest):
        if depth == 0:
            cpu = f", CPU {format_duration(root.cpu)}" if root.cpu > 0 else ""
            lines.append(f"{root.label}: {format_duration(root.wall)}{cpu}")
            continue
        del prefix[depth - 1 :]
        lines.append("".join(prefix) + (end if last else mid) + row_text(row, total))
        prefix.append(blank if last else bar)
    return lines


def to_text(
    profile: SampledProfile,
    fold_share: float = FOLD_SHARE,
    show_all: bool = False,
    max_depth: int | None = None,
    guides: str = "unicode",
    hot: bool = True,
) -> str:
    """The profile as text.

    :param profile: the profile
    :param fold_share: rows under this share of their thread go into one ``N more`` row
    :param show_all: do not fold library frames
    :param max_depth: deeper rows are not drawn (0: the top level only)
    :param guides: ``unicode`` or ``ascii`` tree guides
    :param hot: add the hot lines
    :return: the text, ending with a line break
    """
    lines = [header(profile)]
    lines.extend(f"note: {n}" for n in profile.notes)
    roots = trees(profile, show_all)
    if not roots:
        lines.append("no sample taken")
    for root in roots:
        lines.extend(tree_lines(root, fold_share, max_depth, guides))
    if hot:
        found = hot_lines(profile)
        if found:
            lines.append("hot lines (time with the line running or calling):")
        for fn in found:
            share = 100.0 * fn.share
            lines.append(f"  {fn.name}  {short_file(fn.file)}:{fn.first_line}  {share:.1f} %")
            lines.extend(f"    {h.line:>5}  {100.0 * h.share:5.1f} %  {h.source}" for h in fn.lines)
    return "\n".join(map(one_line, lines)) + "\n"  # names from the program: one row each
