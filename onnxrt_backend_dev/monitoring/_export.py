"""How every result writes itself: one table of file suffixes (:data:`SUFFIXES`, the
commands' ``-o`` guess too), one table of the formats of each kind of result
(:data:`FORMATS`), one :func:`export` (each result's ``export(path, fmt=None)``).

Nothing here imports a renderer, nor a model: a renderer is named by
``module:function`` (or ``.method`` of the result) and imported when first used.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Collection
from typing import Any

from ._errors import BadType, BadValue

__all__ = ["FORMATS", "SUFFIXES", "export", "guess_format", "kind_of", "render"]

#: File suffix -> format, for every command and every result (the longest suffix wins:
#: ``x.speedscope.json`` is speedscope, ``x.json`` json).
SUFFIXES: dict[str, str] = {
    suffix: fmt
    for fmt, suffixes in (
        ("text", ".txt .text .log .out"),
        ("json", ".json"),
        ("html", ".html .htm"),
        ("speedscope", ".speedscope.json .speedscope"),
        ("collapsed", ".collapsed .folded"),
        ("csv", ".csv"),
        ("prof", ".prof .pstats"),
    )
    for suffix in suffixes.split()
}

#: Result kind -> format -> its renderer, ``module:function`` (relative to this package)
#: or ``.method`` (of the result).
FORMATS: dict[str, dict[str, str]] = {
    "report": {
        "text": "_report.render_text:to_text",
        "json": "_report.render_json:to_json",
        "html": "_report.render_html:to_html",
    },
    "spy": {"text": "_memory.series:summary_text", "json": ".to_json", "csv": ".to_csv"},
    "sampling": {
        "text": ".to_text",
        "json": ".to_json",
        "html": ".to_html",
        "speedscope": ".to_speedscope",
        "collapsed": ".to_collapsed",
    },
    "comparison": {
        "text": "_results.render:to_text",
        "json": "_results.render:to_json",
        "html": "_results.render:to_html",
    },
    "profile": {
        "text": "_profiling.by_view:export_text",
        "json": ".to_json",
        "html": "_profiling.by_view:to_html",
        "speedscope": "_profiling.view_paths:to_speedscope",
        "collapsed": "_profiling.view_paths:to_collapsed",
    },
}

# The class of each kind, by name (no import of the models here).
_KINDS = {
    "Report": "report",
    "SpyResult": "spy",
    "SamplingResult": "sampling",
    "ResultComparison": "comparison",
    "ProfileNode": "profile",
}


def guess_format(path: str, formats: Collection[str], default: str | None = None) -> str:
    """The format a file's suffix names (see :data:`SUFFIXES`), among ``formats``.

    :param path: the file
    :param formats: the formats the caller writes
    :param default: the format of a name without any suffix (None: refused too)
    :return: a format of ``formats``
    """
    lower = os.fspath(path).lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix) and SUFFIXES[suffix] in formats:
            return SUFFIXES[suffix]
    if default is not None and not os.path.splitext(os.path.basename(lower))[1]:
        return default
    accepted = ", ".join(s for s, f in SUFFIXES.items() if f in formats)
    raise BadValue(f"path {path!r}: cannot tell the format from its suffix, use one of {accepted}")


def kind_of(result: Any) -> str:
    """The kind of a result (a key of :data:`FORMATS`).

    :param result: a report, a spy's result, a sampling result, a comparison, a graph
    :return: the kind
    """
    for cls in type(result).__mro__:
        kind = _KINDS.get(cls.__name__)
        if kind is not None:
            return kind
    raise BadType(
        f"result must be a report, a spy's, a sampling's or a comparison's result, or a "
        f"ProfileNode, got {type(result).__name__}"
    )


def render(result: Any, fmt: str, **options: Any) -> str:
    """A result in one of its kind's formats.

    :param result: see :func:`kind_of`
    :param fmt: a format of its kind
    :param options: given to the renderer
    :return: the text
    """
    kind = kind_of(result)
    spec = FORMATS[kind].get(fmt)
    if spec is None:
        raise BadValue(f"fmt must be one of {sorted(FORMATS[kind])} for a {kind}, got {fmt!r}")
    if spec.startswith("."):
        text = getattr(result, spec[1:])(**options)
    else:
        module, function = spec.split(":")
        text = getattr(importlib.import_module("." + module, __package__), function)(
            result, **options
        )
    if not isinstance(text, str):  # a renderer returning a document: its JSON
        raise BadType(f"the {fmt} renderer of a {kind} returned {type(text).__name__}")
    return text


def export(
    result: Any, path: str | os.PathLike[str], fmt: str | None = None, **options: Any
) -> str:
    """Writes a result into ``path``, in ``fmt`` or the format its suffix names.

    :param result: see :func:`kind_of`
    :param path: the file (replaced)
    :param fmt: a format of the result's kind, None to guess it from the suffix
    :param options: given to the renderer
    :return: the format written
    """
    name = os.fspath(path)
    kind = kind_of(result)
    if fmt is None:
        fmt = guess_format(name, FORMATS[kind])
    text = render(result, fmt, **options)
    with open(name, "w", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") or not text else text + "\n")
    return fmt
