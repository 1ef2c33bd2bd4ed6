"""The one registry of export formats: name, file suffixes, renderer and the keywords it
takes beyond the filters. Read by :mod:`onnxrt_backend_dev.monitoring.profiling`
(``FORMATS``, ``export``), the ``profile`` command (``--format``, the guess from
``-o``'s suffix, ``--sort``, ``--view``), the magics and the docs.

A new format is one new ``render_*.py`` module and one entry in :data:`FORMATS`. The
renderers are imported when first used, so that importing the registry stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple, TextIO

from .model import ProfileNode

#: The views of the call graph that ``text`` and ``html`` render: the call tree rooted
#: at the program (``tree``) or the reference's forest (``reference``).
VIEWS = ("tree", "reference")


class Format(NamedTuple):
    """One export format (a tuple: ``FORMATS[name][0]`` is the renderer, ``[1]`` the
    usual suffix, as before the registry was typed).

    :param render: ``render(root, **options) -> str``; None for ``prof``, which writes
        the raw statistics, not a view
    :param suffix: the usual file suffix
    :param name: the name given to ``--format`` and :func:`export`
    :param suffixes: every suffix that selects the format when ``-o FILE`` is given
        without ``--format``
    :param takes: the keywords the renderer takes beyond the filters (``sort_key``,
        ``view``)
    :param binary: written from the statistics as bytes (``prof``)
    """

    render: Callable[..., str] | None
    suffix: str
    name: str
    suffixes: tuple[str, ...]
    takes: frozenset[str] = frozenset()
    binary: bool = False

    def write(self, root: ProfileNode, stream: TextIO, **options: Any) -> None:
        """Renders ``root`` into ``stream``.

        :param root: the graph
        :param stream: a text stream
        :param options: filters and the keywords of :attr:`takes`
        """
        if self.render is None:
            raise ValueError(
                f"format {self.name!r} writes the raw statistics (pstats dump_stats), "
                "not a rendering of the graph"
            )
        stream.write(self.render(root, **options))


def _lazy(module: str, function: str) -> Callable[..., str]:
    """A renderer imported from ``module`` on its first call."""

    def render(root: ProfileNode, **options: Any) -> str:
        mod = importlib.import_module(f"{__package__}.{module}")
        return str(getattr(mod, function)(root, **options))

    render.__name__ = function
    render.__qualname__ = function
    return render


_SORTED = frozenset({"sort_key"})
_VIEWED = frozenset({"sort_key", "view"})

#: The registry, by name.
FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(_lazy("export", "export_text"), ".txt", "text", (".txt",), _VIEWED),
        Format(_lazy("export", "export_json"), ".json", "json", (".json",), _SORTED),
        Format(_lazy("export", "export_html"), ".html", "html", (".html", ".htm"), _VIEWED),
        Format(
            _lazy("export", "export_speedscope"),
            ".speedscope.json",
            "speedscope",
            (".speedscope.json",),
        ),
        Format(
            _lazy("render_collapsed", "render_collapsed"),
            ".collapsed",
            "collapsed",
            (".collapsed", ".folded"),
        ),
        Format(None, ".prof", "prof", (".prof", ".pstats"), binary=True),
    )
}


def format_names(rendered_only: bool = False) -> list[str]:
    """The names of the formats, in the registry's order.

    :param rendered_only: leave out the formats that write raw statistics
    :return: names
    """
    return [f.name for f in FORMATS.values() if not (rendered_only and f.binary)]


def get_format(name: str) -> Format:
    """The format called ``name``.

    :param name: a name of :data:`FORMATS`
    :return: the format
    :raises ValueError: unknown name
    """
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ValueError(f"fmt must be one of {sorted(FORMATS)}, got {name!r}")
    return fmt


def guess_format(path: str, default: str = "text") -> str:
    """The format selected by a file's suffix, the longest suffix winning
    (``x.speedscope.json`` is speedscope, ``x.json`` json).

    :param path: the file name
    :param default: the format when no suffix matches
    :return: a format name
    """
    lower = path.lower()
    pairs = [(s, f.name) for f in FORMATS.values() for s in f.suffixes]
    pairs.sort(key=lambda p: -len(p[0]))
    return next((name for s, name in pairs if lower.endswith(s)), default)


def check_view(view: str) -> str:
    """Validates a view name.

    :param view: ``tree`` or ``reference``
    :return: the name
    :raises ValueError: any other value
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {list(VIEWS)}, got {view!r}")
    return view
