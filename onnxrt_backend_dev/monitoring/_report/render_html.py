"""The report as one self-contained HTML page: no script, no network, only inline SVG
and CSS, so it opens offline and at once. Every text from the program (names, files,
source lines) is escaped."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from .._format import format_bytes, format_duration
from .._html import text as _e
from .._memory.registry import ROLES
from .._memory.series import CONTEXT_WORDS
from .._sampling.view import short_file
from .axis import byte_ticks, time_ticks
from .model import (
    Allocations,
    AllocLine,
    AllocNode,
    Curve,
    Part,
    Report,
    Site,
    Span,
    check_report,
)
from .render_text import built_by, place_text, pool_share, signed, split_text, tool_note

WIDTH = 1200  # the plot area, in SVG units (the SVG scales to the page)
LEFT = 70
PLOT_HEIGHT = 240
ROW_HEIGHT = 22
_PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
# One colour per curve (the RSS, then every device channel), dashed after the tenth.
_CURVE_COLOURS = (
    "#1f4e9c", "#c0392b", "#27ae60", "#8e44ad", "#d35400",
    "#16a085", "#7f8c8d", "#e84393", "#b8860b", "#2c3e50",
)  # fmt: skip
_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:22px 0 6px}
.facts{display:flex;flex-wrap:wrap;gap:8px 28px;margin:8px 0}
.facts div b{display:block;font-size:18px}
.bad{color:#b00020} .note{color:#555}
table{border-collapse:collapse;font-size:13px} td,th{padding:2px 8px;text-align:right}
th{background:#f0f0f0;position:sticky;top:0} td.l,th.l{text-align:left}
tr:nth-child(even) td{background:#fafafa} code{font:12px monospace;white-space:pre}
td{white-space:nowrap}
svg text{font:11px system-ui,sans-serif} .lib{color:#777}
"""


def _colour(label: str) -> str:
    return _PALETTE[zlib.crc32(label.encode("utf-8", "replace")) % len(_PALETTE)]


def _at(value: float, t: float) -> str:
    return f"{format_bytes(value)} at {format_duration(t)}"


def _header(report: Report) -> str:
    peak = report.peak
    cpu = "unknown"
    if report.cpu is not None:
        cpu = f"{format_duration(report.cpu)} ({report.utilisation or 0.0:.0%})"
    facts = [
        ("wall", format_duration(report.wall)),
        ("CPU (utilisation)", cpu),
        (f"peak RSS ({peak.source})", _at(peak.value, peak.time)),
        ("start → end RSS", f"{format_bytes(peak.start)} → {format_bytes(report.end_rss)}"),
    ]
    if peak.tool:
        facts.append(("process high-water mark", format_bytes(peak.value + peak.tool)))
    alloc = report.allocations
    if alloc is not None:
        facts.append(("heap peak (allocations)", _at(alloc.peak, alloc.peak_time)))
    cells = "".join(f"<div>{_e(k)}<b>{_e(v)}</b></div>" for k, v in facts)
    kind = report.ending.kind
    cls = "" if kind == "exit" and report.ending.code == 0 else ' class="bad"'
    parts = [
        f"<h1>{_e(report.program)}</h1>",
        f"<div{cls}>{_e(report.ending.detail)}</div>",
        f'<div class="facts">{cells}</div>',
        f"<div>peak {_e(built_by(report))}</div>",
    ]
    if peak.tool:
        note = f"RSS figures {tool_note(peak.value, peak.tool)}"
        parts.append(f'<div class="note">{_e(note)}</div>')
    if peak.reached is not None and peak.reached != peak.site:
        parts.append(f"<div>peak reached in {_e(place_text(peak.reached))}</div>")
    if kind in ("signal", "lost", "os_exit") and report.ending.last_site is not None:
        parts.append(
            f"<div class=bad>allocating at the end: {_e(place_text(report.ending.last_site))}</div>"
        )
    parts.extend(f'<div class="note">note: {_e(n)}</div>' for n in report.notes)
    parts.append(
        f'<div class="note">{report.n_ticks} ticks every {_e(format_duration(report.interval))}'
        f", pid {report.pid}, started {_e(report.started)}</div>"
    )
    return "\n".join(parts)


