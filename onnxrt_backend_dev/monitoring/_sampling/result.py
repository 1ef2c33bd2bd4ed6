"""What a sampled run returns: the profile and its renderings."""

from __future__ import annotations

import os
from typing import Any

from .model import SampledProfile


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

    def export(self, path: str | os.PathLike[str], fmt: str | None = None, **kwargs: Any) -> str:
        """Writes the profile to ``path`` in the format its suffix names (``.txt``,
        ``.json``, ``.html``, ``.speedscope.json``, ``.collapsed``), as every result of
        the package does (see ``_export``).

        :param path: the file
        :param fmt: the format, None to guess it from the suffix
        :param kwargs: options of the renderer
        :return: the format written
        """
        from .._export import export

        return export(self, path, fmt, **kwargs)
