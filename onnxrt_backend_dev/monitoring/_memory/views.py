"""The spy's results as users get them: the models with their views bound as methods.

The models (:class:`SpyResult <.series.SpyResult>`, :class:`StackAttribution
<.where.StackAttribution>`) import no renderer. What ``MemorySpy.stop()`` returns is a
:class:`SpyReport`, the same dict with ``plot()`` and ``to_dataframe()``, whose CPU
monitor's ``where`` is an :class:`AttributionReport` with ``to_text()``,
``to_collapsed()`` and ``to_speedscope()``: conveniences over the renderer functions
(:func:`.plot.plot_memory`, :mod:`.where_render`), kept because the documentation and
users call them (``stat.plot()``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .series import SpyResult
from .where import StackAttribution, attribute

if TYPE_CHECKING:
    from .stacks import StackSamples

# The renderers are imported by the methods that use them: every ``MemorySpy.stop()``
# imports this module (``run`` does it after the program, before its report).


@dataclasses.dataclass
class AttributionReport(StackAttribution):
    """A :class:`StackAttribution <.where.StackAttribution>` with its views as methods."""

    @classmethod
    def of(cls, where: StackAttribution) -> AttributionReport:
        """The same attribution, with the views."""
        return cls(**{f.name: getattr(where, f.name) for f in dataclasses.fields(where)})

    def to_text(self, top: int = 10) -> str:
        """See :func:`.where_render.where_text`."""
        from .where_render import where_text

        return where_text(self, top)

    def to_collapsed(self) -> str:
        """See :func:`.where_render.where_collapsed`."""
        from .where_render import where_collapsed

        return where_collapsed(self)

    def to_speedscope(self, name: str = "memory growth") -> str:
        """See :func:`.where_render.where_speedscope`."""
        from .where_render import where_speedscope

        return where_speedscope(self, name)


class SpyReport(SpyResult):
    """A :class:`SpyResult <.series.SpyResult>` with its views as methods."""

    def to_dataframe(self) -> Any:
        """The rows of :meth:`to_rows <.series.SpyResult.to_rows>` as a pandas DataFrame
        (pandas extra), columns time, channel, bytes, label."""
        from .._optional import require

        pd = require("pandas", "pandas", "the memory series as a DataFrame")
        return pd.DataFrame(self.to_rows(), columns=["time", "channel", "bytes", "label"])

    def plot(self, ax: Any = None, unit: int = 2**20) -> Any:
        """See :func:`onnxrt_backend_dev.monitoring._memory.plot.plot_memory`."""
        from .plot import plot_memory  # matplotlib only when drawing

        return plot_memory(self, ax=ax, unit=unit)


def attach(monitor: Any, samples: StackSamples) -> None:
    """Sets ``where`` and ``peak_stack`` of the CPU monitor from the samples.

    :param monitor: the spy's CPU :class:`Monitor <.series.Monitor>`
    :param samples: the sampler's records
    """
    where = attribute(list(monitor.series.with_ends()), samples, monitor.peak_prev_timestamp)
    monitor.where = AttributionReport.of(where)
    monitor.peak_stack = where.peak_labels()
