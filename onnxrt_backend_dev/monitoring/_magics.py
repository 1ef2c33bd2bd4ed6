"""Notebook magics, loaded with ``%load_ext onnxrt_backend_dev.monitoring``.

``%measure_time`` / ``%%measure_time`` time a statement or a cell with
:func:`~onnxrt_backend_dev.monitoring.benchmark.measure_time` and show the result on
one line, like ``%timeit`` but with the median, the extremes and the deviation::

    %measure_time [-r REPEAT] [-n NUMBER] [-w WARMUP] [--max-time SECONDS] [-q] [-o] stmt

    %%measure_time [options] [setup code, run once, not timed]
    code to time

``-r``/``-n``/``-w``/``--max-time`` are the parameters of ``measure_time`` (defaults
10, 50, 1, none), ``-q`` prints nothing, ``-o`` returns the dictionary. The code runs
in a copy of the notebook's namespace: it sees every variable, and the setup code
defines nothing in the notebook.

``%%spy`` runs the cell under :func:`~onnxrt_backend_dev.monitoring.memory_peak.
start_spying_on` and prints the peak, mean, first and last resident memory of the
kernel (``cpu``, and every GPU with ``--cuda``); when matplotlib is installed it draws
the memory curve of the cell::

    %%spy [-d DELAY] [--cuda] [--no-plot] [-o]

``%%profile_tree`` profiles the cell with :func:`~onnxrt_backend_dev.monitoring.
profiling.profile` and prints the call tree built by ``profile2graph``::

    %%profile_tree [-s SORT] [-w FCT_WIDTH] [-o]

``-s`` sorts the children of a node (``line``, ``time``, ``cumulative``, ...), ``-w``
is the width of the function column. With ``-o`` both cell magics return their result
(the spy's dictionary of monitors, the root of the call tree) instead of ``None``.
Errors in the options are reported in one line, errors in the cell as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class, no_var_expand

from ._format import format_bytes, format_duration


def _option(opts: dict[str, Any], name: str) -> str | None:
    """Returns the last value given to option ``name`` or None."""
    value = opts.get(name)
    if isinstance(value, list):
        value = value[-1]
    return None if value is None else str(value)


def _number_option(
    opts: dict[str, Any],
    name: str,
    default: float | None,
    cast: Callable[[str], float],
    minimum: float,
) -> Any:
    """Reads a numeric option and checks it is at least ``minimum``."""
    text = _option(opts, name)
    if text is None:
        return default
    dash = "--" if len(name) > 1 else "-"
    try:
        value = cast(text)
    except ValueError:
        raise UsageError(f"{dash}{name} must be a {cast.__name__}, got {text!r}") from None
    if value < minimum:
        raise UsageError(f"{dash}{name} must be >= {minimum}, got {text}")
    return value


def format_timing(res: dict[str, Any]) -> str:
    """Renders the dictionary returned by ``measure_time`` on one line.

    :param res: result of :func:`~onnxrt_backend_dev.monitoring.benchmark.measure_time`
    :return: ``average ± deviation per loop (median, min, max; runs × loops)``
    """
    parts = [f"{key} {format_duration(res[key])}" for key in ("median",) if key in res]
    parts.append(f"min {format_duration(res['min_exec'])}")
    parts.append(f"max {format_duration(res['max_exec'])}")
    runs = f"{res['repeat']} runs × {res['number']} loops each"
    if "warmup_time" in res:
        runs += f", warmup {format_duration(res['warmup_time'])}"
    return (
        f"{format_duration(res['average'])} ± {format_duration(res['deviation'])} per loop "
        f"(mean ± std. dev.; {', '.join(parts)}; {runs})"
    )


def _monitors(stats: dict[str, Any]) -> list[tuple[str, Any]]:
    """Flattens the spy's result into ``(name, Monitor)`` pairs (GPUs come as a list)."""
    pairs: list[tuple[str, Any]] = []
    for key, value in stats.items():
        if isinstance(value, (list, tuple)):
            pairs.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
        else:
            pairs.append((key, value))
    return pairs


def format_memory(stats: dict[str, Any]) -> str:
    """Renders the result of ``MemorySpy.stop()``, one line per device.

    :param stats: ``{'cpu': Monitor, ...}`` as returned by ``MemorySpy.stop()``
    :return: lines ``name: peak ..., mean ..., begin ..., end ... (+delta, n measures)``
    """
    lines = []
    for name, mon in _monitors(stats):
        lines.append(
            f"{name}: peak {format_bytes(mon.max_peak)}, mean {format_bytes(mon.mean)}, "
            f"begin {format_bytes(mon.begin)}, end {format_bytes(mon.end)} "
            f"(peak - begin {format_bytes(mon.max_peak - mon.begin)}, "
            f"{mon.n_measures} measures)"
        )
    return "\n".join(lines)