def _devices(report: Report) -> str:
    """Every device channel the probes measured, per-process ones included, named by
    what they measure (the CUDA context apart where it was measured)."""
    if not report.devices:
        return ""
    rows = []
    for d in report.devices:
        notes = []
        if d.context is not None:
            notes.append(f"of which {format_bytes(d.context)} {CONTEXT_WORDS}")
        if d.site is not None:
            notes.append(f"the peak rose in {place_text(d.site)}")
        rows.append(
            f'<tr><td class="l">{_e(d.name)}</td><td class="l">{_e(ROLES.get(d.role, ""))}</td>'
            f"<td><b>{_e(format_bytes(d.peak))}</b></td><td>{_e(format_bytes(d.begin))}</td>"
            f'<td>{_e(format_bytes(d.end))}</td><td class="l">{_e("; ".join(notes))}</td></tr>'
        )
    return (
        '<h2>Devices</h2><table class="devices"><tr><th class="l">channel</th>'
        '<th class="l">measures</th><th>peak</th><th>begin</th><th>end</th>'
        '<th class="l"></th></tr>' + "".join(rows) + "</table>"
    )


def _x(t: float, wall: float) -> float:
    return LEFT + WIDTH * (t / wall if wall > 0 else 0.0)


def _memory_svg(report: Report, wall: float) -> str:
    curves = [c for c in report.curves if c.values]
    if not curves:
        return "<p>no memory measure</p>"
    top = max(max(c.values) for c in curves) or 1.0
    top = max(top, report.peak.value) * 1.08

    def y(v: float) -> float:
        return 10 + PLOT_HEIGHT * (1 - v / top)

    out = [
        f'<svg viewBox="0 0 {LEFT + WIDTH + 20} {PLOT_HEIGHT + 40}" width="100%" '
        'role="img" aria-label="memory over time">'
    ]
    for v, text in byte_ticks(top, 5):  # y grid and labels: round values, one unit
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + WIDTH}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
            f'stroke="#ddd"/><text x="{LEFT - 4}" y="{y(v) + 4:.1f}" text-anchor="end">'
            f"{_e(text)}</text>"
        )
    out.extend(_time_axis(wall, PLOT_HEIGHT + 24))
    for i, curve in enumerate(curves):
        out.append(_polyline(curve, wall, y, _CURVE_COLOURS[i % len(_CURVE_COLOURS)], i))
    peak = report.peak
    px, py = _x(peak.time, wall), y(peak.value)
    label = f"peak {format_bytes(peak.value)}: {place_text(peak.site)}"
    anchor = "end" if px > LEFT + WIDTH * 0.6 else "start"
    dx = -8 if anchor == "end" else 8
    out.append(
        f'<circle cx="{px:.1f}" cy="{py:.1f}" r="5" fill="#e15759" stroke="#fff"/>'
        f'<text x="{px + dx:.1f}" y="{max(py - 6, 12):.1f}" text-anchor="{anchor}" '
        f'font-weight="bold" fill="#b00020">{_e(label)}</text>'
    )
    legend = "".join(
        f'<span style="color:{_CURVE_COLOURS[i % len(_CURVE_COLOURS)]}">'
        f"{'&#9632;' if i < len(_CURVE_COLOURS) else '&#9482;'} {_e(c.name)} "
        f"(peak {_e(format_bytes(c.peak))}, {_e(c.source)})</span> "
        for i, c in enumerate(curves)
    )
    return "\n".join(out) + f"</svg><div>{legend}</div>"


def _time_axis(wall: float, y: float) -> list[str]:
    """Round times (1-2-5 steps, one unit) from 0, each with a short tick mark."""
    out = []
    for t, label in time_ticks(wall):
        x = _x(t, wall)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y - 14:.1f}" y2="{y - 10:.1f}" '
            f'stroke="#999"/><text x="{x:.1f}" y="{y:.1f}" text-anchor="middle">{_e(label)}</text>'
        )
    return out


def _polyline(curve: Curve, wall: float, y: object, colour: str, index: int = 0) -> str:
    assert callable(y)
    points = " ".join(
        f"{_x(t, wall):.1f},{y(v):.1f}" for t, v in zip(curve.times, curve.values, strict=True)
    )
    dash = ' stroke-dasharray="6 3"' if index >= len(_CURVE_COLOURS) else ""
    return f'<polyline fill="none" stroke="{colour}" stroke-width="1.5"{dash} points="{points}"/>'


