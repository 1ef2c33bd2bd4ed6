"""The report as a terminal summary of at most 30 lines."""

from __future__ import annotations

from .._format import cut_source, format_bytes, format_duration, one_line
from .._memory.registry import ROLES
from .._memory.series import CONTEXT_WORDS
from .._sampling.view import short_file
from .model import Allocations, AllocLine, Device, LineRow, Report, Site, check_report

MAX_LINES = 30
_TOP_FUNCTIONS = 6
_TOP_LINES = 5
_TOP_PARTS = 4
_TOP_ALLOC = 4
_TOP_LEAKS = 3
_TOP_CHILDREN = 3
# Characters of a hot line's source shown (cut at a token's end).
_SOURCE_WIDTH = 60


def signed(n: float) -> str:
    """Bytes with their sign (``+1.0 MiB``)."""
    return ("+" if n >= 0 else "-") + format_bytes(abs(n))


def place_text(site: Site | None, called: str = "") -> str:
    """``function (file:line)``, ``calling`` the library function when given."""
    if site is None:
        return "no Python frame"
    text = f"{site.function} ({short_file(site.file)}:{site.line})"
    return f"{text} calling {called}" if called else text


def tool_note(value: float, tool: float) -> str:
    """The sentence explaining a peak taken off the tool's own memory in the program.

    :param value: the peak, bytes
    :param tool: what was taken off, bytes
    :return: one line
    """
    return (
        f"(the process's high-water mark {format_bytes(value + tool)} less "
        f"{format_bytes(tool)} of this tool's own memory in it)"
    )


def built_by(report: Report) -> str:
    """What built the peak, in words (nothing, when the memory never rose over its start).

    :param report: the report
    """
    peak = report.peak
    if peak.site is None and not report.composition:
        return "nothing grew while observed: the peak is the memory at the start"
    return f"built by {place_text(peak.site, peak.called)}"


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
        f"  {built_by(report)}",
    ]
    if peak.tool:
        lines.insert(3, f"  {tool_note(peak.value, peak.tool)}")
    if peak.reached is not None and peak.reached != peak.site:
        lines.append(f"  reached in {place_text(peak.reached)}")
    lines.extend(device_line(d) for d in report.devices)  # every one: never cut
    lines.extend(_children(report))
    if report.ending.kind in ("signal", "lost", "os_exit") and report.ending.last_site:
        lines.append(f"  allocating at the end: {place_text(report.ending.last_site)}")
    return lines


def _children(report: Report) -> list[str]:
    """The child processes' own peaks (never in the program's: ``wait4`` would merge
    them), the highest three."""
    curves = sorted((c for c in report.curves[1:] if c.name.startswith("rss ")),
                    key=lambda c: -c.peak)  # fmt: skip
    lines = []
    for c in curves[:_TOP_CHILDREN]:
        pid, _, command = c.name[4:].partition(": ")
        named = f"{pid} ({cut_source(command, 50)})" if command else pid
        lines.append(f"  child {named}: its own peak RSS {format_bytes(c.peak)} at "
                     f"{format_duration(c.peak_time)}")  # fmt: skip
    if len(curves) > _TOP_CHILDREN:
        lines.append(f"  and {len(curves) - _TOP_CHILDREN} more child processes")
    return lines


def device_line(device: Device) -> str:
    """One device channel, named by what it measures: ``nvml:gpu0:process (this
    process): peak 3.40 GiB, begin 0 B, end 512 MiB, of which 512 MiB CUDA context...``.

    :param device: the device
    :return: one line
    """
    role = ROLES.get(device.role, "")
    text = (
        f"{device.name}{f' ({role})' if role else ''}: peak {format_bytes(device.peak)}, "
        f"begin {format_bytes(device.begin)}, end {format_bytes(device.end)}"
    )
    if device.context is not None:
        text += f", of which {format_bytes(device.context)} {CONTEXT_WORDS}"
    if device.site is not None:
        text += f"; the peak rose in {place_text(device.site)}"
    return text


def _parts(report: Report) -> list[str]:
    if not report.composition:
        return []
    total = report.peak.value - report.peak.start
    lines = [f"the peak is made of ({signed(total)} over the start):"]
    lines.extend(f"  {signed(p.bytes):>10}  {p.label}" for p in report.composition[:_TOP_PARTS])
    return lines


def _err(value: float, err: float) -> str:
    """`` ±4%`` when the error bar says something, '' for an exact figure."""
    if value <= 0 or err <= 0.005 * value:
        return ""
    return f" ±{min(err / value, 9.99):.0%}"


def _alloc_row(row: AllocLine, value: float, err: float) -> str:
    site = row.site
    where = f"{short_file(site.file)}:{site.line} {site.function}" if site.file else site.function
    via = f" [{row.native}]" if row.native else ""
    text = f": {cut_source(row.source, 50)}" if row.source else ""
    return f"  {format_bytes(value):>9}{_err(value, err):<5} {where}{text}{via}"


