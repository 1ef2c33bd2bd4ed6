"""The report as a terminal summary of at most 30 lines."""

from __future__ import annotations

from .._format import cut_source, format_bytes, format_duration, one_line
from .._sampling.view import short_file
from .model import Report, Site

MAX_LINES = 30
_TOP_FUNCTIONS = 6
_TOP_LINES = 5
_TOP_PARTS = 4
# Characters of a hot line's source shown (cut at a token's end).
_SOURCE_WIDTH = 60


def _signed(n: float) -> str:
    return ("+" if n >= 0 else "-") + format_bytes(abs(n))


def _where(site: Site | None, called: str = "") -> str:
    if site is None:
        return "no Python frame"
    text = f"{site.function} ({short_file(site.file)}:{site.line})"
    return f"{text} calling {called}" if called else text


def tool_note(value: float, tool: float) -> str:
    """The sentence explaining a peak taken off the tool's own start-up memory.

    :param value: the peak, bytes
    :param tool: what was taken off, bytes
    :return: one line
    """
    return (
        f"(the process's high-water mark {format_bytes(value + tool)} less "
        f"{format_bytes(tool)} of this tool's own start-up memory)"
    )


def _header(report: Report) -> list[str]:
    cpu = "CPU unknown"
    if report.cpu is not None:
        cpu = f"CPU {format_duration(report.cpu)} ({report.utilisation or 0.0:.0%} of one core)"
    peak = report.peak
    lines = [
        f"{report.program}: {report.ending.detail}",
        f"wall {format_duration(report.wall)}, {cpu}, {report.n_ticks} ticks every "
        f"{format_duration(report.interval)}",
        f"peak RSS {format_bytes(peak.value)} ({peak.source}) at {format_duration(peak.time)}, "
        f"start {format_bytes(peak.start)}, end {format_bytes(report.end_rss)}",
        f"  built by {_where(peak.site, peak.called)}",
    ]
    if peak.tool:
        lines.insert(3, f"  {tool_note(peak.value, peak.tool)}")
    if peak.reached is not None and peak.reached != peak.site:
        lines.append(f"  reached in {_where(peak.reached)}")
    lines.extend(
        f"{d.name}: peak {format_bytes(d.peak)}, begin {format_bytes(d.begin)}, "
        f"end {format_bytes(d.end)}"
        for d in report.devices[:2]
    )
    if report.ending.kind in ("signal", "lost", "os_exit") and report.ending.last_site:
        lines.append(f"  allocating at the end: {_where(report.ending.last_site)}")
    return lines


def _parts(report: Report) -> list[str]:
    if not report.composition:
        return []
    total = report.peak.value - report.peak.start
    lines = [f"the peak is made of ({_signed(total)} over the start):"]
    lines.extend(f"  {_signed(p.bytes):>10}  {p.label}" for p in report.composition[:_TOP_PARTS])
    return lines


def _functions(report: Report) -> list[str]:
    total = report.total_time or 1.0
    # The heaviest rows of the tree below the roots (a root is the whole program).
    rows = sorted(
        (r for r in report.tree if r.depth >= 1 and r.site.file),
        key=lambda r: -r.time,
    )[:_TOP_FUNCTIONS]
    if not rows:
        return []
    lines = ["functions: time   net growth  to peak   highest RSS"]
    lines.extend(
        f"  {r.time / total:6.1%} {_signed(r.net):>10} {_signed(r.to_peak):>10} "
        f"{format_bytes(r.highest):>9}  {r.site.function} ({short_file(r.site.file)}:{r.site.line})"
        for r in rows
    )
    return lines


def _hot_lines(report: Report) -> list[str]:
    total = report.total_time or 1.0
    rows = report.lines[:_TOP_LINES]
    if not rows:
        return []
    lines = ["hot lines: time   to peak"]
    lines.extend(
        f"  {r.time / total:6.1%} {_signed(r.to_peak):>10}  {short_file(r.site.file)}:"
        f"{r.site.line} {cut_source(r.source, _SOURCE_WIDTH)}"
        for r in rows
    )
    return lines


def to_text(report: Report) -> str:
    """The summary: header, what the peak is made of, the heaviest functions and lines.

    :param report: the report
    :return: at most 30 lines, ending with a newline
    """
    lines = [*_header(report), *_parts(report), *_functions(report), *_hot_lines(report)]
    lines.extend(f"note: {n}" for n in report.notes)
    lines = [one_line(line) for line in lines]  # names and notes from the program
    if len(lines) > MAX_LINES:
        lines = [*lines[: MAX_LINES - 1], f"... {len(lines) - MAX_LINES + 1} more lines"]
    return "\n".join(lines) + "\n"