def _timeline_svg(spans: Sequence[Span], wall: float) -> str:
    height = 2 * ROW_HEIGHT + 30
    out = [
        f'<svg viewBox="0 0 {LEFT + WIDTH + 20} {height}" width="100%" role="img" '
        'aria-label="which function ran when">',
        f'<text x="{LEFT - 4}" y="{ROW_HEIGHT - 6}" text-anchor="end">outer</text>',
        f'<text x="{LEFT - 4}" y="{2 * ROW_HEIGHT - 6}" text-anchor="end">inner</text>',
    ]
    for span in spans:
        x0, x1 = _x(span.start, wall), _x(span.end, wall)
        w = max(x1 - x0, 0.5)
        y0 = 2 + span.row * ROW_HEIGHT
        out.append(
            f'<rect x="{x0:.1f}" y="{y0}" width="{w:.1f}" height="{ROW_HEIGHT - 4}" '
            f'fill="{_colour(span.label)}"><title>{_e(span.label)} '
            f"{_e(format_duration(span.start))}–{_e(format_duration(span.end))}</title></rect>"
        )
        if w > 7 * len(span.label):
            y1 = y0 + ROW_HEIGHT - 9
            out.append(f'<text x="{x0 + 3:.1f}" y="{y1}" fill="#fff">{_e(span.label)}</text>')
    out.extend(_time_axis(wall, 2 * ROW_HEIGHT + 18))
    return "\n".join(out) + "</svg>"


def _composition(parts: Sequence[Part], total: float) -> str:
    if not parts:
        return "<p>nothing grew up to the peak</p>"
    positive = [p for p in parts if p.bytes > 0]
    scale = sum(p.bytes for p in positive) or 1.0
    out = [f'<svg viewBox="0 0 {LEFT + WIDTH + 20} 40" width="100%" role="img" aria-label="peak">']
    x = float(LEFT)
    for part in positive:
        w = WIDTH * part.bytes / scale
        out.append(
            f'<rect x="{x:.1f}" y="4" width="{w:.1f}" height="28" fill="{_colour(part.label)}">'
            f"<title>{_e(part.label)}: {_e(signed(part.bytes))}</title></rect>"
        )
        if w > 6 * min(len(part.label), 40):
            out.append(f'<text x="{x + 4:.1f}" y="22" fill="#fff">{_e(part.label[:40])}</text>')
        x += w
    out.append("</svg>")
    rows = "".join(
        f'<tr><td><span style="color:{_colour(p.label)}">&#9632;</span> {_e(signed(p.bytes))}'
        f"</td><td>{p.bytes / total if total else 0.0:.1%}</td>"
        f'<td class="l">{_e(p.label)}</td></tr>'
        for p in parts
    )
    out.append(
        f"<table><tr><th>growth to peak</th><th>share</th><th class=l>function</th></tr>"
        f"{rows}<tr><td><b>{_e(signed(total))}</b></td><td></td>"
        f"<td class=l>peak − start</td></tr></table>"
    )
    return "\n".join(out)


ICICLE_ROW = 20
MAX_ICICLE_DEPTH = 40
_WARM = ("#f4a261", "#e9c46a", "#f6bd60", "#f7a072", "#eddea4", "#f28482", "#ffb4a2")


def _box_colour(site: Site) -> str:
    """A user frame in a warm colour of its function, a library frame grey, a native
    library's box blue."""
    if site.function.startswith("[") and not site.file:
        return "#8ab6d6"
    if site.library:
        return "#d4d4d4"
    return _WARM[zlib.crc32(site.function.encode("utf-8", "replace")) % len(_WARM)]


