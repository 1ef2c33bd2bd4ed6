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
    doc = allocations_dict(check_report(report))
    return {"schema": SCHEMA, **doc, "utilisation": _clean(report.utilisation)}


def allocations_dict(section: Any) -> dict[str, Any]:
    """A section of the report (its allocations: ``spy --where --json`` writes them too),
    or the whole report, as plain values, every leaf through :func:`_clean`.

    :param section: the dataclass
    :return: the values
    """
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


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadData(f"expected a number, got {type(value).__name__}")
    return float(value)


_CLASSES = {
    c.__name__: c
    for c in (Site, Curve, Span, TreeRow, LineRow, FunctionRow, Part, Peak, Ending, Device,
              AllocLine, AllocNode, Allocations)
}  # fmt: skip
# How a field of each annotation is read; a row's null site is an empty one.
_READERS: dict[str, Any] = {
    "float": _float,
    "int": int,
    "str": str,
    "bool": bool,
    "Site": lambda doc: _site(doc) or Site("", "", 0),
    "tuple[Site, ...]": lambda docs: tuple(s for s in map(_site, docs) if s is not None),
}
# Fields read otherwise than their annotation says.
_FIELD_READERS: dict[tuple[type, str], Any] = {
    (LineRow, "split"): lambda v: tuple(map(_float, v))[:5],
    (Device, "role"): lambda v: str(v or ""),
    (Allocations, "samples"): lambda v: int(_float(v)),
}
# Keys absent from the reports written before them (a new key keeps the version): the
# field's default then.
_OPTIONAL: dict[type, set[str]] = {
    LineRow: {"split"},
    FunctionRow: {"self_cpu"},
    Device: {"role", "context", "site", "uuid"},
    Peak: {"reached", "tool"},
    AllocNode: {"source"},
    Report: {"functions", "allocations"},
}


def _read(kind: str, value: Any) -> Any:
    """A value of the field annotation ``kind`` from its plain form."""
    if kind.endswith(" | None"):
        return None if value is None else _read(kind.removesuffix(" | None"), value)
    if kind in _READERS:
        return _READERS[kind](value)
    if kind.startswith("tuple["):
        return tuple(_read(kind[len("tuple[") : -len(", ...]")], v) for v in value)
    return _object(_CLASSES[kind], value)


def _object(cls: type, doc: Any) -> Any:
    """A model dataclass from its plain form, field by field."""
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in _OPTIONAL.get(cls, ()) and f.name not in doc:
            continue
        read = _FIELD_READERS.get((cls, f.name))
        value = doc[f.name]
        values[f.name] = read(value) if read else _read(str(f.type), value)
    if cls is Curve and len(values["times"]) != len(values["values"]):
        raise BadData(
            f"curve {values['name'][:40]!r}: {len(values['times'])} times, "
            f"{len(values['values'])} values"
        )
    return cls(**values)


def from_json(text: str) -> Report:
    """Reads a report from :func:`to_json`'s text.

    :param text: the document
    :return: the report
    :raises ResultFormatError: not valid JSON, or not a report of a version this code reads
    """
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ResultFormatError(f"not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ResultFormatError(f"not a report: schema must be {SCHEMA!r}")
    if doc.get("version") != SCHEMA_VERSION:
        raise ResultFormatError(f"report version {doc.get('version')!r} is not {SCHEMA_VERSION}")
    try:
        return _object(Report, doc)
    except (KeyError, TypeError, ValueError) as e:
        raise ResultFormatError(f"malformed report: {type(e).__name__}: {e}") from None
