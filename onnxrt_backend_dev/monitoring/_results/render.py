"""Renderers of a :class:`.compare.ResultComparison`: text (sorted by significance and
size, ``+12.3 % ± 2.1``), JSON (one entry per compared figure) and a self-contained HTML
table coloured by change, where only significant changes are coloured. Every text that
comes from a file (function names, paths) is escaped for the page."""

from __future__ import annotations

import json
from typing import Any

from .._format import format_bytes, format_duration, one_line
from .._html import text as escape_text
from .compare import Change, ResultComparison

COMPARISON_SCHEMA = "onnxrt-monitoring-comparison"
COMPARISON_VERSION = 1
# Rows of the text view unless asked otherwise.
TOP = 25


def format_change(c: Change) -> str:
    """``+12.3 % ± 2.1`` (the interval's half width in points), ``+12.3 %`` untested."""
    if c.change is None:
        return "new" if c.note == "only in B" else "n/a"
    text = f"{c.change * 100:+.1f} %"
    if c.tested and c.ci_low is not None and c.ci_high is not None:
        text += f" ± {(c.ci_high - c.ci_low) * 50:.1f}"
    return text


def _amount(c: Change, side: dict[str, float]) -> str:
    if c.figure == "growth":  # a function's memory growth (run results)
        return f"{format_bytes(side['growth'])} ({side['growth_share'] * 100:.1f} %)"
    if "share" in side:  # a function: tested on its share, or paired on its time
        return f"{side['share'] * 100:.2f} % ({format_duration(side['time'])})"
    if c.figure == "peak":
        return format_bytes(side["peak"])
    if c.figure == "wall":
        return format_duration(side["wall"])
    return format_duration(side["median"])


def label(c: Change) -> str:
    """``file:line(function)`` for a function (``memory: file:line(function)`` for its
    memory growth), the name otherwise."""
    if c.file is None:
        return f"{c.section}: {c.function}"
    where = f"{c.file}:{c.line}({c.function})"
    return f"memory: {where}" if c.figure == "growth" else where


def _verdict(c: Change) -> str:
    if c.significant:
        return "*"
    return "" if c.tested else "-"


def _header(cmp: ResultComparison) -> list[str]:
    what = "processes" if cmp.kind == "timing" else "runs"  # a timing's runs: processes
    lines = [
        f"A {cmp.names[0]} -> B {cmp.names[1]} ({cmp.kind}; {what} {cmp.runs[0]} and "
        f"{cmp.runs[1]}; {cmp.confidence:.0%} intervals, {cmp.correction}-corrected "
        f"at alpha {cmp.alpha:g})"
    ]
    lines.extend(f"note: {n}" for n in cmp.notes)
    return lines


def to_text(cmp: ResultComparison, top: int = TOP) -> str:
    """The comparison as text: significant changes first, each group by size.

    :param cmp: the comparison
    :param top: rows shown at most (the significant ones always are)
    :return: the text
    """
    rows = cmp.ordered()
    shown = [c for i, c in enumerate(rows) if c.significant or i < top]
    lines = _header(cmp)
    lines.append("")
    lines.append(f"  {'change':>16} sig {'A':>22} {'B':>22}  what")
    for c in shown:
        note = f"  [{c.note}]" if c.note and not c.tested else ""
        lines.append(
            f"  {format_change(c):>16} {_verdict(c):^3} {_amount(c, c.a):>22} "
            f"{_amount(c, c.b):>22}  {label(c)}{note}"
        )
    if len(rows) > len(shown):
        lines.append(f"  ... {len(rows) - len(shown)} more, none significant")
    lines.append("")
    significant = [c for c in rows if c.significant]
    worse = sum(1 for c in significant if (c.change or 0) > 0)
    if not cmp.judged:
        one = "process" if cmp.kind == "timing" else "run"
        lines.append(f"verdict: significance not judged (a single {one} on a side)")
    else:
        lines.append(
            f"verdict: {len(significant)} significant change(s): {worse} worse, "
            f"{len(significant) - worse} better ('*' significant, '-' not tested)"
        )
    return "\n".join(map(one_line, lines)) + "\n"  # names from the result files


