"""The report as JSON, and back.

Schema (``"schema": "onnxrt-monitoring-report"``, ``"version": 1``): the fields of
:class:`.model.Report` by name, nested values as objects with the fields of their class
(``Site``: function, file, line, library; ``Curve``: name, times, values, peak,
peak_time, source...), tuples as arrays, bytes as numbers of bytes, times in seconds
since the start. Readers must ignore keys they do not know; a new key does not change
the version, a changed meaning does.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from .._errors import BadData, ResultFormatError
from .model import (
    SCHEMA,
    SCHEMA_VERSION,
    Allocations,
    AllocLine,
    AllocNode,
    Curve,
    Device,
    Ending,
    FunctionRow,
    LineRow,
    Part,
    Peak,
    Report,
    Site,
    Span,
    TreeRow,
    check_report,
)


def _clean(value: Any) -> Any:
    """NaN and infinities are not JSON: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_dict(report: Report) -> dict[str, Any]:
    """The report as plain values (see the module's schema)."""
    doc = _plain(check_report(report))
    return {"schema": SCHEMA, **doc, "utilisation": _clean(report.utilisation)}


def _plain(section: Any) -> dict[str, Any]:
    """A dataclass as plain values, every leaf through :func:`_clean`."""
    doc = dataclasses.asdict(section)
    todo: list[Any] = [doc]
    while todo:  # explicit stack: the tree can be deep
        item = todo.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, value in list(pairs):
            if isinstance(value, (dict, list)):
                todo.append(value)
            else:
                item[key] = _clean(value)
    return doc


def allocations_dict(alloc: Allocations) -> dict[str, Any]:
    """An allocations section as plain values (the report's ``allocations`` key; ``spy
    --where --json`` writes it too).

    :param alloc: the section
    :return: the values
    """
    return _plain(alloc)


def to_json(report: Report, indent: int | None = None) -> str:
    """The report as a JSON document (``</`` escaped: the text may go into HTML).

    :param report: the report
    :param indent: as :func:`json.dumps`
    :return: the document
    """
    text = json.dumps(to_dict(report), indent=indent, ensure_ascii=False, allow_nan=False)
    return text.replace("</", "<\\/")


def _site(doc: Any) -> Site | None:
    if doc is None:
        return None
    return Site(str(doc["function"]), str(doc["file"]), int(doc["line"]), bool(doc["library"]))


def _sites(docs: Any) -> tuple[Site, ...]:
    return tuple(s for s in (_site(d) for d in docs) if s is not None)


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadData(f"expected a number, got {type(value).__name__}")
    return float(value)