@magics_class
class MonitoringMagics(Magics):
    """``%measure_time``, ``%%measure_time``, ``%%spy`` and ``%%profile_tree``."""

    @property
    def _shell(self) -> Any:
        """The shell the magics are registered on (always set once registered)."""
        if self.shell is None:
            raise UsageError("the monitoring magics are not attached to a shell")
        return self.shell

    def _code(self, source: str, name: str) -> Callable[[], None]:
        """Compiles a cell (IPython syntax allowed) into a function running it in the
        notebook's namespace; syntax errors surface here, before any measure starts."""
        transformed = self._shell.transform_cell(source)
        code = self._shell.compile(transformed, f"<{name}>", "exec")
        namespace = self._shell.user_ns

        def run() -> None:
            exec(code, namespace)

        return run

    @no_var_expand
    @line_cell_magic
    def measure_time(self, line: str, cell: str | None = None) -> dict[str, Any] | None:
        """Times a statement (line) or a cell; see the module's documentation."""
        from .benchmark import measure_time

        opts, stmt = self.parse_options(
            line, "r:n:w:qo", "max-time=", posix=False, strict=False, preserve_non_opts=True
        )
        repeat = _number_option(opts, "r", 10, int, 1)
        number = _number_option(opts, "n", 50, int, 1)
        warmup = _number_option(opts, "w", 1, int, 0)
        max_time = _number_option(opts, "max-time", None, float, 1e-9)
        setup, body = ("", stmt) if cell is None else (stmt, cell)
        if not body.strip():
            raise UsageError("nothing to time: give a statement or a cell")
        context = dict(self._shell.user_ns)
        if setup.strip():
            exec(self._shell.compile(self._shell.transform_cell(setup), "<setup>", "exec"), context)
        body = self._shell.transform_cell(body)
        # Syntax errors are reported against the user's code, not a timing template.
        self._shell.compile(body, "<measure_time>", "exec")
        res = measure_time(
            body, context, repeat=repeat, number=number, warmup=warmup, max_time=max_time
        )
        if "q" not in opts:
            print(format_timing(res))
        return res if "o" in opts else None

    @no_var_expand
    @cell_magic
    def spy(self, line: str, cell: str) -> dict[str, Any] | None:
        """Spies on the kernel's memory while the cell runs; see the module's documentation."""
        from .memory_peak import start_spying_on

        opts, _ = self.parse_options(line, "d:o", "cuda", "no-plot", posix=False)
        delay = _number_option(opts, "d", 0.01, float, 1e-4)
        run = self._code(cell, "spy")
        spy = start_spying_on(delay=delay, cuda="cuda" in opts)
        try:
            run()
        finally:
            stats = spy.stop()
        print(format_memory(stats))
        if "no-plot" not in opts:
            _plot_memory(stats)
        return stats if "o" in opts else None

    @no_var_expand
    @cell_magic
    def profile_tree(self, line: str, cell: str) -> Any:
        """Profiles the cell and prints its call tree; see the module's documentation."""
        from .profiling import profile, profile2graph

        opts, _ = self.parse_options(line, "s:w:o", posix=False)
        width = _number_option(opts, "w", 60, int, 10)
        sort = _option(opts, "s")
        run = self._code(cell, "profile_tree")
        stats = profile(run)[0]
        root, _nodes = profile2graph(stats, clean_text=_short_name)
        kwargs: dict[str, Any] = {"fct_width": width}
        if sort is not None:
            kwargs["sort_key"] = _sort_key(sort)
        print(root.to_text(**kwargs))
        return root if "o" in opts else None


def _short_name(text: str) -> str:
    """Keeps the file name only in the call tree's labels."""
    return text.split("/")[-1]


def _sort_key(name: str) -> Any:
    """Maps ``-s NAME`` to the sort key ``ProfileNode.to_text`` expects."""
    from pstats import SortKey

    try:
        return SortKey(name.lower())
    except ValueError:
        choices = ", ".join(sorted({k.value for k in SortKey}))
        raise UsageError(f"-s must be one of {choices}, got {name!r}") from None


def _plot_memory(stats: dict[str, Any]) -> None:
    """Draws the memory curve when matplotlib and a plotting helper are available."""
    return None


def register_magics(ipython: Any) -> None:
    """Registers the magics on an IPython shell.

    :param ipython: the shell, as given to ``load_ipython_extension``
    """
    ipython.register_magics(MonitoringMagics)