def allocation_lines(alloc: Allocations | None) -> list[str]:
    """The allocations: the heap's exact peak, what is live at it by line, the leaks
    (``run``'s summary; ``spy --where`` prints them too).

    :param alloc: the section
    :return: the lines, none without a section
    """
    if alloc is None:
        return []
    rate = f"1 per {format_bytes(alloc.mean)}" if alloc.mean > 1 else "every allocation"
    lines = [
        f"heap peak {format_bytes(alloc.peak)} at {format_duration(alloc.peak_time)} "
        f"(allocated {format_bytes(alloc.allocated)} in {alloc.count:,} calls; "
        f"{alloc.samples:,} sampled, {rate})",
    ]
    if alloc.lines:
        lines.append("live at the peak, by line:")
        lines.extend(_alloc_row(r, r.live_peak, r.live_peak_err) for r in alloc.lines[:_TOP_ALLOC])
    if alloc.leaks:
        lines.append("still live at the end (leak candidates):")
        lines.extend(_alloc_row(r, r.live_end, r.live_end_err) for r in alloc.leaks[:_TOP_LEAKS])
    else:
        lines.append("still live at the end (leak candidates): none above 1 % of the peak")
    return [one_line(line) for line in lines]  # names from the program: one row each


def _functions(report: Report) -> list[str]:
    total = report.total_time or 1.0
    # The heaviest rows of the tree below the roots (a root is the whole program).
    top = _TOP_FUNCTIONS - (2 if report.allocations is not None else 0)
    rows = sorted(
        (r for r in report.tree if r.depth >= 1 and r.site.file),
        key=lambda r: -r.time,
    )[:top]
    if not rows:
        return []
    lines = ["functions: time   RSS: net   to peak   highest"]
    lines.extend(
        f"  {r.time / total:6.1%} {signed(r.net):>10} {signed(r.to_peak):>10} "
        f"{format_bytes(r.highest):>9}  {r.site.function} ({short_file(r.site.file)}:{r.site.line})"
        for r in rows
    )
    return lines


def _hot_lines(report: Report) -> list[str]:
    total = report.total_time or 1.0
    rows = report.lines[: _TOP_LINES - (2 if report.allocations is not None else 0)]
    if not rows:
        return []
    split = any(any(r.split) for r in rows)
    pool = any(len(r.split) > 4 for r in rows)  # a pool's CPU while the line ran: 280 %
    head = "hot lines: time   RSS to peak" + ("   py  nat  sys wait" if split else "")
    lines = [head + (" pool" if pool else "") + (" (% of the line's time)" if split else "")]
    cell = " {:4d}" if split else ""
    lines.extend(
        f"  {r.time / total:6.1%} {signed(r.to_peak):>10}{split_text(r, cell)}"
        f"{f' {pool_share(r):4d}' if pool else ''}  "
        f"{short_file(r.site.file)}:{r.site.line} {cut_source(r.source, _SOURCE_WIDTH)}"
        for r in rows
    )
    return lines


def split_text(row: LineRow, cell: str) -> str:
    """The shares of a line's time in Python, native code, the kernel and waiting, each
    percentage through ``cell`` (``" {:4d}"``; empty: no text)."""
    from .._sampling.view import split_shares

    shares = split_shares(row.time, sum(row.split[:3]), *row.split[:3])
    return "".join(cell.format(round(100 * x)) for x in shares)


def pool_share(row: LineRow) -> int:
    """The pool's CPU over the line's time, percent (280: 2.8 cores)."""
    seconds = row.split[4] if len(row.split) > 4 else 0.0
    return round(100 * seconds / row.time) if row.time > 0 else 0


def to_text(report: Report) -> str:
    """The summary: header (every device channel among it), what the peak is made of,
    the heaviest functions and lines.

    :param report: the report
    :return: at most 30 lines (more only when the header's device lines need them: they
        are never cut), ending with a newline
    """
    head = _header(check_report(report))
    # What the peak is made of: what is live at it when allocations were tracked, the
    # RSS growth up to it otherwise.
    alloc = report.allocations
    parts = _parts(report) if alloc is None else allocation_lines(alloc)
    rest = [*parts, *_functions(report), *_hot_lines(report)]
    rest.extend(f"note: {n}" for n in report.notes)
    if alloc is not None:
        rest.extend(f"note: {n}" for n in alloc.notes)
    room = max(MAX_LINES - len(head), 1)
    if len(rest) > room:
        rest = [*rest[: room - 1], f"... {len(rest) - room + 1} more lines"]
    lines = [one_line(line) for line in (*head, *rest)]  # names and notes from the program
    return "\n".join(lines) + "\n"