def from_dict(doc: Any) -> Report:
    """Reads a report written by :func:`to_dict`.

    :param doc: the parsed JSON
    :return: the report
    :raises ResultFormatError: not a report of a version this code reads
    """
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ResultFormatError(f"not a report: schema must be {SCHEMA!r}")
    if doc.get("version") != SCHEMA_VERSION:
        raise ResultFormatError(f"report version {doc.get('version')!r} is not {SCHEMA_VERSION}")
    try:
        return _from_dict(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise ResultFormatError(f"malformed report: {type(e).__name__}: {e}") from None


def _curve(c: Any) -> Curve:
    times, values = tuple(map(_float, c["times"])), tuple(map(_float, c["values"]))
    if len(times) != len(values):
        raise BadData(f"curve {str(c['name'])[:40]!r}: {len(times)} times, {len(values)} values")
    return Curve(
        str(c["name"]), times, values, _float(c["peak"]), _float(c["peak_time"]), str(c["source"])
    )


def _tree_row(r: Any) -> TreeRow:
    site = _site(r["site"]) or Site("", "", 0)
    time, self_time, net, to_peak, highest = (
        _float(r[k]) for k in ("time", "self_time", "net", "to_peak", "highest")
    )
    return TreeRow(
        int(r["parent"]),
        int(r["depth"]),
        site,
        time,
        self_time,
        net,
        to_peak,
        highest,
        str(r["hidden"]),
    )


def _line_row(r: Any) -> LineRow:
    site = _site(r["site"]) or Site("", "", 0)
    time, net, to_peak = (_float(r[k]) for k in ("time", "net", "to_peak"))
    split = tuple(_float(x) for x in r.get("split", (0.0, 0.0, 0.0, 0.0)))[:5]
    return LineRow(site, time, net, to_peak, str(r["source"]), split)


def _function_row(r: Any) -> FunctionRow:
    site = _site(r["site"]) or Site("", "", 0)
    time, self_time, net, to_peak = (_float(r[k]) for k in ("time", "self_time", "net", "to_peak"))
    return FunctionRow(site, time, self_time, net, to_peak, _float(r.get("self_cpu", 0.0)))


def _device(d: Any) -> Device:
    # role, context, site and uuid are absent from the reports written before them.
    context, uuid = d.get("context"), d.get("uuid")
    return Device(
        str(d["name"]),
        _float(d["peak"]),
        _float(d["begin"]),
        _float(d["end"]),
        role=str(d.get("role") or ""),
        context=None if context is None else _float(context),
        site=_site(d.get("site")),
        uuid=None if uuid is None else str(uuid),
    )


def _peak(p: Any) -> Peak:
    return Peak(
        _float(p["value"]),
        _float(p["start"]),
        _float(p["time"]),
        _site(p["site"]),
        str(p["called"]),
        _sites(p["stack"]),
        str(p["source"]),
        _site(p.get("reached")),
        _float(p.get("tool", 0.0)),
    )


def _alloc_line(r: Any) -> AllocLine:
    site = _site(r["site"]) or Site("", "", 0)
    f = {k: _float(r[k]) for k in ("live_peak", "live_peak_err", "allocated", "allocated_err",
                                   "count", "temporary", "temporary_count", "live_end",
                                   "live_end_err")}  # fmt: skip
    return AllocLine(site, samples=int(r["samples"]), called=str(r["called"]),
                     native=str(r["native"]), source=str(r["source"]), **f)  # fmt: skip


def _alloc_node(n: Any) -> AllocNode:
    site = _site(n["site"]) or Site("", "", 0)
    return AllocNode(int(n["parent"]), int(n["depth"]), site, _float(n["bytes"]),
                     _float(n["err"]), str(n["hidden"]), str(n.get("source", "")))  # fmt: skip


def _allocations(a: Any) -> Allocations | None:
    if a is None:
        return None
    figures = (_float(a[k]) for k in ("mean", "samples", "peak", "peak_time", "live_peak",
                                      "live_peak_err", "allocated"))  # fmt: skip
    mean, samples, peak, peak_time, live, live_err, allocated = figures
    return Allocations(
        mean,
        int(samples),
        peak,
        peak_time,
        live,
        live_err,
        allocated,
        int(a["count"]),
        lines=tuple(_alloc_line(r) for r in a["lines"]),
        flame=tuple(_alloc_node(n) for n in a["flame"]),
        leaks=tuple(_alloc_line(r) for r in a["leaks"]),
        temporaries=tuple(_alloc_line(r) for r in a["temporaries"]),
        allocating=tuple(_alloc_line(r) for r in a["allocating"]),
        lost=int(a["lost"]),
        notes=tuple(str(n) for n in a["notes"]),
    )


def _ending(e: Any) -> Ending:
    return Ending(
        str(e["kind"]),
        int(e["code"]),
        str(e["detail"]),
        _site(e["last_site"]),
        _sites(e["last_stack"]),
    )


def _from_dict(doc: dict[str, Any]) -> Report:
    return Report(
        program=str(doc["program"]),
        wall=_float(doc["wall"]),
        cpu=None if doc["cpu"] is None else _float(doc["cpu"]),
        interval=_float(doc["interval"]),
        n_ticks=int(doc["n_ticks"]),
        peak=_peak(doc["peak"]),
        end_rss=_float(doc["end_rss"]),
        ending=_ending(doc["ending"]),
        curves=tuple(_curve(c) for c in doc["curves"]),
        devices=tuple(_device(d) for d in doc["devices"]),
        timeline=tuple(
            Span(_float(s["start"]), _float(s["end"]), int(s["row"]), str(s["label"]))
            for s in doc["timeline"]
        ),
        tree=tuple(_tree_row(r) for r in doc["tree"]),
        lines=tuple(_line_row(r) for r in doc["lines"]),
        composition=tuple(Part(str(x["label"]), _float(x["bytes"])) for x in doc["composition"]),
        pid=int(doc["pid"]),
        started=str(doc["started"]),
        dropped=int(doc["dropped"]),
        notes=tuple(str(n) for n in doc["notes"]),
        # Absent from the reports written before it: a new key keeps the version.
        functions=tuple(_function_row(r) for r in doc.get("functions", ())),
        allocations=_allocations(doc.get("allocations")),
    )


def from_json(text: str) -> Report:
    """Reads a report from :func:`to_json`'s text.

    :param text: the document
    :return: the report
    :raises ResultFormatError: not valid JSON or not a report
    """
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ResultFormatError(f"not JSON: {e}") from None
    return from_dict(doc)