def _icicle(nodes: tuple[AllocNode, ...], total: float) -> str:
    """What is live at the peak as an icicle (memray's flame graph, top down): each box
    a frame, as wide as the bytes live at the peak below it."""
    if not nodes or total <= 0:
        return "<p>nothing live at the peak was sampled</p>"
    depth = min(max(n.depth for n in nodes) + 1, MAX_ICICLE_DEPTH)
    out = [
        f'<svg viewBox="0 0 {LEFT + WIDTH + 20} {depth * ICICLE_ROW + 4}" width="100%" '
        'role="img" aria-label="what is live at the peak">'
    ]
    cursor: dict[int, float] = {-1: float(LEFT)}  # next free x under each node
    for i, node in enumerate(nodes):
        x = cursor.get(node.parent, float(LEFT))
        w = WIDTH * node.bytes / total
        cursor[node.parent] = x + w
        cursor[i] = x
        if node.depth >= MAX_ICICLE_DEPTH or w < 0.3:
            continue
        site = node.site
        name = f"{site.function}:{site.line}" if site.file else site.function
        where = f" ({site.file}:{site.line})" if site.file else ""
        err = f" ±{format_bytes(node.err)}" if node.err > 0.005 * node.bytes else ""
        hidden = f", {node.hidden}" if node.hidden else ""
        share = f"{node.bytes / total:.1%}{hidden}"
        title = f"{site.function}{where}: {format_bytes(node.bytes)}{err} ({share})"
        if node.source:
            title += f"\n{node.source}"
        y = 2 + node.depth * ICICLE_ROW
        out.append(
            f'<rect x="{x:.1f}" y="{y}" width="{max(w - 0.5, 0.3):.1f}" height="{ICICLE_ROW - 2}" '
            f'fill="{_box_colour(site)}"><title>{_e(title)}</title></rect>'
        )
        size = format_bytes(node.bytes)
        for label in (f"{name} {node.source} {size}", f"{name} {size}", name):
            if w > 6.5 * len(label):
                out.append(f'<text x="{x + 3:.1f}" y="{y + ICICLE_ROW - 7}">{_e(label)}</text>')
                break
    out.append("</svg>")
    return "\n".join(out)


def _err(value: float, err: float) -> str:
    return f" ±{format_bytes(err)}" if value > 0 and err > 0.005 * value else ""


def _alloc_table(rows: tuple[AllocLine, ...], columns: tuple[str, ...]) -> str:
    """Lines with the columns asked for (``live_peak``, ``allocated``, ``temporary``,
    ``live_end``), each with its error bar where it has one."""
    heads = {
        "live_peak": "live at the peak", "allocated": "allocated", "temporary": "temporary",
        "live_end": "live at the end",
    }  # fmt: skip
    cells = []
    for r in rows:
        figures = "".join(
            f"<td>{_e(format_bytes(getattr(r, c)))}"
            f"{_e(_err(getattr(r, c), getattr(r, f'{c}_err', 0.0)))}</td>"
            for c in columns
        )
        where = f"{r.site.file}:{r.site.line}" if r.site.file else ""
        native = (r.native or "the interpreter") + (f" via {r.called}" if r.called else "")
        cells.append(
            f'<tr>{figures}<td class="l">{_e(where)}</td>'
            f'<td class="l">{_e(r.site.function)}</td><td class="l"><code>{_e(r.source)}</code>'
            f'</td><td class="l note">{_e(native)}</td></tr>'
        )
    head = "".join(f"<th>{heads[c]}</th>" for c in columns)
    return (
        f'<table><tr>{head}<th class="l">line</th><th class="l">function</th>'
        f'<th class="l">source</th><th class="l">native library, call</th></tr>'
        + "".join(cells)
        + "</table>"
    )


def _allocations(alloc: Allocations) -> list[str]:
    rate = f"one per {format_bytes(alloc.mean)} on average" if alloc.mean > 1 else "every one"
    estimate = f"{format_bytes(alloc.live_peak)}{_err(alloc.live_peak, alloc.live_peak_err)}"
    intro = (
        f"Bytes the program allocated (malloc and its kin, anonymous mmap) and still held "
        f"at the heap's exact peak, {_at(alloc.peak, alloc.peak_time)}: estimated from "
        f"{alloc.samples:,} sampled allocations ({rate}; the samples add up to {estimate}), "
        f"each line with its 95 % error bar. {format_bytes(alloc.allocated)} allocated in "
        f"{alloc.count:,} calls."
    )
    total = sum(n.bytes for n in alloc.flame if n.parent < 0) or alloc.peak
    parts = [
        "<h2>What is live at the peak (allocations)</h2>",
        f'<p class="note">{_e(intro)}</p>',
        _icicle(alloc.flame, total),
        _alloc_table(alloc.lines, ("live_peak", "allocated", "temporary", "live_end")),
        "<h2>Still live at the end (leak candidates)</h2>",
    ]
    if alloc.leaks:
        parts.append(_alloc_table(alloc.leaks, ("live_end", "allocated")))
    else:
        parts.append("<p>none above 1 % of the peak (what imports allocated left out)</p>")
    if alloc.temporaries:
        parts.append("<h2>Temporary allocations (freed at once, by line)</h2>")
        parts.append(_alloc_table(alloc.temporaries, ("temporary", "allocated")))
    if alloc.allocating:
        parts.append("<h2>Allocating lines (bytes allocated over the run)</h2>")
        parts.append(_alloc_table(alloc.allocating, ("allocated", "temporary", "live_peak")))
    parts.extend(f'<div class="note">note: {_e(n)}</div>' for n in alloc.notes)
    return parts


