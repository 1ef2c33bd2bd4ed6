"""The comparison of figures counted by valgrind (``--counter instructions``): no
statistics, one run a side.

A count is the same to the instruction when the program runs again with the same hash
seed; what else moves it is small and bounded (another folder or environment: a few
thousand instructions at start). A figure changed when ``|B - A|`` is beyond its noise:
the noise saved with each side plus a share of the larger, ``RELATIVE_NOISE`` for a run
or statement, ``FUNCTION_NOISE`` for a function (the garbage collector runs in whichever
function crosses its threshold). The interval shown is the change plus or minus it. A
count is never compared with a time.

Per Python function (Python >= 3.12): own and inclusive counts and caller → callee
edges; a function is listed where its *own* count changed (its callers' inclusive
counts carry the same change).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._count import FUNCTION_NOISE, RELATIVE_NOISE
from .._count.callgraph import INTERPRETER
from .._errors import ResultFormatError
from .._format import one_line
from .._stats.multiple import median
from .change import (
    ALLOCS,
    BETTER,
    BYTES,
    INCLUSIVE,
    ORIGIN,
    OWN,
    PATH,
    WORSE,
    Change,
    Settings,
)
from .keys import place
from .tables import located, side_table, union

# The instructions of one count: a counted profile stores them where nanoseconds go.
PER_UNIT = 1e9
# A function making fewer allocation calls than this is not compared on them; nor one
# allocating fewer bytes than this.
MIN_ALLOCS = 1000
MIN_BYTES = 64 * 1024
NOTE = (
    "counted by valgrind (instructions, one run a side): a change within the noise of "
    "the counts ({relative:.1%} of a total, {function:.1%} of a function's) is no change; "
    "the counter sees work, not waiting"
)


def counter_of(data: Mapping[str, Any]) -> str | None:
    """The counter (``instructions``) of a timing series or a profile payload, None when
    timed.

    :param data: the series or the payload
    """
    value = data.get("counter")
    return value if isinstance(value, str) else None


def _check_same(what: str, a: str | None, b: str | None, names: Sequence[str] = ("A", "B")) -> None:
    """Refuses a counted figure (its counter) beside a timed one (None)."""
    if a == b:
        return

    def how(counter: str | None) -> str:
        return f"counted ({counter})" if counter else "timed"

    raise ResultFormatError(
        f"{what}: {names[0]} was {how(a)}, {names[1]} {how(b)}: a count and a time are not "
        "comparable (give both --counter instructions, or neither)"
    )


def counted_change(
    section: str,
    name: str,
    figure: str,
    a: float,
    b: float,
    noise: float = 0.0,
    where: tuple[str | None, int | None] = (None, None),
    listed: bool = True,
) -> Change:
    """One counted figure of both sides.

    :param section: the comparison's section
    :param name: what it is (a statement, ``instructions``, a function)
    :param figure: ``count`` for a whole, ``own``, ``inclusive`` or ``path``
    :param a: A's instructions
    :param b: B's instructions
    :param noise: the absolute noise of both sides together
    :param where: the function's ``(file, line)``
    :param listed: a significant change is listed as worse or better
    """
    relative = FUNCTION_NOISE if figure in (OWN, INCLUSIVE, PATH, ALLOCS, BYTES) else RELATIVE_NOISE
    tolerance = noise + relative * max(abs(a), abs(b))
    sides = [{"count": float(a), "counted": 1.0}, {"count": float(b), "counted": 1.0}]
    if figure in (OWN, INCLUSIVE, PATH):
        for side in sides:
            side["time"] = side["count"]
    if a <= 0:
        return Change(section, name, where[0], where[1], figure, sides[0], sides[1], None,
                      note="new" if b > 0 else "")  # fmt: skip
    d = b - a
    significant = abs(d) > tolerance
    verdict = (WORSE if d > 0 else BETTER) if significant and listed else ""
    note = f"noise ± {amount(figure, tolerance)}"
    return Change(
        section, name, where[0], where[1], figure, sides[0], sides[1], d / a,
        (d - tolerance) / a, (d + tolerance) / a, None, None, significant, True, note,
        verdict=verdict,
    )  # fmt: skip


def amount(figure: str, value: float) -> str:
    """A counted figure's value with its unit: instructions, allocation calls or bytes.

    :param figure: the change's figure
    :param value: its value
    """
    from .._format import format_bytes, format_count

    if figure == BYTES:
        return format_bytes(value)
    return format_count(value, unit="allocs" if figure == ALLOCS else "instr")


def timing_change(sa: Mapping[str, Any], sb: Mapping[str, Any], settings: Settings) -> Change:
    """A counted statement (or whole run) of both sides, in instructions per execution.

    :param sa: A's series
    :param sb: B's series
    :param settings: the settings (its notes filled)
    """
    _check_same(repr(sb["name"]), counter_of(sa), counter_of(sb))
    per = [sum(s["times"]) / sum(s["sizes"]) for s in (sa, sb)]
    noise = float(sa.get("noise", 0.0)) + float(sb.get("noise", 0.0))
    _note(settings)
    for series in (sa, sb):
        said = (series.get("summary") or {}).get("note")
        if isinstance(said, str) and said and said not in settings.notes:
            settings.notes.append(said)
    return counted_change("timing", str(sb["name"]), "count", per[0], per[1], noise)


def _note(settings: Settings) -> None:
    text = NOTE.format(relative=RELATIVE_NOISE, function=FUNCTION_NOISE)
    if text not in settings.notes:
        settings.notes.append(text)


def profile_changes(
    da: Mapping[str, Any], db: Mapping[str, Any], settings: Settings, section: str
) -> list[Change]:
    """Two profiles counted per Python function: the whole run's instructions, then each
    function's own and inclusive count and each edge's.

    :param da: A's payload
    :param db: B's payload
    :param settings: the settings (notes filled)
    :param section: ``profile``
    """
    _check_same("the profiles", counter_of(da), counter_of(db))
    sa, sb = side_table("profile", da), side_table("profile", db)
    _note(settings)
    totals = [median(d.get("run_figures", {}).get("total") or [1.0]) for d in (da, db)]
    changes = [counted_change(section, "instructions", "count", totals[0], totals[1])]
    least = settings.min_share * max(totals)

    def figures(rows_a: Any, rows_b: Any) -> Any:
        for key in union(rows_a, rows_b):
            a = median(rows_a.get(key, [0.0])) * PER_UNIT
            b = median(rows_b.get(key, [0.0])) * PER_UNIT
            yield key, a, b, max(a, b) >= least

    for figure, rows_a, rows_b in ((OWN, sa.own, sb.own), (INCLUSIVE, sa.inclusive, sb.inclusive)):
        for key, a, b, big in figures(rows_a, rows_b):
            file, line, name = located(key, sa, sb)
            listed = figure == OWN and name != INTERPRETER[2]  # its changes are the total's
            c = counted_change(section, name, figure, a, b, 0.0, (file, line), listed)
            changes.append(_shared(c, a, b, totals) if big else _small(c, settings))
    changes += _allocation_changes(sa, sb, section)
    own = {(c.file, c.line, c.function): c for c in changes if c.figure == OWN and c.verdict}
    for key, a, b, big in figures(sa.paths, sb.paths):
        file, line, name = located(key[-1], sa, sb)
        c = counted_change(section, name, PATH, a, b, 0.0, (file, line), listed=False)
        where = [located(k, sa, sb) for k in key]
        path = tuple(one_line(w[2]) for w in where)
        c = (_shared(c, a, b, totals) if big else _small(c, settings)).replace(
            path=path, chain=len(path), places=tuple(place(*w) for w in where))  # fmt: skip
        changes.append(_origin(c, own.get((file, line, name))))
    return changes


def _origin(edge: Change, callee: Change | None) -> Change:
    """An edge ``caller → callee`` listed where the callee's own change starts: when it
    carries at least half of it, in the same direction (one caller of a shared ``spin``
    passing more work: ``f07 → spin``, not ``spin``); a change every caller shares
    names the function alone."""
    if callee is None or not edge.significant or edge.change is None or callee.change is None:
        return edge
    moved = edge.b["count"] - edge.a["count"]
    own = callee.b["count"] - callee.a["count"]
    if moved * own <= 0 or abs(moved) < 0.5 * abs(own):
        return edge
    return edge.replace(verdict=callee.verdict, role=ORIGIN)


def _allocation_changes(sa: Any, sb: Any, section: str) -> list[Change]:
    """The run's calls to the allocators (and bytes allocated, ``--count-bytes``), and
    each function's where it made at least :data:`MIN_ALLOCS` of them (allocated
    :data:`MIN_BYTES`): listed as worse or better beyond their noise, deterministic
    figures for memory."""
    out = []
    for figure, name, least, rows in (
        (ALLOCS, "allocations", MIN_ALLOCS, "allocs"), (BYTES, "allocated", MIN_BYTES, "bytes")
    ):  # fmt: skip
        ra, rb = getattr(sa, rows), getattr(sb, rows)
        if not ra or not rb:
            continue
        sums = [sum(median(row) for row in side.values()) for side in (ra, rb)]
        out.append(counted_change(section, name, figure, sums[0], sums[1]))
        for key in union(ra, rb):
            a, b = median(ra.get(key, [0.0])), median(rb.get(key, [0.0]))
            if max(a, b) >= least:
                file, line, name_ = located(key, sa, sb)
                out.append(counted_change(section, name_, figure, a, b, 0.0, (file, line)))
    return out


def _shared(c: Change, a: float, b: float, totals: Sequence[float]) -> Change:
    c.a["share"], c.b["share"] = a / max(totals[0], 1.0), b / max(totals[1], 1.0)
    return c


def _small(c: Change, settings: Settings) -> Change:
    """A figure under the share tested: shown, never listed."""
    return c.replace(
        significant=False, verdict="", tested=False,
        note=f"below the {settings.min_share:.1%} share tested",
    )  # fmt: skip
