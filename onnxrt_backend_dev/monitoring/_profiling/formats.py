"""The one registry of export formats: name, file suffixes, renderer and the keywords it
takes beyond the filters. Read by :mod:`onnxrt_backend_dev.monitoring.profiling`
(``FORMATS``, ``export``), the ``profile`` command (``--format``, the guess from
``-o``'s suffix, ``--sort``, ``--view``), the magics and the docs.

A new format is one new ``render_*.py`` module, one entry in :data:`FORMATS` and its
renderer's name in the package's table (``_export.FORMATS["profile"]``). Every renderer
is a :class:`Renderer`: the graph's root and the typed :class:`RenderOptions` (the
filters, then each format's own keywords), returning the text.

The registry imports no renderer (nor pstats, nor the model): each one is imported when
first called, so that the names, suffixes and guesses cost nothing to a command that
only reads them (``profile --help``, the sampled ``profile``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypedDict

from .._errors import BadValue
from .choices import VIEWS, check_view

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .model import FilterNode, ProfileNode
    from .view_paths import PathLimits

__all__ = ["FORMATS", "VIEWS", "Format", "RenderOptions", "Renderer", "check_view"]


class RenderOptions(TypedDict, total=False):
    """The keywords a renderer of :data:`FORMATS` accepts: the filters of
    :class:`ViewOptions <.filters.ViewOptions>`, then those of some formats."""

    hide_stdlib: bool
    min_share: float
    max_depth: int | None
    focus: str | None
    filter_node: FilterNode | None
    sort_key: Any
    view: str
    title: str
    program: str | None
    fold_share: float
    show_all: bool
    max_rows: int
    max_indent: int
    guides: str
    fct_width: int
    show_share: bool
    limits: PathLimits | None
    name: str
    unit: float


class Renderer(Protocol):
    """``render(root, **options) -> str``, ``options`` as :class:`RenderOptions`."""

    def __call__(self, root: ProfileNode, /, **options: Unpack[RenderOptions]) -> str: ...


class Format(NamedTuple):
    """One export format (a tuple: ``FORMATS[name][0]`` is the renderer, ``[1]`` the
    usual suffix).

    :param render: the renderer; None for ``prof`` (the raw statistics)
    :param suffix: the usual file suffix
    :param name: the name given to ``--format`` and :func:`export`
    :param suffixes: every suffix selecting the format for ``-o FILE``
    :param takes: the keywords the renderer takes beyond the filters
    :param binary: written from the statistics as bytes (``prof``)
    """

    render: Renderer | None
    suffix: str
    name: str
    suffixes: tuple[str, ...]
    takes: frozenset[str] = frozenset()
    binary: bool = False


def _lazy(name: str) -> Renderer:
    """The renderer of format ``name`` in the package's one table (``_export.FORMATS``),
    its module imported on first call."""

    def render(root: ProfileNode, /, **options: Unpack[RenderOptions]) -> str:
        from .._export import render

        return render(root, name, **options)

    return render


def _suffixes(name: str) -> tuple[str, ...]:
    """The suffixes of a format in the package's one table (``_export.SUFFIXES``)."""
    from .._export import SUFFIXES

    return tuple(suffix for suffix, fmt in SUFFIXES.items() if fmt == name)


_SORTED = frozenset({"sort_key"})
_VIEWED = frozenset({"sort_key", "view"})

#: The registry, by name.
FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(_lazy("text"), ".txt", "text", _suffixes("text"), _VIEWED),
        Format(_lazy("json"), ".json", "json", _suffixes("json"), _SORTED),
        Format(_lazy("html"), ".html", "html", _suffixes("html"), _VIEWED),
        Format(_lazy("speedscope"), ".speedscope.json", "speedscope", _suffixes("speedscope")),
        Format(_lazy("collapsed"), ".collapsed", "collapsed", _suffixes("collapsed")),
        Format(None, ".prof", "prof", _suffixes("prof"), binary=True),
    )
}


def format_names(rendered_only: bool = False) -> list[str]:
    """The names of the formats, in the registry's order.

    :param rendered_only: leave out the formats that write raw statistics
    :return: names
    """
    return [f.name for f in FORMATS.values() if not (rendered_only and f.binary)]


def renderer(name: str) -> Renderer:
    """The renderer of the format called ``name``.

    :param name: a name of :data:`FORMATS`
    :return: the renderer
    :raises ValueError: unknown name, or a format writing raw statistics (``prof``)
    """
    render = get_format(name).render
    if render is None:
        raise BadValue(
            f"fmt {name!r} writes the raw statistics (pstats.Stats.dump_stats), it is not "
            f"a rendering; fmt must be one of {format_names(rendered_only=True)}"
        )
    return render


def get_format(name: str) -> Format:
    """The format called ``name``.

    :param name: a name of :data:`FORMATS`
    :return: the format
    :raises ValueError: unknown name
    """
    fmt = FORMATS.get(name)
    if fmt is None:
        raise BadValue(f"fmt must be one of {sorted(FORMATS)}, got {name!r}")
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