def _tree(report: Report) -> str:
    total = report.total_time or 1.0
    rows = []
    for r in report.tree:
        cls = ' class="l lib"' if r.site.library else ' class="l"'
        where = f"{short_file(r.site.file)}:{r.site.line}" if r.site.file else ""
        hidden = f' <span class="note">{_e(r.hidden)}</span>' if r.hidden else ""
        rows.append(
            f"<tr><td>{r.time / total:.1%}</td><td>{r.self_time / total:.1%}</td>"
            f"<td>{_e(signed(r.net))}</td><td>{_e(signed(r.to_peak))}</td>"
            f"<td>{_e(format_bytes(r.highest))}</td>"
            f'<td{cls} style="padding-left:{8 + 14 * r.depth}px">{_e(r.site.function)}{hidden}'
            f'</td><td class="l note">{_e(where)}</td></tr>'
        )
    return (
        "<table><tr><th>time</th><th>self</th><th>RSS net growth</th><th>RSS growth to peak</th>"
        '<th>highest RSS</th><th class="l">function</th><th class="l">file</th></tr>'
        + "".join(rows)
        + "</table>"
    )


def _lines(report: Report) -> str:
    total = report.total_time or 1.0
    split = any(any(r.split) for r in report.lines)
    pool = any(len(r.split) > 4 for r in report.lines)  # a pool's CPU while the line ran
    cell = "<td>{} %</td>" if split else ""
    rows = "".join(
        f"<tr><td>{r.time / total:.1%}</td>{split_text(r, cell)}"
        f"{f'<td>{pool_share(r)} %</td>' if pool else ''}"
        f"<td>{_e(signed(r.net))}</td><td>{_e(signed(r.to_peak))}</td>"
        f'<td class="l">{_e(short_file(r.site.file))}:{r.site.line}</td>'
        f'<td class="l">{_e(r.site.function)}</td>'
        f'<td class="l"><code>{_e(r.source)}</code></td></tr>'
        for r in report.lines
    )
    heads = "<th>Python</th><th>native</th><th>system</th><th>waiting</th>" if split else ""
    heads += "<th>pool CPU</th>" if pool else ""
    return (
        f"<table><tr><th>time</th>{heads}<th>RSS net growth</th><th>RSS growth to peak</th>"
        '<th class="l">line</th><th class="l">function</th><th class="l">source</th></tr>'
        f"{rows}</table>"
    )


def to_html(report: Report) -> str:
    """The page: header, memory curves with the peak marked, the timeline on the same
    time axis, what the peak is made of, the call tree, the hot lines.

    :param report: the report
    :return: the HTML document
    """
    check_report(report)
    wall = max(report.wall, max((c.times[-1] for c in report.curves if c.times), default=0.0))
    total = report.peak.value - report.peak.start
    growth = "RSS growth per function from the start to the peak"
    body = [
        _header(report),
        _devices(report),
        "<h2>Memory over time</h2>",
        _memory_svg(report, wall),
        "<h2>Timeline: which function ran when</h2>",
        _timeline_svg(report.timeline, wall),
        *(_allocations(report.allocations) if report.allocations is not None else ()),
        f"<h2>{'What the peak is made of: ' if report.allocations is None else ''}{growth}</h2>",
        _composition(report.composition, total),
        "<h2>Call tree</h2>",
        _tree(report),
        "<h2>Hot lines</h2>",
        _lines(report),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{_e(report.program)}: report</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
