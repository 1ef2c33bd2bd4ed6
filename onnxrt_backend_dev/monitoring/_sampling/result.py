"""What a sampled run returns: the profile and its renderings."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .._errors import BadValue
from .model import SampledProfile

EXPORT_SUFFIXES = {
    ".txt": "text",
    ".text": "text",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
    ".speedscope": "speedscope",
    ".collapsed": "collapsed",
    ".folded": "collapsed",
}


def format_of(path: str) -> str:
    """The export format a file's suffix names (``x.speedscope.json`` is speedscope).

    :param path: the file
    :return: ``text``, ``json``, ``html``, ``speedscope`` or ``collapsed``
    """
    low = os.fspath(path).lower()
    if low.endswith(".speedscope.json"):
        return "speedscope"
    suffix = os.path.splitext(low)[1]
    fmt = EXPORT_SUFFIXES.get(suffix)
    if fmt is None:
        known = ", ".join(sorted(EXPORT_SUFFIXES))
        raise BadValue(f"path {path!r}: cannot tell the format from its suffix ({known})")
    return fmt


class SamplingResult:
    """A sampled run: :attr:`profile` (the data) and its renderings.

    :param profile: the sampled profile
    """

    def __init__(self, profile: SampledProfile) -> None:
        self.profile = profile
        self.value: Any = None  # what the sampled function returned (sample())

    def __repr__(self) -> str:
        p = self.profile
        return f"<SamplingResult {p.samples} samples, {len(p.threads)} threads, {p.duration:.3f} s>"

    def to_text(self, **kwargs: Any) -> str:
        """The call trees and hot lines as text (options of
        :func:`~.render_text.to_text`: ``fold_share``, ``show_all``, ``max_depth``,
        ``guides``, ``hot``)."""
        from .render_text import to_text

        return to_text(self.profile, **kwargs)

    def to_json(self, **kwargs: Any) -> str:
        """JSON (see :mod:`.render_json`; options ``fold_share``, ``show_all``)."""
        from .render_json import to_json

        return to_json(self.profile, **kwargs)

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """The JSON document as a dictionary."""
        from .render_json import to_dict

        return to_dict(self.profile, **kwargs)

    def to_html(self, **kwargs: Any) -> str:
        """A self-contained offline page: call trees, timeline, hot lines, search
        (options ``fold_share``, ``show_all``)."""
        from .render_html import to_html

        return to_html(self.profile, **kwargs)

    def to_speedscope(self) -> str:
        """A speedscope document, wall seconds, one root frame per thread."""
        from .._stacks.export import to_speedscope

        doc = to_speedscope(
            self.profile.weighted_stacks(), self.profile.program or "sampled", "seconds"
        )
        assert isinstance(doc, str)
        return doc

    def to_collapsed(self) -> str:
        """Collapsed stacks (flamegraph.pl, speedscope, inferno), in microseconds."""
        from .._stacks.export import to_collapsed

        return to_collapsed(self.profile.weighted_stacks(), scale=1e-6)

    def export(self, path: str | os.PathLike[str], **kwargs: Any) -> str:
        """Writes the profile to ``path`` in the format its suffix names (``.txt``,
        ``.json``, ``.html``, ``.speedscope.json``, ``.collapsed``).

        :param path: the file
        :param kwargs: options of the renderer
        :return: the format written
        """
        fmt = format_of(os.fspath(path))
        render: dict[str, Callable[..., str]] = {
            "text": self.to_text,
            "json": self.to_json,
            "html": self.to_html,
            "speedscope": self.to_speedscope,
            "collapsed": self.to_collapsed,
        }
        text = render[fmt](**kwargs)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return fmt
