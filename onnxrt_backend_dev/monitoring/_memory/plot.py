"""Draws the memory spy's retained series with matplotlib (the plot extra)."""

from __future__ import annotations

from typing import Any

from .._errors import BadValue
from .._format import format_bytes
from .._optional import require
from .frames import innermost_user

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .series import Monitor, SpyResult

# Unit of the y axis: factor -> label.
_UNIT_LABELS: dict[int, str] = {1: "B", 2**10: "KiB", 2**20: "MiB", 2**30: "GiB"}


def plot_memory(result: SpyResult, ax: Any = None, unit: int = 2**20) -> Any:
    """Draws every channel of a spy result against time, marks as vertical lines, and
    the CPU peak as a labelled marker (its value, and the function running then when the
    stacks were sampled). Never calls ``show()``: the caller saves or shows it.

    :param result: what ``MemorySpy.stop()`` returned
    :param ax: matplotlib Axes to draw on, None for a new figure
    :param unit: bytes per unit of the y axis (1, 1024, 2**20, 2**30)
    :return: the Axes
    """
    if isinstance(unit, bool) or unit not in _UNIT_LABELS:
        raise BadValue(f"unit must be one of {sorted(_UNIT_LABELS)}, got {unit!r}")
    if ax is None:
        plt = require("matplotlib.pyplot", "plot", "plotting the memory series")
        _, ax = plt.subplots(figsize=(8, 4))
    t0 = result.t0
    for mon in result.monitors():
        points = list(mon.series)
        if not points:
            continue
        label = "RSS (process)" if mon.name == "cpu" else mon.qualname
        ax.plot([t - t0 for t, _ in points], [v / unit for _, v in points], label=label)
    for t, label in result.get("marks", []):
        ax.axvline(t, color="grey", linestyle=":", linewidth=1)
        ax.annotate(
            label,
            (t, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=8,
        )
    _mark_peak(ax, result["cpu"], unit, result.t0)
    ax.set_xlabel("time since the spy started (s)")
    ax.set_ylabel(f"memory ({_UNIT_LABELS[unit]})")
    ax.set_title("memory over time (highest per tick)")
    ax.legend(loc="best")
    return ax


def _peak_words(cpu: Monitor) -> str:
    """``peak 312 MiB in build <- main`` (the functions with ``stacks=True``)."""
    words = f"peak {format_bytes(cpu.max_peak)}"
    where = cpu.where
    if where is None or not where.peak_stack:
        return words
    stack = where.peak_stack
    inner = innermost_user(stack)
    names = [stack[i].name for i in range(inner, max(-1, inner - 3), -1)]
    return f"{words} in {' <- '.join(names)}"


def _mark_peak(ax: Any, cpu: Monitor, unit: int, t0: float) -> None:
    """Marks the CPU peak with its value and, with stacks, the function that made it."""
    if not cpu.n_measures:
        return
    x, y = cpu.peak_time, cpu.max_peak / unit
    ax.plot([x], [y], marker="v", color="red", linestyle="none", label="peak")
    times = [t - t0 for t, _ in cpu.series]
    # Past the middle of the curve the words go to the left of the marker: inside the axes.
    right = bool(times) and x > (times[0] + times[-1]) / 2
    ax.annotate(
        _peak_words(cpu),
        (x, y),
        textcoords="offset points",
        xytext=(-6 if right else 6, -12),
        ha="right" if right else "left",
        fontsize=8,
        color="red",
    )
