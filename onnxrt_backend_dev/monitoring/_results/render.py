"""Renderers of a :class:`.compare.ResultComparison`: text, JSON and a self-contained
HTML page, each opening with the verdict. The text and the page hold the same sections,
``top`` rows each (the whole run, where the changes start, the functions, their memory
growth), the rest folded into one line saying how many and why; the page adds a
differential flame graph (:mod:`.flame`). Every text from a file is escaped for the
page and shown on one line (a newline or a NUL in a crafted name as ``\\n``, ``\\x00``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .._format import format_bytes, format_duration, one_line
from .._html import text as escape_text
from .change import ALLOCS, BYTES, EXPLAINED, GROWTH, INCLUSIVE, ORIGIN, OWN, PATH, Change
from .compare import ResultComparison, Verdict, format_change, label
from .counted import amount

__all__ = ["format_change", "label", "to_html", "to_json", "to_text"]

COMPARISON_SCHEMA = "onnxrt-monitoring-comparison"
COMPARISON_VERSION = 2
# Rows of each section unless asked otherwise.
TOP = 25
# The width of an amount column: "2.96 M allocs", "37.4 M instr", "35.0 ms"
W = 13
DEFAULT_ABOVE = 0.05


def _amount(c: Change, side: dict[str, float]) -> str:
    if side.get("counted"):
        return amount(c.figure, side.get("count", 0.0))
    if c.figure in (OWN, INCLUSIVE, PATH) and not side.get("time"):
        return "—"
    if "typical" in side:  # the figure compared: B's at A's run speed
        return format_duration(side["typical"])
    if c.figure == GROWTH:
        return format_bytes(side.get("growth", 0.0))
    if c.figure == "peak":
        return format_bytes(side.get("peak", 0.0))
    if c.figure == "time":  # a timed statement: seconds per execution
        return format_duration(side.get("median", 0.0))
    if c.figure in ("wall", "cpu"):
        return format_duration(side.get(c.figure, 0.0))
    return format_duration(side.get("time", 0.0))


def _mark(c: Change) -> str:
    if c.significant:
        return "*"
    return "" if c.tested else "-"


def _sections(cmp: ResultComparison) -> dict[str, list[Change]]:
    """The changes by section, each ordered (listed changes first, by impact)."""
    out: dict[str, list[Change]] = {
        k: [] for k in ("whole", "origins", "functions", "growth", "allocs", "through")
    }
    for c in cmp.ordered():
        if c.file is None:
            out["whole"].append(c)
        elif c.figure == PATH:
            if c.role == ORIGIN:
                out["origins"].append(c)
            elif c.role == EXPLAINED:
                out["through"].append(c)
        elif c.figure == GROWTH:
            out["growth"].append(c)
        elif c.figure in (ALLOCS, BYTES):
            out["allocs"].append(c)
        elif c.figure == OWN:
            out["functions"].append(c)
    inclusive = _inclusive(cmp)
    out["functions"].sort(key=lambda c: _function_rank(c, inclusive.get(_fkey(c))))
    return out


def _fkey(c: Change) -> tuple[str | None, int | None, str]:
    return (c.file, c.line, c.function)


def _function_rank(own: Change, inc: Change | None) -> tuple[bool, bool, float]:
    """Listed changes first, then significant ones, then by time in the run."""
    sig = own.significant or (inc is not None and inc.significant)
    size = max(own.a.get("time", 0.0), own.b.get("time", 0.0))
    if inc is not None:
        size = max(size, inc.a.get("time", 0.0), inc.b.get("time", 0.0))
    return (not own.verdict, not sig, -size)


def _inclusive(cmp: ResultComparison) -> dict[tuple[str | None, int | None, str], Change]:
    return {(c.file, c.line, c.function): c for c in cmp.changes if c.figure == INCLUSIVE}


def _fold_line(rows: Sequence[Change], what: str) -> str:
    """One line for the rows not shown, empty when none: how many ``what``, and why
    (``12 more functions: 9 below the 0.1 % share tested, 3 only in A or B; none
    significant``)."""
    if not rows:
        return ""
    reasons: dict[str, int] = {}
    for c in rows:
        why = (
            c.note if c.note and not c.tested else ("not significant" if not c.significant else "")
        )
        why = "only in A or B" if why in ("only in A", "only in B") else why
        why = why or "significant, beyond the rows shown"
        reasons[why] = reasons.get(why, 0) + 1
    parts = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
    sig = sum(1 for c in rows if c.significant)
    tail = "none significant" if not sig else f"{sig} significant"
    return f"... {len(rows)} more {what}: {parts}; {tail}"


def _shown(rows: list[Change], top: int) -> tuple[list[Change], list[Change]]:
    """The first ``top`` rows (every listed change among them), and the rest."""
    listed = [c for c in rows if c.verdict]
    others = [c for c in rows if not c.verdict]
    keep = max(top - len(listed), 0)
    return listed + others[:keep], others[keep:]


def _counted(cmp: ResultComparison) -> bool:
    """Whether the comparison is of counts (``--counter``), not times."""
    return any(c.a.get("counted") for c in cmp.changes[:1])


def _header(cmp: ResultComparison) -> list[str]:
    what = "processes" if cmp.kind == "timing" else "runs"  # a timing's runs: processes
    how = (
        "counted by valgrind, one run a side decides"
        if _counted(cmp)
        else f"{what} {cmp.runs[0]} and {cmp.runs[1]}; {cmp.confidence:.0%} intervals, "
        f"{cmp.correction}-corrected at alpha {cmp.alpha:g}"
    )
    lines = [f"A {one_line(cmp.names[0])} -> B {one_line(cmp.names[1])} ({cmp.kind}; {how})"]
    lines.extend(f"warning: {w}" for w in cmp.warnings)
    lines.extend(f"note: {n}" for n in cmp.notes)
    return lines


def _line(c: Change, suffix: str, middle: str = "") -> str:
    """One row of the text: the change, its mark, A's and B's amounts, then the label."""
    return (
        f"  {format_change(c):>22} {_mark(c):^3} {_amount(c, c.a):>{W}} "
        f"{_amount(c, c.b):>{W}}{middle}  {label(c)}{suffix}"
    )


def _whole_rows(rows: list[Change]) -> list[str]:
    lines = [f"  {'change':>22} sig {'A':>{W}} {'B':>{W}}  what"]
    return lines + [_line(c, f"  [{c.note}]" if c.note else "") for c in rows]


def _section(
    rows: list[Change], top: int, head: str, row: Callable[[Change], str], what: str
) -> list[str]:
    """A section of the text: its head, ``top`` rows, the rest folded into one line."""
    shown, rest = _shown(rows, top)
    lines = [head, *(row(c) for c in shown)]
    fold = _fold_line(rest, what)
    return [*lines, f"  {fold}"] if fold else lines


def _speed(cmp: ResultComparison) -> str:
    """What the rows of a profile compare: B at A's run speed when a run-wide factor
    was taken out."""
    return ", B at A's run speed" if cmp.factor is not None else ""


def _origin_rows(rows: list[Change], top: int) -> list[str]:
    def row(c: Change) -> str:
        return _line(c, f"  ({_place(c)})" if c.file else "")

    head = f"  {'change':>22} sig {'A':>{W}} {'B':>{W}}  call path"
    return _section(rows, top, head, row, "paths where a change starts")


def _place(c: Change) -> str:
    from .keys import display_name

    name = display_name(c.file or "", c.line or 0, c.function)
    return name[len(one_line(c.function)) + 2 : -1] if name.endswith(")") else name


def _function_rows(rows: list[Change], inclusive: dict[Any, Change], top: int) -> list[str]:
    def row(c: Change) -> str:
        inc = inclusive.get(_fkey(c))
        inc_text = format_change(inc) if inc is not None else ""
        inc_mark = _mark(inc) if inc is not None else ""
        verdict = f"  [{c.verdict}]" if c.verdict else _only(c)
        return _line(c, verdict, f" {inc_text:>22} {inc_mark:^3}")

    head = f"  {'own change':>22} sig {'A own':>{W}} {'B own':>{W}} {'inclusive':>22} sig  function"
    return _section(rows, top, head, row, "functions")


def _only(c: Change) -> str:
    return f"  [{c.note}]" if c.note in ("only in A", "only in B") else ""


def _growth_rows(rows: list[Change], top: int, change: str = "change (of rise)") -> list[str]:
    head = f"  {change:>22} sig {'A':>{W}} {'B':>{W}}  function"
    return _section(rows, top, head, lambda c: _line(c, _only(c)), "functions")


def _through_line(rows: list[Change]) -> str:
    if not rows:
        return ""
    names = ", ".join(label(c) for c in rows[:4])
    more = f" and {len(rows) - 4} more" if len(rows) > 4 else ""
    return (
        f"  ({len(rows)} significant path(s) the changes only run through, their callees "
        f"carrying the change: {names}{more})"
    )


def to_text(cmp: ResultComparison, top: int = TOP, above: float = DEFAULT_ABOVE) -> str:
    """The comparison as text: the verdict first, then each section.

    :param cmp: the comparison
    :param top: rows of each section (the changes listed as worse or better always are)
    :param above: the gate's threshold, a fraction
    """
    verdict = cmp.verdict(above)
    sections = _sections(cmp)
    lines = [f"verdict: {verdict.text}", *_header(cmp), ""]
    lines += _whole_rows(sections["whole"])
    if sections["origins"] or sections["through"]:
        what = "instructions" if _counted(cmp) else "time"
        lines += ["", f"where the changes start (inclusive {what} of each call path{_speed(cmp)}):"]
        lines += _origin_rows(sections["origins"], top) if sections["origins"] else ["  none"]
        through = _through_line(sections["through"])
        lines += [through] if through else []
    if sections["functions"]:
        lines += ["", _functions_title(cmp)]
        lines += _function_rows(sections["functions"], _inclusive(cmp), top)
    if sections["growth"]:
        lines += ["", "memory growth while each function ran (change in % of A's rise):"]
        lines += _growth_rows(sections["growth"], top)
    if sections["allocs"]:
        lines += ["", "allocations per function (counted: calls, and bytes with --count-bytes):"]
        lines += _growth_rows(sections["allocs"], top, "change")
    lines += ["", "('*' significant, '-' not tested)"]
    return "\n".join(map(one_line, lines)) + "\n"  # names from the result files


def _functions_title(cmp: ResultComparison, page: bool = False) -> str:
    """The functions' section's title, of the text or of the page."""
    if _counted(cmp):
        text = "functions (own instructions; inclusive beside)"
        return text.capitalize() if page else f"{text}:"
    if page:
        return f"Functions (own time, inclusive beside{_speed(cmp)})"
    return f"functions (own time; inclusive beside){_speed(cmp)}:"


def to_json(
    cmp: ResultComparison, regressions: list[Change] | None = None, above: float = DEFAULT_ABOVE
) -> str:
    """The comparison as JSON: the verdict, its settings, notes, and ``entries``, one
    per figure (:meth:`.change.Change.to_dict`).

    :param cmp: the comparison
    :param regressions: the regressions beyond the threshold (the verdict's when None)
    :param above: the gate's threshold, a fraction
    """
    verdict = cmp.verdict(above)
    found = list(verdict.regressions) if regressions is None else regressions
    doc: dict[str, Any] = {
        "schema": COMPARISON_SCHEMA,
        "version": COMPARISON_VERSION,
        "verdict": {
            "state": verdict.state,
            "exit_code": verdict.exit_code,
            "text": verdict.text,
            "above": above,
            "runs_needed": verdict.runs_needed,
        },
        **cmp.to_dict(),
        "regressions": [label(c) for c in found],
    }
    # One entry a line: readable, and written by json's C encoder (indent= is pure Python,
    # ten times slower on 20,000 functions).
    head = json.dumps(doc, allow_nan=False)[:-1]
    encode = json.JSONEncoder(allow_nan=False, check_circular=False).encode
    rows = ",\n".join(map(encode, (c.to_dict() for c in cmp.ordered())))
    return head + ', "entries": [\n' + rows + "\n]}\n"


def esc(text: object) -> str:
    """Text for an HTML page, quotes included, on one line.

    :param text: anything
    """
    return escape_text(one_line(str(text)))


_STYLE = """
body{font:13px system-ui,sans-serif;margin:0;color:#222}
main{padding:0 1.5em 1.5em}
.banner{padding:14px 1.5em;font-size:16px;font-weight:600;color:#fff}
.banner.regressed{background:#c62828}.banner.undecided{background:#b26a00}
.banner.unchanged,.banner.improved{background:#2e7d32}
.banner small{display:block;font-weight:400;font-size:12px;opacity:.9;margin-top:3px}
.cols{display:flex;gap:24px;align-items:flex-start;flex-wrap:wrap}
.cols>div{flex:1 1 420px;min-width:0}.cols>div:last-child{flex:1.5 1 640px}
table{font-size:12px}
table{border-collapse:collapse;width:100%;margin-bottom:1em}
th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}
td.what,th.what{text-align:left;white-space:normal;font-family:monospace;overflow-wrap:anywhere;
min-width:16em}
th{background:#f3f3f3}
tr.worse td.chg{background:#f8c9c4;font-weight:bold}
tr.better td.chg{background:#c8dcf8;font-weight:bold}
tr.worse td.what{border-left:4px solid #d33;font-weight:bold}
tr.better td.what{border-left:4px solid #36c;font-weight:bold}
tr.untested{color:#888}
.note{color:#555;margin:2px 0}.warn{color:#8a4b00;margin:2px 0}
h2{font-size:15px;margin:1.2em 0 .4em}
.fold{color:#666;font-style:italic}
"""


def _what(c: Change) -> str:
    text = label(c)
    if c.figure == PATH and c.file:
        text += f" ({_place(c)})"
    return text


def _shows_note(c: Change) -> bool:
    """A note worth a row: why a figure with time on a side was not tested."""
    if not c.note or c.tested:
        return False
    return c.note.startswith("only in") or bool(c.a.get("time") or c.b.get("time"))


def _row(c: Change, extra: str = "") -> str:
    cls = c.verdict or ("" if c.tested else "untested")
    p = "" if c.p_adjusted is None else f"{c.p_adjusted:.2g}"
    note = f' <span class="note">[{esc(c.note)}]</span>' if _shows_note(c) else ""
    return (
        f'<tr class="{cls}"><td class="what">{esc(_what(c))}{note}</td>'
        f'<td class="chg">{esc(format_change(c))}</td>'
        f"<td>{'yes' if c.significant else ''}</td><td>{p}</td>"
        f"<td>{esc(_amount(c, c.a))}</td><td>{esc(_amount(c, c.b))}</td>{extra}</tr>"
    )


_HEAD = (
    "<tr><th class='what'>what</th><th>change (B/A - 1)</th><th>significant</th>"
    "<th>p (Holm)</th><th>A</th><th>B</th>"
)


def _table(title: str, rows: list[Change], top: int, what: str, inclusive: Any = None) -> str:
    if not rows:
        return ""
    shown, rest = _shown(rows, top)
    extra_head = "<th>inclusive</th>" if inclusive is not None else ""
    body = []
    for c in shown:
        extra = ""
        if inclusive is not None:
            inc = inclusive.get(_fkey(c))
            extra = f"<td>{esc(format_change(inc)) if inc is not None else ''}</td>"
        body.append(_row(c, extra))
    fold = _fold_line(rest, what)
    tail = f'<p class="fold">{esc(fold)}</p>' if fold else ""
    return (
        f"<h2>{esc(title)}</h2><table>{_HEAD}{extra_head}</tr>" + "".join(body) + f"</table>{tail}"
    )


def _banner(verdict: Verdict, cmp: ResultComparison) -> str:
    sub = f"A {cmp.names[0]} → B {cmp.names[1]}"
    return (
        f'<div class="banner {esc(verdict.state)}">{esc(verdict.text)}'
        f"<small>{esc(sub)}</small></div>"
    )


def to_html(cmp: ResultComparison, top: int = 100, above: float = DEFAULT_ABOVE) -> str:
    """The comparison as a self-contained HTML page: the verdict in a banner, the
    differential flame graph beside the tables.

    :param cmp: the comparison
    :param top: rows of each table (the listed changes always are)
    :param above: the gate's threshold, a fraction
    """
    from .flame import flame_html

    verdict = cmp.verdict(above)
    sections = _sections(cmp)
    notes = "".join(f"<p class='warn'>warning: {esc(w)}</p>" for w in cmp.warnings)
    notes += "".join(f"<p class='note'>{esc(line)}</p>" for line in _header(cmp)[:1])
    notes += "".join(f"<p class='note'>note: {esc(n)}</p>" for n in cmp.notes)
    tables = (
        _table("The run as a whole", sections["whole"], top, "figures")
        + _table(f"Where the changes start (call paths{_speed(cmp)})", sections["origins"], top,
                 "paths")
        + _table(
            _functions_title(cmp, page=True),
            sections["functions"], top, "functions", _inclusive(cmp),
        )
        + _table("Memory growth while each function ran (% of A's rise)", sections["growth"],
                 top, "functions")
        + _table("Allocations per function (counted: calls, and bytes with --count-bytes)",
                 sections["allocs"], top, "functions")
    )  # fmt: skip
    flame = flame_html(cmp)
    body = f"<div class='cols'><div>{flame}</div><div>{tables}</div></div>" if flame else tables
    title = f"{cmp.names[0]} vs {cmp.names[1]}"
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"
        f"{_banner(verdict, cmp)}<main>{notes}{body}</main></body></html>\n"
    )
