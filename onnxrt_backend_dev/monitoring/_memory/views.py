"""The spy's results as users get them: the model with its views bound as methods.

The model (:class:`SpyResult <.series.SpyResult>`) imports no renderer. What
``MemorySpy.stop()`` returns is a :class:`SpyReport`, the same dict with ``plot()`` and
``to_dataframe()`` (conveniences over :func:`.plot.plot_memory`, kept because the
documentation and users call them: ``stat.plot()``), whose CPU monitor's ``where`` is the
attribution (:class:`MemoryProfile <.where.MemoryProfile>`, see :func:`attach`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .series import SpyResult
from .where import attribute

if TYPE_CHECKING:
    from .._sampling.recorder import StackSamples

# The renderers are imported by the methods that use them: every ``MemorySpy.stop()``
# imports this module (``run`` does it after the program, before its report).


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
    :param samples: the running thread's stacks
    """
    where = attribute(list(monitor.series.with_ends()), samples, monitor.peak_prev_timestamp)
    monitor.where = where
    monitor.peak_stack = where.peak_labels()