def to_json(cmp: ResultComparison, regressions: list[Change] | None = None) -> str:
    """The comparison as JSON: its settings, notes, and ``entries`` (one per figure, with
    ``function``, ``file``, ``line``, ``a``, ``b``, ``change``, ``ci_low``, ``ci_high``,
    ``significant``...).

    :param cmp: the comparison
    :param regressions: the regressions beyond the gate's threshold, listed by label
    :return: the JSON text
    """
    doc: dict[str, Any] = {
        "schema": COMPARISON_SCHEMA,
        "version": COMPARISON_VERSION,
        **cmp.to_dict(entries=False),
    }
    if regressions is not None:
        doc["regressions"] = [label(c) for c in regressions]
    # One entry a line: readable, and written by json's C encoder (indent= is pure Python,
    # ten times slower on 20,000 functions). Each entry is encoded from the change's own
    # fields (vars: the dataclass's dictionary, read only), not a copy of them.
    head = json.dumps(doc, allow_nan=False)[:-1]
    # One encoder (dumps makes one a call), without the cycle check: the entries are
    # plain dicts built here, and checking each container costs a fifth of the time.
    encode = json.JSONEncoder(allow_nan=False, check_circular=False).encode
    rows = ",\n".join(map(encode, map(vars, cmp.ordered())))
    return head + ', "entries": [\n' + rows + "\n]}\n"


_STYLE = """
body{font:13px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;width:100%}
th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}
td.what,th.what{text-align:left;white-space:normal;font-family:monospace}
th{background:#f3f3f3;position:sticky;top:0}
tr.worse td.chg{background:#f8c9c4;font-weight:bold}
tr.better td.chg{background:#c8ecc9;font-weight:bold}
tr.worse td.what{border-left:4px solid #d33}
tr.better td.what{border-left:4px solid #2a2}
tr.untested{color:#888}
.note{color:#555}
.key span{display:inline-block;padding:1px 8px;margin-right:8px}
"""


def _row(c: Change) -> str:
    cls = ("worse" if (c.change or 0) > 0 else "better") if c.significant else ""
    cls = cls or ("" if c.tested else "untested")
    p = "" if c.p_adjusted is None else f"{c.p_adjusted:.2g}"
    note = f' <span class="note">[{escape_text(c.note)}]</span>' if c.note and not c.tested else ""
    return (
        f'<tr class="{cls}"><td class="chg">{escape_text(format_change(c))}</td>'
        f"<td>{'yes' if c.significant else ''}</td><td>{p}</td>"
        f"<td>{escape_text(_amount(c, c.a))}</td><td>{escape_text(_amount(c, c.b))}</td>"
        f'<td class="what">{escape_text(label(c))}{note}</td></tr>'
    )


def to_html(cmp: ResultComparison, top: int = 500) -> str:
    """The comparison as a self-contained HTML page: a table ordered as the text, only
    significant changes coloured (red worse, green better).

    :param cmp: the comparison
    :param top: rows shown at most (the significant ones always are)
    :return: the page
    """
    rows = cmp.ordered()
    shown = [c for i, c in enumerate(rows) if c.significant or i < top]
    head = "".join(f"<p class='note'>{escape_text(line)}</p>" for line in _header(cmp))
    more = (
        f"<p class='note'>... {len(rows) - len(shown)} more rows, none significant</p>"
        if len(rows) > len(shown)
        else ""
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{escape_text(cmp.names[0])} vs {escape_text(cmp.names[1])}</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>Comparison</h1>{head}"
        "<p class='key'><span style='background:#f8c9c4'>significantly worse</span>"
        "<span style='background:#c8ecc9'>significantly better</span>"
        "<span style='color:#888'>not tested</span> uncoloured: no significant change</p>"
        "<table><tr><th>change (B/A - 1)</th><th>significant</th><th>p (Holm)</th>"
        "<th>A</th><th>B</th><th class='what'>what</th></tr>"
        + "".join(_row(c) for c in shown)
        + f"</table>{more}</body></html>\n"
    )
